"""Hostile data at the edges (issue 15): crafted pickles, truncated and corrupt files, cache
healing, paths that try to leave the cache, and a data dir that must stay untouched.

Every bad file is built in ``tmp_path``; nothing here needs the shared data."""

from __future__ import annotations

import gzip
import pickle
import time
from pathlib import Path

import pytest

from tasks.common.data import DataCorrupt, DataMissing, inside, materialize, reading, safe_unpickle
from tests.helpers.hostile import poisoned_pickle, touch_later, tree_state


# ----------------------------------------------------------------------------- pickles
@pytest.mark.parametrize("how", ["os.system", "builtins.exec", "builtins.eval", "subprocess.call", "nested in a dict"])
def test_poisoned_pickle_never_runs_and_names_the_file(tmp_path, how):
    marker = tmp_path / "PWNED"
    bad = tmp_path / "ind.cora.graph"
    poisoned_pickle(bad, marker, how)
    with pytest.raises(DataCorrupt, match=rf"{bad}: .*refused to load global") as err:
        safe_unpickle(bad)
    assert not marker.exists()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("cut", [0, 1, 10, -1])
def test_truncated_pickle_is_corrupt(tmp_path, cut):
    import numpy as np

    good = pickle.dumps({"a": np.arange(20), "b": [1, 2, 3]}, protocol=2)
    p = tmp_path / "ind.x.y"
    p.write_bytes(good[:cut] if cut >= 0 else good[:len(good) // 2])
    with pytest.raises(DataCorrupt, match=rf"{p}: (EOFError|UnpicklingError)"):
        safe_unpickle(p)


def test_safe_unpickle_reads_numpy_scipy_and_python2_pickles(tmp_path):
    import collections

    import numpy as np
    import scipy.sparse as sp

    obj = {"m": sp.csr_matrix(np.eye(3)), "a": np.arange(4.0), "g": collections.defaultdict(list, {0: [1, 2]})}
    p = tmp_path / "ok.pkl"
    p.write_bytes(pickle.dumps(obj, protocol=2))
    out = safe_unpickle(p)
    assert (out["m"].todense() == np.eye(3)).all() and out["a"].tolist() == [0, 1, 2, 3] and out["g"][0] == [1, 2]
    p.write_bytes(b"\x80\x02c__builtin__\nlist\nq\x00)\x81q\x01.")  # a Python 2 pickle naming __builtin__.list
    assert safe_unpickle(p) == []
    with pytest.raises(DataMissing, match="gone.pkl"):
        safe_unpickle(tmp_path / "gone.pkl")


# ----------------------------------------------------------------------------- materialize
def _data_dir(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "data"
    for name, body in files.items():
        (root / "ds" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "ds" / name).write_bytes(body)
    return root


@pytest.mark.parametrize("body", [b"not gzip at all", gzip.compress(b"hello\n" * 100)[:25], b"\x1f\x8b\x08garbage"],
                         ids=["no-magic", "truncated", "bad-header"])
def test_bad_gzip_source_is_corrupt_naming_the_data_dir_file(tmp_path, body):
    data = _data_dir(tmp_path, {"a.txt.gz": body})
    with pytest.raises(DataCorrupt) as err:
        materialize(["a.txt"], subdir="ds", data_dir=data, cache_dir=tmp_path / "c", dataset="demo")
    assert str(err.value).startswith(f"{data / 'ds' / 'a.txt.gz'}: ")
    assert not (tmp_path / "c" / "ds" / "a.txt").exists() and not list((tmp_path / "c" / "ds").glob(".*tmp*"))


def test_missing_is_data_missing_and_present_but_bad_is_data_corrupt(tmp_path):
    data = _data_dir(tmp_path, {"bad.txt.gz": b"xx"})
    with pytest.raises(DataMissing, match=r"demo: missing .*ds/absent\.txt\[\.gz\]"):
        materialize(["absent.txt"], subdir="ds", data_dir=data, cache_dir=tmp_path / "c", dataset="demo")
    with pytest.raises(DataCorrupt):
        materialize(["bad.txt"], subdir="ds", data_dir=data, cache_dir=tmp_path / "c", dataset="demo")
    assert issubclass(DataMissing, FileNotFoundError) and issubclass(DataCorrupt, ValueError)
    with pytest.raises(DataMissing, match="nothing.bin"), reading(tmp_path / "nothing.bin"):
        open(tmp_path / "nothing.bin", "rb")


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_cache_heals_when_the_source_changes_and_reports_a_corrupt_one(tmp_path, gz):
    name = "a.txt.gz" if gz else "a.txt"
    enc = gzip.compress if gz else (lambda b: b)
    data = _data_dir(tmp_path, {name: enc(b"version 1\n")})
    src = data / "ds" / name
    kw = dict(subdir="ds", data_dir=data, cache_dir=tmp_path / "c", dataset="demo")
    dest = materialize(["a.txt"], **kw)
    assert (dest / "a.txt").read_bytes() == b"version 1\n"
    touch_later(src, enc(b"version 2\n"))  # same size, new content: the size alone would not see it
    assert (materialize(["a.txt"], **kw) / "a.txt").read_bytes() == b"version 2\n"
    touch_later(src, b"\x1f\x8b\x08\x00broken" if gz else b"")
    if gz:  # a corrupt source is reported, never masked by the good copy made before
        with pytest.raises(DataCorrupt, match=str(src)):
            materialize(["a.txt"], **kw)
        assert not (dest / "a.txt").exists()
        with pytest.raises(DataCorrupt):  # and again on the next run
            materialize(["a.txt"], **kw)
    else:  # an emptied plain file is copied as it is (its parser reports it)
        assert (materialize(["a.txt"], **kw) / "a.txt").read_bytes() == b""
    touch_later(src, enc(b"fixed\n"))  # fixing the data dir heals the cache
    assert (materialize(["a.txt"], **kw) / "a.txt").read_bytes() == b"fixed\n"


def test_a_tampered_cache_copy_is_replaced_from_the_source(tmp_path):
    data = _data_dir(tmp_path, {"a.txt": b"good\n"})
    kw = dict(subdir="ds", data_dir=data, cache_dir=tmp_path / "c", dataset="demo")
    dest = materialize(["a.txt"], **kw)
    touch_later(dest / "a.txt", b"evil\n")
    assert (materialize(["a.txt"], **kw) / "a.txt").read_bytes() == b"good\n"


@pytest.mark.parametrize("subdir,files", [
    ("../escape", ["a.txt"]), ("/etc", ["passwd"]), ("ds/../../x", ["a.txt"]),
    ("ds", ["../../outside.txt"]), ("ds", ["/etc/passwd"]),
], ids=["dotdot-subdir", "absolute-subdir", "nested-dotdot", "dotdot-file", "absolute-file"])
def test_materialize_refuses_paths_that_leave_the_cache(tmp_path, subdir, files):
    data = _data_dir(tmp_path, {"a.txt": b"x"})
    before = tree_state(tmp_path)
    with pytest.raises(ValueError, match="leaves"):
        materialize(files, subdir=subdir, data_dir=data, cache_dir=tmp_path / "c", dataset="demo")
    assert tree_state(tmp_path) == before  # nothing written anywhere


def test_nothing_is_written_inside_the_data_dir(tmp_path):
    data = _data_dir(tmp_path, {"a.txt": b"x"})
    before = tree_state(data)
    for cache in (data, data / "cache", data / "ds"):
        with pytest.raises(ValueError, match="read-only data dir"):
            materialize(["a.txt"], subdir="ds", data_dir=data, cache_dir=cache, dataset="demo")
    assert tree_state(data) == before
    with pytest.raises(ValueError, match="leaves"):
        inside(tmp_path / "c", "..", "x", what="param")
    assert inside(tmp_path / "c", "a", "b", what="param") == tmp_path / "c" / "a" / "b"


def test_repeated_runs_leave_the_data_dir_and_the_manifest_stable(tmp_path):
    data = _data_dir(tmp_path, {"a.txt": b"1", "b.txt.gz": gzip.compress(b"2")})
    before = tree_state(data)
    kw = dict(subdir="ds", data_dir=data, cache_dir=tmp_path / "c", dataset="demo")
    materialize(["a.txt", "b.txt"], **kw)
    cached = tree_state(tmp_path / "c")
    time.sleep(0.01)
    materialize(["a.txt", "b.txt"], **kw)
    assert tree_state(tmp_path / "c") == cached  # an unchanged source is not copied again
    assert tree_state(data) == before


# ----------------------------------------------------------------------------- one-class training data
def _vision(**kw):
    from tasks.vision.data import build_synthetic

    return build_synthetic(**{"num_train": 40, "num_val": 8, "num_test": 8, **kw})


def _sbm(**kw):
    from tasks.graphs.data import build_sbm

    return build_sbm(**kw)


def _speech(**kw):
    from tasks.speech.data import build_dataset

    return build_dataset("synthetic", None, None, 0, **kw)


@pytest.mark.parametrize("build,why", [
    (_vision, r"^synthetic, training subset of train_fraction=0\.01 \(seed 3; raise train_fraction\): 1 label\(s\), "
              r"all of one class \('plus [a-z-]+'\); a classifier needs at least 2 classes \(the dataset has 4\)$"),
    (_sbm, r"^SBMDataModule, training nodes kept by train_fraction=0\.01 \(seed 3; raise train_fraction\): 1 label"),
    (_speech, r"^SyntheticDataModule, training subset of train_fraction=0\.01 \(seed 3; .*\): 1 label\(s\), all of one class"),
], ids=["vision", "graphs", "speech"])
def test_train_fraction_leaving_one_class_is_refused(build, why):
    """Before: limit_train kept one example and the cell trained a one-class classifier."""
    dm = build()
    n_classes = dm.info["num_classes"]
    assert dm.limit_train(0.5, seed=3) > 1
    with pytest.raises(ValueError, match=why):
        dm.limit_train(0.01, seed=3)
    assert n_classes > 1


@pytest.mark.parametrize("build,kw,why", [
    (_vision, {"num_train": 1}, r"^synthetic, training split: 1 label\(s\), all of one class"),
    (_sbm, {"num_classes": 2, "train_per_class": 0, "num_val": 10, "num_test": 10},
     r"^SBMDataModule, training nodes: 0 label\(s\), all of one class \(none\)"),
], ids=["vision", "graphs"])
def test_training_split_with_one_class_is_refused_at_setup(build, kw, why):
    with pytest.raises(ValueError, match=why):
        build(**kw).setup("fit")
