"""Acoustic features: log-mel filterbanks or MFCCs with a 25 ms window and a 10 ms hop
(100 frames a second), normalised per utterance (each feature to zero mean and unit variance
over the utterance's frames).

Frame ``t`` is centred on sample ``t * hop`` (torchaudio's ``center=True``), so an input of
``n`` samples gives ``1 + n // hop`` frames; :func:`frame_labels` uses the same convention to
turn per-sample labels into per-frame ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import torch
from torch import Tensor

__all__ = ["FEATURE_KINDS", "FeatureConfig", "extract", "num_frames", "frame_labels"]

FEATURE_KINDS = ("logmel", "mfcc")
WINDOW_S = 0.025
HOP_S = 0.010


@dataclass(frozen=True)
class FeatureConfig:
    """Which features: ``kind`` (``logmel`` | ``mfcc``), ``n_features`` (mel bands or MFCCs),
    ``sample_rate`` of the audio, ``normalize`` per utterance."""

    kind: str = "logmel"
    n_features: int = 40
    sample_rate: int = 8000
    normalize: bool = True

    def __post_init__(self) -> None:
        if self.kind not in FEATURE_KINDS:
            raise ValueError(f"feature={self.kind!r}; valid: {', '.join(FEATURE_KINDS)}")
        if isinstance(self.n_features, bool) or not isinstance(self.n_features, int) or not 4 <= self.n_features <= 128:
            raise ValueError(f"n_features={self.n_features!r}; must be an integer in 4..128")

    @property
    def win_length(self) -> int:
        return round(WINDOW_S * self.sample_rate)

    @property
    def hop_length(self) -> int:
        return round(HOP_S * self.sample_rate)

    @property
    def n_fft(self) -> int:
        return 1 << (self.win_length - 1).bit_length()  # next power of two >= the window

    def key(self) -> str:
        return "-".join(f"{k}={v}" for k, v in asdict(self).items())


@lru_cache(maxsize=8)
def _transform(cfg: FeatureConfig) -> torch.nn.Module:
    import torchaudio

    mel = dict(n_fft=cfg.n_fft, win_length=cfg.win_length, hop_length=cfg.hop_length, f_min=20.0,
               f_max=cfg.sample_rate / 2, center=True)
    if cfg.kind == "mfcc":
        n_mels = max(40, cfg.n_features)
        return torchaudio.transforms.MFCC(cfg.sample_rate, n_mfcc=cfg.n_features, melkwargs={**mel, "n_mels": n_mels})
    return torchaudio.transforms.MelSpectrogram(cfg.sample_rate, n_mels=cfg.n_features, **mel)


def num_frames(num_samples: int, cfg: FeatureConfig) -> int:
    """Frames of ``num_samples`` samples: ``1 + num_samples // hop``."""
    return 1 + num_samples // cfg.hop_length


def extract(wave: Tensor, cfg: FeatureConfig) -> Tensor:
    """``wave (n,)`` float -> features ``(1 + n // hop, n_features)`` float32."""
    if wave.dim() != 1:
        raise ValueError(f"extract: expected a mono waveform (n,), got shape {tuple(wave.shape)}")
    with torch.no_grad():
        spec = _transform(cfg)(wave.float())  # (F, T)
        if cfg.kind == "logmel":
            spec = torch.log(spec + 1e-6)
        feats = spec.T.contiguous()  # (T, F)
        if cfg.normalize:
            feats = (feats - feats.mean(0, keepdim=True)) / (feats.std(0, keepdim=True) + 1e-5)
    return feats.float()


def frame_labels(sample_labels: Tensor, cfg: FeatureConfig) -> Tensor:
    """Per-sample labels ``(n,)`` -> per-frame labels ``(1 + n // hop,)``: frame ``t`` takes the
    label of its centre sample ``t * hop`` (the features' framing)."""
    idx = torch.arange(num_frames(sample_labels.shape[0], cfg)) * cfg.hop_length
    return sample_labels[idx.clamp(max=sample_labels.shape[0] - 1)]
