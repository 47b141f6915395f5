"""The registered attention patterns, one module each; importing this package registers them all.

* :mod:`~attn_core.variants.builtin`: ``full``, ``truncated`` (:func:`attn_core.attention`) and
  ``graph`` (:func:`attn_core.graph_attention`).
"""

from attn_core.variants import builtin  # noqa: F401

__all__ = ["builtin"]
