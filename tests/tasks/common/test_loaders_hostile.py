"""Every domain's real-data loader against hostile data dirs (issue 15): each bad file is
reported as DataMissing / DataCorrupt naming the data-dir file (and the line where the format
has lines), crafted pickles never run, dataset params cannot leave the cache, and the data dir
is never written. Bad files are built in ``tmp_path`` from small synthetic data; the checks
that need the shared data skip cleanly without it."""

from __future__ import annotations

import collections
import gzip
import pickle
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from tasks.common.data import DataCorrupt, DataMissing
from tests.helpers.hostile import poisoned_pickle, touch_later, tree_state

# ----------------------------------------------------------------------------- Planetoid
SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def write_planetoid(raw: Path, name: str = "cora", n: int = 600, n_test: int = 10, seed: int = 0) -> None:
    """A small, well-formed Planetoid raw folder (PyG needs >= 500 nodes after the training ones)."""
    rng = np.random.default_rng(seed)
    raw.mkdir(parents=True, exist_ok=True)
    feats = sp.csr_matrix((rng.random((n + n_test, 5)) > 0.6).astype(np.float32))
    labels = np.eye(3, dtype=np.int32)[rng.integers(0, 3, n + n_test)]
    graph = collections.defaultdict(list)
    for i in range(n + n_test):
        graph[i] = sorted({int(j) for j in rng.integers(0, n + n_test, 3)} - {i})
    objs = {"x": feats[:20], "y": labels[:20], "allx": feats[:n], "ally": labels[:n], "tx": feats[n:],
            "ty": labels[n:], "graph": graph}
    for k, v in objs.items():
        (raw / f"ind.{name}.{k}").write_bytes(pickle.dumps(v, protocol=2))
    test_index = rng.permutation(np.arange(n, n + n_test))
    (raw / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_index))


@pytest.fixture
def planetoid_dir(tmp_path):
    write_planetoid(tmp_path / "data" / "planetoid" / "Cora" / "raw")
    return tmp_path / "data"


def _planetoid(data_dir, cache_dir, **kw):
    from tasks.graphs.data import PlanetoidDataModule

    return PlanetoidDataModule("Cora", data_dir=data_dir, cache_dir=cache_dir, download=False, **kw)


def test_planetoid_reader_matches_pyg_on_trusted_files(planetoid_dir):
    from torch_geometric.io.planetoid import read_planetoid_data

    from tasks.graphs.data import graph_checksum, read_planetoid

    raw = planetoid_dir / "planetoid" / "Cora" / "raw"
    assert graph_checksum(read_planetoid(raw, "Cora")) == graph_checksum(read_planetoid_data(str(raw), "Cora"))


@pytest.mark.parametrize("how", ["os.system", "subprocess.call", "nested in a dict"])
@pytest.mark.parametrize("suffix", ["graph", "allx"])
def test_planetoid_poisoned_pickle_in_data_dir(planetoid_dir, tmp_path, how, suffix):
    src = planetoid_dir / "planetoid" / "Cora" / "raw" / f"ind.cora.{suffix}"
    marker = tmp_path / "PWNED"
    poisoned_pickle(src, marker, how)
    before = tree_state(planetoid_dir)
    with pytest.raises(DataCorrupt, match=rf"^{src}: .*refused to load global"):
        _planetoid(planetoid_dir, tmp_path / "cache").info
    assert not marker.exists()
    assert tree_state(planetoid_dir) == before


@pytest.mark.parametrize("suffix,body,line,why", [
    ("x", b"\x80\x02}q\x00(", None, "EOFError|UnpicklingError"),  # truncated pickle
    ("ally", b"", None, "EOFError"),
    ("graph", pickle.dumps([1, 2, 3], protocol=2), None, "expected a dict"),
    ("tx", pickle.dumps("text", protocol=2), None, "expected a 2-D numeric matrix"),
    ("test.index", b"605\n606\nseven\n", 3, "expected one integer"),
    ("test.index", b"605\n999999\n", None, "2 test node indices, but ind.cora.tx has 10 rows"),
    ("test.index", b"", None, "0 test node indices"),
])
def test_planetoid_corrupt_files_name_the_data_dir_file(planetoid_dir, tmp_path, suffix, body, line, why):
    src = planetoid_dir / "planetoid" / "Cora" / "raw" / f"ind.cora.{suffix}"
    src.write_bytes(body)
    with pytest.raises(DataCorrupt, match=why) as err:
        _planetoid(planetoid_dir, tmp_path / "cache").info
    assert err.value.file == str(src) and err.value.line == line
    assert str(err.value).startswith(f"{src}{f', line {line}' if line else ''}: ")


