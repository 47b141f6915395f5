"""Speech data: spoken words as feature frames, in two task forms.

* ``classify``: one utterance -> its word (``x (L, F)``, ``y`` an int).
* ``tag``: a long input made by concatenating utterances of one split with silence between
  them (:func:`concatenate`), every frame labelled with its word or ``silence`` (the last class):
  ``x (L, F)``, ``y (L,)``. Frame labels come from per-sample labels with the features' framing
  (:func:`tasks.speech.features.frame_labels`), so they line up with the audio exactly.

Datasets (``DATASETS``; every one is a :class:`SpeechDataModule`):

* ``fsdd`` / ``fsdd_frames``: the Free Spoken Digit Dataset (8 kHz wav, 6 speakers, 10 digits,
  50 recordings per speaker and digit), read with ``soundfile``. Upstream split: recordings with
  index 0-4 are the test set; a ``val_fraction`` of the rest is carved out for validation by
  ``split_seed``. Files come from ``<data_dir>/fsdd/recordings`` (copied into the cache), else
  the cache, else upstream (the v1.0.10 release archive).
* ``speech_commands``: Speech Commands v0.02 / v0.01 in torchaudio's ``SPEECHCOMMANDS`` layout
  (``<root>/SpeechCommands/speech_commands_v0.0x/<word>/<file>.wav`` with the official
  ``validation_list.txt`` and ``testing_list.txt``); torchaudio finds the files (and downloads
  the archive into the cache when no copy exists), ``soundfile`` reads them.
* ``synthetic`` / ``synthetic_frames``: spoken-word-like audio generated in code from
  ``data_seed`` (:func:`make_synthetic`): every word is a different ORDER of the same
  formant-like "phones", so a model that ignores order and context is at chance.

Features (log-mel or MFCC, 25 ms / 10 ms, per-utterance normalisation) are computed once and
cached (``<cache_dir>/speech/<dataset>-<hash of the params>.pt``, rebuilt when the size or mtime
of a source audio file changes); synthetic data is regenerated (it is fast and needs no cache).
An unreadable wav raises :class:`~tasks.common.data.DataCorrupt` naming the data-dir file.

Where things live: this module holds the real corpora (FSDD, Speech Commands, reading wavs) and
the dataset table (:data:`DATASET_DEFAULTS`, :func:`build_dataset`);
:mod:`tasks.speech.datamodule` the task forms, feature cache and batching
(:class:`SpeechDataModule`, :func:`concatenate`); :mod:`tasks.speech.synthetic` the generated
data. Their public names are re-exported here.
"""

from __future__ import annotations

import os
import struct
import urllib.request
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from tasks.common.data import DataMissing, corrupt, default_cache_dir, file_stamp, materialize, origin, reading
# Re-exported: callers import the forms, the base class and the generated data from here.
from tasks.speech.datamodule import FORMS, IGNORE, SILENCE, SPLITS, SpeechDataModule, Utterance, concatenate  # noqa: F401
from tasks.speech.features import FeatureConfig
from tasks.speech.synthetic import SYNTH_RATE, SyntheticDataModule, make_synthetic  # noqa: F401

__all__ = [
    "FORMS",
    "SILENCE",
    "SpeechDataModule",
    "concatenate",
    "make_synthetic",
    "fsdd_files",
    "fsdd_split",
    "DATASET_DEFAULTS",
    "build_dataset",
]

# ============================================================================ FSDD
FSDD_SPEAKERS = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")
FSDD_INDICES = range(50)
FSDD_TEST_INDICES = range(5)  # upstream: index 0-4 is the test set
FSDD_URL = "https://github.com/Jakobovski/free-spoken-digit-dataset/archive/refs/tags/v1.0.10.zip"
FSDD_RATE = 8000


def fsdd_files(speakers: Sequence[str] = FSDD_SPEAKERS) -> list[str]:
    """``recordings/{digit}_{speaker}_{index}.wav`` for every digit, speaker and index."""
    return [f"recordings/{d}_{s}_{i}.wav" for s in speakers for d in range(10) for i in FSDD_INDICES]


