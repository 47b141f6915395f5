"""Speech utterances in a task form, cached and batched: the base of every speech dataset.

* ``classify``: one utterance -> its word (``x (L, F)``, ``y`` an int).
* ``tag``: a long input made by concatenating utterances of one split with silence between
  them (:func:`concatenate`), every frame labelled with its word or ``silence`` (the last class):
  ``x (L, F)``, ``y (L,)``. Frame labels come from per-sample labels with the features' framing
  (:func:`tasks.speech.features.frame_labels`), so they line up with the audio exactly.

A dataset subclasses :class:`SpeechDataModule` and supplies its utterances (waveforms and
labels per split); the features are computed here and, for real corpora, cached
(``<cache_dir>/speech/<dataset>-<form>-<hash of the params>.pt``, rebuilt when the source
stamp changes).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from torch import Tensor
from torch.utils.data import Dataset

from tasks.common.data import SplitDataModule, default_cache_dir, file_lock, pad_sequences, write_atomic
from tasks.speech.features import FeatureConfig, extract, frame_labels

__all__ = ["FORMS", "SILENCE", "SPLITS", "IGNORE", "Utterance", "concatenate", "SpeechDataModule"]

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

    def class_labels(self, ds: Dataset) -> tuple[Tensor, list[str]] | None:
        """Utterance labels of the ``classify`` form (a frame-tagging input always holds silence)."""
        if self.form != "classify":
            return None
        return torch.tensor([int(ds[i][1]) for i in range(len(ds))], dtype=torch.long), self.label_names

    def length(self, item: tuple[Tensor, Any]) -> int:
        return int(item[0].shape[0])

    def input_length(self, item: tuple[Tensor, Any]) -> int:
        """Feature frames, in both forms (``classify`` and ``tag``): no speech model subsamples
        frames before attention (the convolutions have stride 1, the positions are per frame), so
        the attention sees one position per frame."""
        return int(item[0].shape[0])

    def collate(self, items: list[tuple[Tensor, Any]]) -> dict[str, Tensor]:
        to = self.pad_length(items)  # None, or the length bucket's
        x, mask = pad_sequences([it[0] for it in items], 0, to)  # (B, L, F), (B, L)
        if self.form == "classify":
            y = torch.tensor([int(it[1]) for it in items], dtype=torch.long)  # (B,)
        else:
            y, _ = pad_sequences([it[1] for it in items], IGNORE, to)  # (B, L)
        return {"x": x, "mask": mask, "y": y}

    def checksum_parts(self) -> Iterable[Any]:
        for s in SPLITS:
            ds = self.splits[s]
            yield s
            yield [ds[i][0] for i in range(len(ds))]
            yield [ds[i][1] if isinstance(ds[i][1], Tensor) else torch.tensor(ds[i][1]) for i in range(len(ds))]
        yield self.label_names