def _edit_pickle(path: Path, edit) -> None:
    path.write_bytes(pickle.dumps(edit(pickle.loads(path.read_bytes())), protocol=2))


def _index_lines(raw: Path, edit) -> None:
    lines = (raw / "ind.cora.test.index").read_text().split()
    (raw / "ind.cora.test.index").write_text("".join(f"{i}\n" for i in edit(lines)))


@pytest.mark.parametrize("suffix,edit,line,why", [
    ("graph", lambda g: {**g, 0: [1, 999]}, None, r"node 0 lists 999: node ids must be integers in 0\.\.609"),
    ("graph", lambda g: {**g, 3: [-1]}, None, "node 3 lists -1"),
    ("allx", lambda a: a[:-1], None, "599 rows, but ind.cora.ally has 600 \\(one row per node"),
    ("tx", lambda a: a[:, :-1], None, "4 columns, but ind.cora.x has 5"),
    ("ty", lambda a: a[:, :-1], None, "2 columns, but ind.cora.y has 3"),
    ("y", lambda a: np.eye(3, dtype=a.dtype)[np.zeros(len(a), int)], None,
     r"labelled training nodes: 20 label\(s\), all of one class \(0\); a classifier needs at least 2"),
    ("y", lambda a: np.vstack([np.zeros_like(a[:1]), a[1:]]), None, r"row 0 is not a one-hot label over 3 classes"),
    ("ty", lambda a: np.vstack([a[:4], np.ones_like(a[4:5]), a[5:]]), None, "row 4 is not a one-hot label"),
    ("test.index", lambda ls: ls[:3] + [ls[1]] + ls[4:], 4, r"node index \d+ appears twice"),
    ("test.index", lambda ls: ["599"] + ls[1:], 1, r"node index 599 is not a test node.*\(valid: 600\.\.609\)"),
])
def test_planetoid_files_that_disagree_are_refused(planetoid_dir, tmp_path, suffix, edit, line, why):
    """Before: each of these loaded silently (or failed naming ind.cora.test.index for any file)."""
    raw = planetoid_dir / "planetoid" / "Cora" / "raw"
    _index_lines(raw, edit) if suffix == "test.index" else _edit_pickle(raw / f"ind.cora.{suffix}", edit)
    with pytest.raises(DataCorrupt, match=why) as err:
        _planetoid(planetoid_dir, tmp_path / "cache").info
    assert err.value.file == str(raw / f"ind.cora.{suffix}") and err.value.line == line
    assert "\n" not in str(err.value)


def test_planetoid_unlabelled_rows_warn_naming_the_file(planetoid_dir, tmp_path):
    raw = planetoid_dir / "planetoid" / "Cora" / "raw"
    _edit_pickle(raw / "ind.cora.ally", lambda a: np.vstack([a[:30], np.zeros_like(a[30:31]), a[31:]]))
    with pytest.warns(UserWarning, match=rf"^{raw / 'ind.cora.ally'}: 1 label row\(s\) are all zero, first row 30"):
        assert _planetoid(planetoid_dir, tmp_path / "cache").info["num_nodes"] == 610