def fsdd_split(files: Sequence[str], val_fraction: float, split_seed: int) -> dict[str, list[str]]:
    """Upstream split (index 0-4 -> test, the rest -> train), then a seeded random
    ``val_fraction`` of train -> val."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction={val_fraction!r}; must be in (0, 1)")
    test = [f for f in files if int(Path(f).stem.split("_")[2]) in FSDD_TEST_INDICES]
    rest = [f for f in files if int(Path(f).stem.split("_")[2]) not in FSDD_TEST_INDICES]
    perm = torch.randperm(len(rest), generator=torch.Generator().manual_seed(split_seed)).tolist()
    n_val = max(1, round(val_fraction * len(rest)))
    val_idx = set(perm[:n_val])
    return {
        "train": [f for i, f in enumerate(rest) if i not in val_idx],
        "val": [f for i, f in enumerate(rest) if i in val_idx],
        "test": test,
    }


def _download_fsdd(dest: Path) -> None:
    """Fetch the v1.0.10 release archive and unpack its ``recordings/`` into ``dest``."""
    tmp = dest / ".fsdd-download.zip"
    urllib.request.urlretrieve(FSDD_URL, tmp)  # noqa: S310 - fixed https URL
    try:
        with zipfile.ZipFile(tmp) as zf:
            for name in zf.namelist():
                parts = name.split("/")
                if len(parts) >= 3 and parts[-2] == "recordings" and parts[-1].endswith(".wav"):
                    target = dest / "recordings" / parts[-1]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(name))
    finally:
        tmp.unlink(missing_ok=True)


def _check_riff(path: Path) -> None:
    """Compare a RIFF/WAVE file's chunk sizes with its size (libsndfile silently reads a
    truncated file): audio data cut short is :class:`~tasks.common.data.DataCorrupt`; a RIFF size
    or trailing bytes that disagree with the file get a warning naming the data-dir file."""
    with reading(path), open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:] != b"WAVE":
            return  # not RIFF/WAVE: soundfile says what it is
        riff_end, off, problem = 8 + struct.unpack("<I", head[4:8])[0], 12, None
        while off + 8 <= size:
            fh.seek(off)
            cid, csize = struct.unpack("<4sI", fh.read(8))
            if cid == b"data" and off + 8 + csize > size:
                raise corrupt(path, f"wav header declares {csize} bytes of audio but only {size - off - 8} follow "
                                    f"(the file is truncated or its header damaged)")
            if not all(32 <= c < 127 for c in cid) or off + 8 + csize > size:
                problem = (f"{size - off} bytes at offset {off} are not a wav chunk (ignored; a chunk size in the "
                           f"header may be wrong)")
                break
            off += 8 + csize + (csize & 1)
    if problem is None and riff_end != size:
        problem = f"the RIFF header says {riff_end} bytes, the file has {size}"
    if problem is not None:
        warnings.warn(f"{origin(path)}: {problem}", stacklevel=3)


def _read_wav(path: Path, expected_rate: int) -> Tensor:
    """A mono float32 waveform; an unreadable, truncated or too short file, or another sample
    rate, is :class:`~tasks.common.data.DataCorrupt` naming the data-dir file."""
    import soundfile

    _check_riff(path)
    with reading(path):
        wave, sr = soundfile.read(str(path), dtype="float32", always_2d=False)
    if sr != expected_rate:
        raise corrupt(path, f"sample rate {sr} Hz, expected {expected_rate} Hz")
    if wave.ndim not in (1, 2) or wave.shape[0] == 0:
        raise corrupt(path, f"no audio samples (shape {wave.shape})")
    shortest = FeatureConfig(sample_rate=sr).n_fft // 2 + 1  # the features' centred analysis window
    if wave.shape[0] < shortest:
        raise corrupt(path, f"only {wave.shape[0]} audio samples ({1000 * wave.shape[0] / sr:.1f} ms); at least "
                            f"{shortest} ({1000 * shortest / sr:.0f} ms, one analysis window) are needed")
    if wave.ndim == 2:
        wave = wave.mean(1)
    return torch.from_numpy(wave)


class FSDDDataModule(SpeechDataModule):
    """Free Spoken Digit Dataset (see the module docstring); ``speakers`` selects a subset."""

    cache_name = "fsdd"

    def __init__(self, *, speakers: Sequence[str] | None = None, val_fraction: float = 0.1, split_seed: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        speakers = list(FSDD_SPEAKERS if speakers is None else speakers)
        bad = [s for s in speakers if s not in FSDD_SPEAKERS]
        if bad or not speakers:
            raise ValueError(f"speakers={speakers!r}: unknown {bad!r}; valid: {', '.join(FSDD_SPEAKERS)}")
        self.speakers, self.val_fraction, self.split_seed = speakers, float(val_fraction), int(split_seed)
        self.files = fsdd_split(fsdd_files(speakers), self.val_fraction, self.split_seed)  # validates val_fraction

    def _materialize(self) -> Path:
        """The cache folder holding every file (copied from ``data_dir`` when they changed)."""
        files = [f for s in SPLITS for f in self.files[s]]
        return materialize(files, subdir="fsdd", data_dir=self.data_dir, cache_dir=self.cache_dir, dataset="fsdd",
                           download=_download_fsdd)

    def cache_params(self) -> dict[str, Any]:
        return {"speakers": self.speakers, "val_fraction": self.val_fraction, "split_seed": self.split_seed}

    def source_stamp(self) -> str | None:
        try:
            root = self._materialize()  # the cache copies change whenever their data-dir files do
        except DataMissing:
            return None
        return file_stamp(root / f for s in SPLITS for f in self.files[s])

    def utterances(self) -> tuple[dict[str, list[Utterance]], list[str], int]:
        root = self._materialize()
        utts = {s: [(_read_wav(root / f, FSDD_RATE), int(Path(f).stem.split("_")[0])) for f in self.files[s]]
                for s in SPLITS}
        return utts, [str(d) for d in range(10)], FSDD_RATE


# ============================================================================ Speech Commands
SC_VERSIONS = ("v0.02", "v0.01")
SC_RATE = 16000


class SpeechCommandsDataModule(SpeechDataModule):
    """Speech Commands (classification of the word folders; ``_background_noise_`` is left
    out) with the official validation and testing lists. ``max_per_class`` keeps at most that
    many training files per word (the first in sorted order; ``None`` = all) for short runs.
    ``download``: fetch the archive (2.3 GB for v0.02) into the cache when no copy is found."""

    cache_name = "speech_commands"

    def __init__(self, *, version: str = "v0.02", max_per_class: int | None = None, download: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.download = bool(download)
        if version not in SC_VERSIONS:
            raise ValueError(f"version={version!r}; valid: {', '.join(SC_VERSIONS)}")
        if max_per_class is not None and (not isinstance(max_per_class, int) or max_per_class < 1):
            raise ValueError(f"max_per_class={max_per_class!r}; must be a positive integer or null")
        self.version, self.max_per_class = version, max_per_class

    def cache_params(self) -> dict[str, Any]:
        return {"version": self.version, "max_per_class": self.max_per_class}

    def source_stamp(self) -> str | None:
        folder = self._root()[0] / "SpeechCommands" / f"speech_commands_{self.version}"
        return file_stamp(sorted(p for p in folder.rglob("*") if p.is_file())) if folder.is_dir() else None

    def _root(self) -> tuple[Path, bool]:
        """The folder holding ``SpeechCommands/speech_commands_<version>``, and whether it must be downloaded."""
        sub = Path("SpeechCommands") / f"speech_commands_{self.version}"
        cache = Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()
        for root in ([Path(self.data_dir)] if self.data_dir is not None else []) + [cache]:
            if (root / sub).is_dir():
                return root, False
        return cache, True

    def utterances(self) -> tuple[dict[str, list[Utterance]], list[str], int]:
        from torchaudio.datasets import SPEECHCOMMANDS

        root, download = self._root()
        url = f"speech_commands_{self.version}"
        if download and not self.download:
            where = [Path(p) / "SpeechCommands" / url for p in (self.data_dir, root) if p is not None]
            raise DataMissing(f"speech_commands: none of {', '.join(map(str, where))} exists and download=false")
        meta: dict[str, list[tuple[str, str]]] = {}
        for split, subset in (("train", "training"), ("val", "validation"), ("test", "testing")):
            try:
                ds = SPEECHCOMMANDS(root, url=url, download=download, subset=subset)
            except Exception as err:  # no network, missing list file, ...
                where = Path(self.data_dir or root) / "SpeechCommands" / url
                raise DataMissing(
                    f"speech_commands: no {where} (torchaudio SPEECHCOMMANDS layout with validation_list.txt "
                    f"and testing_list.txt) and the download failed ({type(err).__name__}: {err})") from err
            download = False
            meta[split] = [ds.get_metadata(i)[0:3:2] for i in range(len(ds))]  # (relpath, label)
        names = sorted({lab for rel, lab in meta["train"]})
        if not names:
            raise DataMissing(f"speech_commands: no training files under {root / 'SpeechCommands' / url}")
        index = {n: i for i, n in enumerate(names)}
        if self.max_per_class is not None:
            seen: dict[str, int] = {}
            keep = []
            for rel, lab in meta["train"]:
                seen[lab] = seen.get(lab, 0) + 1
                if seen[lab] <= self.max_per_class:
                    keep.append((rel, lab))
            meta["train"] = keep
        base = root / "SpeechCommands"
        utts = {s: [(_read_wav(base / rel, SC_RATE), index[lab]) for rel, lab in meta[s] if lab in index]
                for s in SPLITS}
        return utts, names, SC_RATE


# ============================================================================ registry glue
_COMMON = {"feature": "logmel", "n_features": 40, "normalize": True}
_FRAMES = {"data_seed": 0, "min_gap": 10, "max_gap": 60, "passes": 1, "noise": 1e-3}

#: name -> (class, form, default params, synthetic, description)
DATASET_DEFAULTS: dict[str, tuple[type, str, dict[str, Any], bool, str]] = {
    "fsdd": (
        FSDDDataModule, "classify",
        {**_COMMON, "val_fraction": 0.1, "split_seed": 0, "speakers": None, "batch_size": 32, "max_tokens": None},
        False, "Free Spoken Digit Dataset, utterance classification (upstream split: index 0-4 = test)",
    ),
    "fsdd_frames": (
        FSDDDataModule, "tag",
        {**_COMMON, **_FRAMES, "val_fraction": 0.1, "split_seed": 0, "speakers": None, "min_frames": 1000,
         "max_frames": 5000, "batch_size": 8, "max_tokens": 16000},
        False, "FSDD utterances concatenated with silence (1000-5000 frames), frame tagging (word or silence)",
    ),
    "speech_commands": (
        SpeechCommandsDataModule, "classify",
        {**_COMMON, "version": "v0.02", "max_per_class": None, "download": True, "batch_size": 64, "max_tokens": None},
        False, "Speech Commands (torchaudio layout, official validation/testing lists), word classification",
    ),
    "synthetic": (
        SyntheticDataModule, "classify",
        {**_COMMON, "data_seed": 0, "num_classes": 8, "num_phones": 4, "per_class": [16, 6, 12], "snr_db": 10.0,
         "phones_per_word": None, "phone_frames": None, "batch_size": 16, "max_tokens": None},
        True, "synthetic words: orders of the same formant-like phones in noise (order decides the class)",
    ),
    "synthetic_frames": (
        SyntheticDataModule, "tag",
        {**_COMMON, **_FRAMES, "num_classes": 8, "num_phones": 4, "per_class": [40, 10, 20], "snr_db": 10.0,
         "min_frames": 300, "max_frames": 800, "min_gap": 5, "max_gap": 30, "batch_size": 8, "max_tokens": 6000},
        True, "synthetic words concatenated with silence, frame tagging",
    ),
}


def build_dataset(name: str, data_dir: str | None, cache_dir: str | None, seed: int, **params: Any) -> SpeechDataModule:
    """``DatasetSpec.build`` for dataset ``name``: the run ``seed`` only shuffles batches (the data
    itself depends on ``data_seed`` / ``split_seed``). Unknown parameter names are errors."""
    cls, form, defaults, _, _ = DATASET_DEFAULTS[name]
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"dataset {name!r}: unknown params {unknown}; valid: {', '.join(sorted(defaults))}")
    return cls(form=form, data_dir=data_dir, cache_dir=cache_dir, shuffle_seed=int(seed), **{**defaults, **params})


def builder(name: str) -> Callable[..., SpeechDataModule]:
    import functools

    return functools.partial(build_dataset, name)
