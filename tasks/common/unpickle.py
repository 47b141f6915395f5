"""Unpickling data files without letting them run code: only numpy arrays, scipy sparse matrices
and plain builtins may be named (:func:`tasks.common.data.safe_unpickle` reads through it)."""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["SAFE_PICKLE_GLOBALS", "RestrictedUnpickler"]

#: Globals a data pickle may name: numpy arrays, scipy sparse matrices and plain builtins.
SAFE_PICKLE_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    [(f"numpy.{c}core.multiarray", n) for c in ("", "_") for n in ("_reconstruct", "scalar")]
    + [(f"scipy.sparse.{u}{k}", f"{k}_matrix") for u in ("", "_") for k in ("csr", "csc", "coo")]
    + [(b, n) for b in ("builtins", "__builtin__") for n in "list dict set frozenset tuple int float complex bool "
       "str bytes bytearray object unicode long".split()]
    + [("numpy", "ndarray"), ("numpy", "dtype"), ("collections", "defaultdict"), ("collections", "OrderedDict"),
       ("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"), ("_codecs", "encode")])  # bytes, protocol 2


class RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in SAFE_PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"refused to load global {module}.{name} (allowed: numpy arrays, scipy "
                                         f"sparse matrices, builtins); the file may be crafted to run code")
        return super().find_class(module, name)