def test_planetoid_cache_heals_after_the_data_dir_is_fixed(planetoid_dir, tmp_path):
    good = _planetoid(planetoid_dir, tmp_path / "cache").checksum()
    src = planetoid_dir / "planetoid" / "Cora" / "raw" / "ind.cora.graph"
    body = src.read_bytes()
    touch_later(src, body[: len(body) // 2])
    with pytest.raises(DataCorrupt, match=str(src)):  # not masked by the good cached copy
        _planetoid(planetoid_dir, tmp_path / "cache").info
    touch_later(src, body)
    assert _planetoid(planetoid_dir, tmp_path / "cache").checksum() == good
    write_planetoid(planetoid_dir / "planetoid" / "Cora" / "raw", seed=1)  # other data: another checksum
    assert _planetoid(planetoid_dir, tmp_path / "cache").checksum() != good


def test_planetoid_matches_pyg_on_real_cora(shared_data, tmp_path):
    from torch_geometric.datasets import Planetoid

    from tasks.graphs.data import graph_checksum

    if not (shared_data / "planetoid" / "Cora" / "raw").is_dir():
        pytest.skip("shared data has no planetoid/Cora")
    shutil.copytree(shared_data / "planetoid" / "Cora", tmp_path / "pyg" / "Cora")  # PyG writes processed/
    for split in ("public", "full", "random"):
        torch.manual_seed(7)
        ref = Planetoid(str(tmp_path / "pyg"), "Cora", split=split)[0]
        ours = _planetoid(shared_data, tmp_path / "cache", split=split, split_seed=7, normalize_features=False).data
        assert graph_checksum(ours) == graph_checksum(ref), split


# ----------------------------------------------------------------------------- UD (CoNLL-U)
GOOD = "# sent_id = 1\n1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n\n"


def _ud_dir(tmp_path: Path, train: str, gz: bool = True) -> Path:
    folder = tmp_path / "data" / "ud_toy_lang_tb"
    folder.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        text = (train if split == "train" else GOOD).encode()
        name = f"xx_toy-ud-{split}.conllu"
        (folder / (name + ".gz" if gz else name)).write_bytes(gzip.compress(text) if gz else text)
    return tmp_path / "data"


def _ud(data_dir, cache_dir, **kw):
    from tasks.pos_tagging.data import build_ud

    params = {"treebank": "xx_toy", "ud_repo": "UD_Toy_Lang-TB", "download": False, **kw}
    return build_ud(None if data_dir is None else str(data_dir), str(cache_dir), 0, **params)


@pytest.mark.parametrize("bad,line,why", [
    ("3\tsat\tsit\n", 5, "expected 10 tab-separated CoNLL-U columns, got 3"),
    ("x\tsat\tsit\tVERB\t_\t_\t0\troot\t_\t_\n", 5, "bad token ID 'x'"),
    ("3\tsat\tsit\t_\t_\t_\t0\troot\t_\t_\n", 5, "word 'sat' \\(id 3\\) has no UPOS tag"),
    ("3 sat sit VERB _ _ 0 root _ _\n", 5, "got 1"),
    ("3\tsat\tsit\tFOO\t_\t_\t0\troot\t_\t_\n", 5,
     "word 'sat' \\(id 3\\) has UPOS tag 'FOO', not one of the 17 universal tags: ADJ, ADP, .*, VERB, X \\(cache copy"),
    ("3\tsat\tsit\tverb\t_\t_\t0\troot\t_\t_\n", 5, "has UPOS tag 'verb', not one of"),
])
@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
def test_ud_malformed_line_names_data_dir_file_and_line(tmp_path, bad, line, why, gz):
    data = _ud_dir(tmp_path, GOOD + bad + "\n", gz=gz)
    src = data / "ud_toy_lang_tb" / ("xx_toy-ud-train.conllu" + (".gz" if gz else ""))
    with pytest.raises(DataCorrupt, match=why) as err:
        _ud(data, tmp_path / "cache").info
    assert str(err.value).startswith(f"{src}, line {line}: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("split", ["train", "dev", "test"])
@pytest.mark.parametrize("text", ["", "\n\n", "# sent_id = 1\n# text = nothing\n\n"], ids=["empty", "blank", "comments"])
def test_ud_file_without_sentences_names_the_file(tmp_path, split, text):
    """Before: 'UDDataModule: the 'train' split is empty', no file named."""
    data = _ud_dir(tmp_path, GOOD)
    src = data / "ud_toy_lang_tb" / f"xx_toy-ud-{split}.conllu.gz"
    src.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(DataCorrupt, match=rf"^{src}: no sentence in the file \(empty, or only comments"):
        _ud(data, tmp_path / "cache").info


def test_ud_bad_bytes_and_missing_files(tmp_path):
    data = _ud_dir(tmp_path, GOOD)
    src = data / "ud_toy_lang_tb" / "xx_toy-ud-train.conllu.gz"
    touch_later(src, gzip.compress(GOOD.encode() + b"1\tcaf\xe9\tx\tNOUN\t_\t_\t0\troot\t_\t_\n\n"))
    with pytest.raises(DataCorrupt, match=rf"^{src}, line 5: not UTF-8 text \(invalid continuation byte"):
        _ud(data, tmp_path / "cache").info
    (data / "ud_toy_lang_tb" / "xx_toy-ud-dev.conllu.gz").unlink()
    with pytest.raises(DataMissing, match="xx_toy-ud-dev.conllu"):
        _ud(data, tmp_path / "cache2").info


@pytest.mark.parametrize("params", [
    {"ud_repo": "../../etc"}, {"ud_repo": "/etc"}, {"ud_repo": "UD_X-Y/../../../z"}, {"ud_repo": "UD_X-Y/.."},
    {"treebank": "../../passwd", "ud_repo": "UD_X-Y"}, {"treebank": "/etc/x", "ud_repo": "UD_X-Y"},
], ids=["dotdot", "absolute", "nested", "trailing-dotdot", "treebank-dotdot", "treebank-absolute"])
def test_ud_params_cannot_leave_the_cache(tmp_path, params):
    data = _ud_dir(tmp_path, GOOD)
    before = tree_state(tmp_path)
    with pytest.raises(ValueError, match="ud: (ud_repo|treebank)=.*must be"):
        _ud(data, tmp_path / "cache", **params)
    assert tree_state(tmp_path) == before


def test_ud_loader_leaves_the_data_dir_untouched(tmp_path):
    data = _ud_dir(tmp_path, GOOD)
    for p in data.rglob("*"):
        p.chmod(p.stat().st_mode & ~0o222)
    before = tree_state(data)
    dm = _ud(data, tmp_path / "cache")
    assert dm.info["num_train"] == 1
    _ud(data, tmp_path / "cache").info  # from the cache
    assert tree_state(data) == before


# ----------------------------------------------------------------------------- Multi30k
def _m30k(tmp_path: Path, train_en: bytes, val_de: bytes = b"ein hund\nzwei katzen\n") -> Path:
    folder = tmp_path / "data" / "multi30k"
    folder.mkdir(parents=True)
    for stem in ("train", "val", "test_2016_flickr"):
        (folder / f"{stem}.de.gz").write_bytes(gzip.compress(val_de if stem == "val" else b"ein hund\nzwei katzen\n"))
        body = train_en if stem == "train" else b"a dog\ntwo cats\n"
        (folder / f"{stem}.en.gz").write_bytes(gzip.compress(body))
    return tmp_path / "data"


@pytest.mark.parametrize("body,line,why", [
    (b"a dog\n", None, "1 lines, but the source side .*train.de.gz has 2"),
    (b"a dog\ntwo \xff cats\n", 2, "not UTF-8"),
    (b"", None, r"no sentence in the file \(0 line\(s\), all blank\); .* aligned with .*train.de.gz"),
    (b"\n \n", None, r"no sentence in the file \(2 line\(s\), all blank\)"),
])
def test_multi30k_bad_text_names_the_data_dir_file(tmp_path, body, line, why):
    from tasks.translation.data import build_multi30k

    data = _m30k(tmp_path, body)
    with pytest.raises(DataCorrupt, match=why) as err:
        build_multi30k(str(data), str(tmp_path / "cache"), 0)
    assert err.value.file == str(data / "multi30k" / "train.en.gz") and err.value.line == line


def test_multi30k_split_with_empty_files_names_the_file(tmp_path):
    """Before: 'TranslationDataModule: the 'val' split is empty' (an empty train: a sentencepiece crash)."""
    from tasks.translation.data import build_multi30k

    data = _m30k(tmp_path, b"a dog\ntwo cats\n", val_de=b"")
    with pytest.raises(DataCorrupt, match="no sentence in the file") as err:
        build_multi30k(str(data), str(tmp_path / "cache"), 0)
    assert err.value.file == str(data / "multi30k" / "val.de.gz")


def test_parallel_line_counts_differ_names_the_file(tmp_path):
    from tasks.translation.data import build_parallel

    for name, body in (("a.src", "x\ny\n"), ("a.tgt", "x\n")):
        (tmp_path / name).write_text(body)
    files = {f"{s}_{side}": str(tmp_path / f"a.{side}") for s in ("train", "val", "test") for side in ("src", "tgt")}
    with pytest.raises(DataCorrupt, match=rf"^{tmp_path / 'a.tgt'}: 1 lines, but the source side .*a.src has 2"):
        build_parallel(None, str(tmp_path / "cache"), 0, **files)


# ----------------------------------------------------------------------------- MNIST (IDX) and CIFAR
def _idx(shape: tuple[int, ...], extra: int = 0, labels: list[int] | None = None) -> bytes:
    """An IDX file of zeros (``labels``: a 1-D file of these values instead)."""
    head = struct.pack(">BBBB", 0, 0, 0x08, len(shape)) + b"".join(struct.pack(">I", d) for d in shape)
    return head + (bytes(labels) if labels is not None else bytes(int(np.prod(shape)) + extra))


def _labels(n: int, **at: int) -> bytes:
    """``n`` labels cycling through 0-9, with ``at={"i3": v}`` setting item 3 to ``v``."""
    values = [i % 10 for i in range(n)]
    for k, v in at.items():
        values[int(k[1:])] = v
    return _idx((n,), labels=values)


def _mnist_dir(tmp_path: Path, **override: bytes) -> Path:
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    files = {"train-images-idx3-ubyte": _idx((20, 28, 28)), "train-labels-idx1-ubyte": _labels(20),
             "t10k-images-idx3-ubyte": _idx((5, 28, 28)), "t10k-labels-idx1-ubyte": _labels(5), **override}
    for name, body in files.items():
        (raw / f"{name}.gz").write_bytes(gzip.compress(body))
    return tmp_path / "data"


@pytest.mark.parametrize("name,body,why", [
    ("train-images-idx3-ubyte", _idx((20, 28, 28), extra=-100), "IDX header says shape \\(20, 28, 28\\)"),
    ("t10k-images-idx3-ubyte", _idx((5, 28, 28), extra=7), "but the file has"),
    ("train-labels-idx1-ubyte", b"\x08\x03junk", "not an IDX file"),
    ("t10k-labels-idx1-ubyte", _idx((4,)), "4 labels for 5 images"),
    ("train-labels-idx1-ubyte", _idx((20,))[:6], "IDX header is truncated"),
    ("train-labels-idx1-ubyte", _labels(20, i3=10), r"label 10 of item 3 is not a class of mnist \(valid labels: 0-9"),
    ("t10k-labels-idx1-ubyte", _labels(5, i4=255), r"label 255 of item 4 is not a class of mnist"),
    ("train-labels-idx1-ubyte", _idx((20,), labels=[7] * 20),
     r"training split: 20 label\(s\), all of one class \('7'\); a classifier needs at least 2 classes \(the dataset has 10\)"),
    ("t10k-images-idx3-ubyte", _idx((5 * 28 * 28,)), r"IDX header has 1 dimension\(s\) \(3920,\); expected 3"),
    ("train-labels-idx1-ubyte", _idx((20, 1)), r"IDX header has 2 dimension\(s\) \(20, 1\); expected 1"),
])
def test_mnist_bad_idx_names_the_data_dir_file(tmp_path, name, body, why):
    from tasks.vision.data import build_torchvision

    data = _mnist_dir(tmp_path, **{name: body})
    dm = build_torchvision("mnist", str(data), str(tmp_path / "cache"), 0, val_size=2, download=False)
    with pytest.raises(DataCorrupt, match=why) as err:
        dm.info
    assert err.value.file == str(data / "MNIST" / "raw" / f"{name}.gz")


def test_mnist_well_formed_idx_loads(tmp_path):
    from tasks.vision.data import build_torchvision

    dm = build_torchvision("mnist", str(_mnist_dir(tmp_path)), str(tmp_path / "cache"), 0, val_size=2, download=False)
    assert (dm.info["num_train"], dm.info["num_val"], dm.info["num_test"]) == (18, 2, 5)


def test_cifar_poisoned_pickle_is_refused_before_loading(tmp_path):
    from tasks.vision.data import TORCHVISION_SOURCES, build_torchvision

    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    marker = tmp_path / "PWNED"
    for name in TORCHVISION_SOURCES["cifar10"][2]:
        poisoned_pickle(folder / name, marker, "os.system")
    dm = build_torchvision("cifar10", str(tmp_path / "data"), str(tmp_path / "cache"), 0, download=False)
    with pytest.raises(DataCorrupt, match=r"data_batch_1: MD5 differs"):
        dm.info
    assert not marker.exists()


# ----------------------------------------------------------------------------- FSDD (wav)
@pytest.fixture
def few_recordings(monkeypatch):
    """FSDD with 7 recordings per digit (indices 0-4 test, 5-6 train/val): fast to build."""
    monkeypatch.setattr("tasks.speech.data.FSDD_INDICES", range(7))


def _fsdd_dir(tmp_path: Path, rate: int = 8000) -> Path:
    import soundfile

    from tasks.speech.data import fsdd_files

    root = tmp_path / "data" / "fsdd"
    g = np.random.default_rng(0)
    for f in fsdd_files(["george"]):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(root / f), (0.1 * g.standard_normal(400)).astype(np.float32), rate)
    return tmp_path / "data"


def _fsdd(data_dir, cache_dir):
    from tasks.speech.data import build_dataset

    return build_dataset("fsdd", str(data_dir), str(cache_dir), 0, speakers=["george"])


@pytest.mark.parametrize("body,why", [(b"RIFF\x00\x00junk", "LibsndfileError|RuntimeError|Error"), (b"", "Error")])
def test_fsdd_bad_wav_names_the_data_dir_file(tmp_path, few_recordings, body, why):
    data = _fsdd_dir(tmp_path)
    bad = data / "fsdd" / "recordings" / "3_george_6.wav"
    bad.write_bytes(body)
    with pytest.raises(DataCorrupt, match=why) as err:
        _fsdd(data, tmp_path / "cache").info
    assert err.value.file == str(bad) and "\n" not in str(err.value)


def test_fsdd_wrong_rate_and_feature_cache_keyed_by_source(tmp_path, few_recordings):
    import soundfile

    data = _fsdd_dir(tmp_path)
    before = tree_state(data)
    first = _fsdd(data, tmp_path / "cache").checksum()
    assert _fsdd(data, tmp_path / "cache").checksum() == first  # from the feature cache
    assert tree_state(data) == before
    wav = data / "fsdd" / "recordings" / "3_george_6.wav"
    soundfile.write(str(wav), np.zeros(400, dtype=np.float32), 16000)
    with pytest.raises(DataCorrupt, match="sample rate 16000 Hz, expected 8000 Hz"):  # not masked by the cache
        _fsdd(data, tmp_path / "cache").info
    soundfile.write(str(wav), np.full(400, 0.05, dtype=np.float32), 8000)
    assert _fsdd(data, tmp_path / "cache").checksum() != first  # new audio -> new features


def _riff(body: bytes, riff: int | None = None, data: int | None = None, cut: int = 0, tail: bytes = b"") -> bytes:
    """``body`` (a canonical 44-byte-header wav) with its RIFF or data-chunk size replaced, cut or extended."""
    out = body[:4] + struct.pack("<I", riff if riff is not None else len(body) - 8) + body[8:40]
    out += struct.pack("<I", data if data is not None else len(body) - 44) + body[44:]
    return (out[:-cut] if cut else out) + tail


@pytest.mark.parametrize("edit,why", [
    (lambda b: _riff(b, cut=len(b) // 2), r"wav header declares 800 bytes of audio but only \d+ follow \(the file is truncated"),
    (lambda b: _riff(b, cut=1), "wav header declares 800 bytes of audio but only 799 follow"),
    (lambda b: _riff(b, data=100), r"only 50 audio samples \(6\.2 ms\); at least 129 \(16 ms, one analysis window\)"),
])
def test_fsdd_wav_header_disagreeing_with_its_size_is_refused(tmp_path, few_recordings, edit, why):
    """Before: the truncated files loaded silently (libsndfile reads what is there); a too-short
    one failed in the feature extraction ('Padding size should be less than ...'), no file named."""
    data = _fsdd_dir(tmp_path)
    bad = data / "fsdd" / "recordings" / "3_george_6.wav"
    bad.write_bytes(edit(bad.read_bytes()))
    with pytest.raises(DataCorrupt, match=why) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the data-size edit also leaves bytes that are no chunk: a warning
        _fsdd(data, tmp_path / "cache").info
    assert err.value.file == str(bad) and "\n" not in str(err.value)


@pytest.mark.parametrize("edit,why", [
    (lambda b: _riff(b, tail=b"\x01" * 101), r"101 bytes at offset 844 are not a wav chunk \(ignored"),
    (lambda b: _riff(b, riff=10**6), "the RIFF header says 1000008 bytes, the file has 844"),
])
def test_fsdd_wav_with_extra_bytes_or_wrong_riff_size_warns_naming_the_file(tmp_path, few_recordings, edit, why):
    data = _fsdd_dir(tmp_path)
    bad = data / "fsdd" / "recordings" / "3_george_6.wav"
    bad.write_bytes(edit(bad.read_bytes()))
    with pytest.warns(UserWarning, match=rf"^{bad}: {why}"):
        assert _fsdd(data, tmp_path / "cache").info["num_classes"] == 10
