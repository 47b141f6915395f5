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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import Tensor
from torch.utils.data import Dataset

from tasks.common.data import (DataMissing, SplitDataModule, corrupt, default_cache_dir, file_lock, file_stamp, materialize,
                               pad_sequences, reading, write_atomic)
from tasks.speech.features import FeatureConfig, extract, frame_labels

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

FORMS = ("classify", "tag")
SILENCE = "silence"
SPLITS = ("train", "val", "test")
IGNORE = -100  # label of padded frames (cross_entropy's ignore_index)

Utterance = tuple[Tensor, int]  # (wave (n,), label)

# ============================================================================ concatenation
def concatenate(
    utts: Sequence[Utterance],
    *,
    silence_label: int,
    hop: int,
    min_frames: int,
    max_frames: int,
    min_gap: int,
    max_gap: int,
    noise: float,
    generator: torch.Generator,
) -> list[tuple[Tensor, Tensor, list[tuple[int, int, int]]]]:
    """Concatenate ``utts`` (in a random order) into long inputs with silence between them.

    Each output has a length drawn uniformly from ``[min_frames, max_frames]`` frames (a
    ``1 + n // hop`` framing, so ``(frames - 1) * hop`` samples): a gap of ``min_gap..max_gap``
    frames of silence (Gaussian noise of std ``noise``), an utterance, a gap, ... , and silence
    up to the length. An utterance that does not fit closes the input; the last input is filled
    with silence to its length. Every utterance is used once.

    Returns ``[(wave (n,), sample_labels (n,), segments [(start, end, label)])]`` with
    ``sample_labels`` the word label on the utterance's samples and ``silence_label`` elsewhere;
    ``segments`` give each utterance's sample range ``[start, end)``.
    """
    if not 1 <= min_frames <= max_frames:
        raise ValueError(f"need 1 <= min_frames <= max_frames, got min_frames={min_frames}, max_frames={max_frames}")
    if not 0 <= min_gap <= max_gap:
        raise ValueError(f"need 0 <= min_gap <= max_gap, got min_gap={min_gap}, max_gap={max_gap}")
    order = torch.randperm(len(utts), generator=generator).tolist()

    def randint(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=generator))

    out = []
    pos = 0
    while pos < len(order):
        total = (randint(min_frames, max_frames) - 1) * hop  # samples
        pieces: list[Tensor] = []
        labels: list[Tensor] = []
        segments: list[tuple[int, int, int]] = []
        n = 0
        while pos < len(order):
            wave, label = utts[order[pos]]
            gap = randint(min_gap, max_gap) * hop
            if n + gap + wave.shape[0] + min_gap * hop > total:
                if not segments:  # an utterance longer than the input: give it its own input
                    total = n + gap + wave.shape[0] + min_gap * hop
                else:
                    break
            pieces += [torch.randn(gap, generator=generator) * noise, wave + torch.randn(wave.shape[0], generator=generator) * noise]
            labels += [torch.full((gap,), silence_label), torch.full((wave.shape[0],), label)]
            segments.append((n + gap, n + gap + wave.shape[0], label))
            n += gap + wave.shape[0]
            pos += 1
        rest = total - n
        pieces.append(torch.randn(rest, generator=generator) * noise)
        labels.append(torch.full((rest,), silence_label))
        out.append((torch.cat(pieces).float(), torch.cat(labels).long(), segments))
    return out


# ============================================================================ datasets
class _Items(Dataset):
    """A list of ``(x (L, F), y)`` items."""

    def __init__(self, items: list[tuple[Tensor, Any]]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[Tensor, Any]:
        return self.items[i]


class SpeechDataModule(SplitDataModule):
    """Feature frames of one dataset in one task form.

    Subclasses provide :meth:`utterances` -> ``({split: [(wave, label)]}, label names,
    sample_rate)``; this class turns them into features (``classify``) or concatenations with
    frame labels (``tag``), caches the result when :attr:`cache_name` is set, and batches:
    ``{"x": (B, L, F) float, "mask": (B, L) bool True = real frame, "y": (B,) or (B, L) long
    with -100 on padding}``, bucketed by length (``max_tokens`` bounds the padded frames of a
    batch).
    """

    cache_name: str | None = None  # None: no feature cache (synthetic data)

    def __init__(
        self,
        *,
        form: str,
        feature: str = "logmel",
        n_features: int = 40,
        normalize: bool = True,
        data_seed: int = 0,
        min_frames: int = 1000,
        max_frames: int = 5000,
        min_gap: int = 10,
        max_gap: int = 60,
        passes: int = 1,
        noise: float = 1e-3,
        data_dir: str | os.PathLike | None = None,
        cache_dir: str | os.PathLike | None = None,
        batch_size: int = 32,
        max_tokens: int | None = None,
        shuffle_seed: int = 0,
    ) -> None:
        super().__init__(batch_size=batch_size, max_tokens=max_tokens, shuffle_seed=shuffle_seed)
        if form not in FORMS:
            raise ValueError(f"form={form!r}; valid: {', '.join(FORMS)}")
        if not isinstance(passes, int) or passes < 1:
            raise ValueError(f"passes={passes!r}; must be a positive integer")
        self.form = form
        self.feature_kind, self.n_features, self.normalize = feature, n_features, normalize
        FeatureConfig(feature, n_features, 8000, normalize)  # validates kind and size early
        self.data_seed = int(data_seed)
        self.concat = dict(min_frames=min_frames, max_frames=max_frames, min_gap=min_gap, max_gap=max_gap,
                           noise=noise)
        self.passes = passes
        self.data_dir, self.cache_dir = data_dir, cache_dir
        self.label_names: list[str] = []

    # -- to implement ------------------------------------------------------------------
    def utterances(self) -> tuple[dict[str, list[Utterance]], list[str], int]:  # pragma: no cover
        raise NotImplementedError

    def cache_params(self) -> dict[str, Any]:
        """What identifies the cached features besides the feature and form settings."""
        return {}

    def source_stamp(self) -> str | None:
        """A :func:`~tasks.common.data.file_stamp` of the audio files the features are made from:
        cached features made from other files are rebuilt (None: no source found, use them)."""
        return None

    # -- building ----------------------------------------------------------------------
    def _build(self) -> dict[str, Any]:
        utts, names, sr = self.utterances()
        cfg = FeatureConfig(self.feature_kind, self.n_features, sr, self.normalize)
        splits: dict[str, list[tuple[Tensor, Any]]] = {}
        if self.form == "classify":
            for s in SPLITS:
                splits[s] = [(extract(w, cfg), int(y)) for w, y in utts[s]]
            return {"splits": splits, "labels": names}
        silence = len(names)
        for i, s in enumerate(SPLITS):
            g = torch.Generator().manual_seed(self.data_seed * 1000 + i)
            seqs = []
            for _ in range(self.passes if s == "train" else 1):
                seqs += concatenate(utts[s], silence_label=silence, hop=cfg.hop_length, generator=g, **self.concat)
            splits[s] = [(extract(w, cfg), frame_labels(lab, cfg)) for w, lab, _ in seqs]
        return {"splits": splits, "labels": names + [SILENCE]}

    def _cache_file(self) -> Path | None:
        if self.cache_name is None:
            return None
        params = {"form": self.form, "feature": self.feature_kind, "n_features": self.n_features,
                  "normalize": self.normalize, "v": 1, **self.cache_params()}
        if self.form == "tag":
            params.update(self.concat, data_seed=self.data_seed, passes=self.passes)
        digest = hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
        root = Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()
        return root / "speech" / f"{self.cache_name}-{self.form}-{digest}.pt"

    def load(self) -> dict[str, Dataset]:
        path = self._cache_file()
        if path is None:
            built = self._build()
        else:
            stamp = self.source_stamp()
            with file_lock(path.with_suffix(".lock")):
                built = None
                if path.is_file():
                    try:
                        built = torch.load(path, weights_only=True)
                    except Exception:  # noqa: BLE001 - a damaged cache entry (ours, derived): rebuild it
                        path.unlink()
                if built is None or (stamp is not None and built.get("sources") != stamp):
                    built = {**self._build(), "sources": stamp}
                    write_atomic(path, lambda tmp: torch.save(built, tmp))
        self.label_names = list(built["labels"])
        return {s: _Items(built["splits"][s]) for s in SPLITS}

    # -- SplitDataModule ---------------------------------------------------------------
    def make_info(self, splits: dict[str, Dataset]) -> dict[str, Any]:
        first = splits["train"][0][0]
        lengths = [splits[s][i][0].shape[0] for s in SPLITS for i in range(len(splits[s]))]
        info: dict[str, Any] = {
            "form": self.form,
            "num_features": int(first.shape[1]),
            "num_classes": len(self.label_names),
            "labels": list(self.label_names),
            "max_frames": max(lengths),
            "mean_frames": sum(lengths) / len(lengths),
            **{f"num_{s}": len(splits[s]) for s in SPLITS},
        }
        if self.form == "tag":
            info["silence_label"] = len(self.label_names) - 1
        return info

    def length(self, item: tuple[Tensor, Any]) -> int:
        return int(item[0].shape[0])

    def collate(self, items: list[tuple[Tensor, Any]]) -> dict[str, Tensor]:
        x, mask = pad_sequences([it[0] for it in items])  # (B, L, F), (B, L)
        if self.form == "classify":
            y = torch.tensor([int(it[1]) for it in items], dtype=torch.long)  # (B,)
        else:
            y, _ = pad_sequences([it[1] for it in items], pad_value=IGNORE)  # (B, L)
        return {"x": x, "mask": mask, "y": y}

    def checksum_parts(self) -> Iterable[Any]:
        for s in SPLITS:
            ds = self.splits[s]
            yield s
            yield [ds[i][0] for i in range(len(ds))]
            yield [ds[i][1] if isinstance(ds[i][1], Tensor) else torch.tensor(ds[i][1]) for i in range(len(ds))]
        yield self.label_names


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


def _read_wav(path: Path, expected_rate: int) -> Tensor:
    """A mono float32 waveform; an unreadable file or another sample rate is
    :class:`~tasks.common.data.DataCorrupt` naming the data-dir file."""
    import soundfile

    with reading(path):
        wave, sr = soundfile.read(str(path), dtype="float32", always_2d=False)
    if sr != expected_rate:
        raise corrupt(path, f"sample rate {sr} Hz, expected {expected_rate} Hz")
    if wave.ndim not in (1, 2) or wave.shape[0] == 0:
        raise corrupt(path, f"no audio samples (shape {wave.shape})")
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


# ============================================================================ synthetic
SYNTH_RATE = 8000


def make_synthetic(
    *,
    num_classes: int = 8,
    num_phones: int = 4,
    per_class: Sequence[int] = (40, 10, 20),
    min_phone_frames: int = 6,
    max_phone_frames: int = 14,
    snr_db: float = 10.0,
    data_seed: int = 0,
) -> tuple[dict[str, list[Utterance]], list[str]]:
    """Spoken-word-like utterances at 8 kHz, generated from ``data_seed``.

    ``num_phones`` "phones" each get two formant frequencies; a word is a distinct ORDER of all
    the phones (``num_classes`` of the ``num_phones!`` permutations), so every word holds the same
    phones and only their order (context) tells the words apart. An utterance: 3-8 frames of
    noise, then each phone for ``min_phone_frames..max_phone_frames`` frames (random per phone,
    formants jittered by +-3%, raised-cosine edges, 20 ms pauses between phones), then noise;
    white noise at ``snr_db``. ``per_class`` = utterances per word in train, val, test.
    """
    if num_classes > math.factorial(num_phones):
        raise ValueError(f"num_classes={num_classes} > {num_phones}! orders of num_phones={num_phones} phones")
    if len(per_class) != 3 or min(per_class) < 1:
        raise ValueError(f"per_class={list(per_class)!r}; expected three positive counts (train, val, test)")
    g = torch.Generator().manual_seed(int(data_seed))
    hop = SYNTH_RATE // 100
    # formants: F1 in 300-900 Hz, F2 in 1000-3000 Hz, distinct per phone
    f1 = 300 + 600 * torch.randperm(64, generator=g)[:num_phones].float() / 64
    f2 = 1000 + 2000 * torch.randperm(64, generator=g)[:num_phones].float() / 64
    words: list[tuple[int, ...]] = []
    while len(words) < num_classes:
        w = tuple(torch.randperm(num_phones, generator=g).tolist())
        if w not in words:
            words.append(w)

    def ramp(n: int) -> Tensor:
        r = min(n // 2, SYNTH_RATE // 200)  # 5 ms edges
        env = torch.ones(n)
        if r:
            edge = 0.5 - 0.5 * torch.cos(torch.linspace(0, math.pi, r))
            env[:r], env[-r:] = edge, edge.flip(0)
        return env

    def randint(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    def utterance(word: tuple[int, ...]) -> Tensor:
        parts = [torch.zeros(randint(3, 8) * hop)]
        for k, p in enumerate(word):
            n = randint(min_phone_frames, max_phone_frames) * hop
            t = torch.arange(n) / SYNTH_RATE
            jit = 1 + 0.03 * (2 * torch.rand(2, generator=g) - 1)
            ph = 2 * math.pi * torch.rand(2, generator=g)
            s = torch.sin(2 * math.pi * f1[p] * jit[0] * t + ph[0]) + 0.6 * torch.sin(2 * math.pi * f2[p] * jit[1] * t + ph[1])
            parts.append(0.3 * s * ramp(n))
            if k < len(word) - 1:
                parts.append(torch.zeros(2 * hop))
        parts.append(torch.zeros(randint(3, 8) * hop))
        wave = torch.cat(parts)
        noise_std = 0.3 * 0.8 / math.sqrt(2) / (10 ** (snr_db / 20))  # RMS of the tones / SNR
        return wave + noise_std * torch.randn(wave.shape[0], generator=g)

    utts = {s: [(utterance(words[c]), c) for c in range(num_classes) for _ in range(n)]
            for s, n in zip(SPLITS, per_class)}
    names = ["-".join("abcdefghij"[p] for p in w) for w in words]
    return utts, names


class SyntheticDataModule(SpeechDataModule):
    """:func:`make_synthetic` in either task form (no cache: it is regenerated in a second)."""

    def __init__(self, *, num_classes: int = 8, num_phones: int = 4, per_class: Sequence[int] = (40, 10, 20),
                 snr_db: float = 10.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.synth = dict(num_classes=num_classes, num_phones=num_phones, per_class=list(per_class), snr_db=snr_db)
        if num_classes > math.factorial(num_phones):
            raise ValueError(f"num_classes={num_classes} > {num_phones}! orders of num_phones={num_phones} phones")

    def utterances(self) -> tuple[dict[str, list[Utterance]], list[str], int]:
        utts, names = make_synthetic(**self.synth, data_seed=self.data_seed)
        return utts, names, SYNTH_RATE


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
         "batch_size": 16, "max_tokens": None},
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
