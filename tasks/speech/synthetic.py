"""Synthetic speech generated in code: spoken-word-like audio where only the ORDER of the
same formant-like "phones" tells the words apart (:func:`make_synthetic`), so a model that
ignores order and context is at chance. Regenerated from ``data_seed`` (no cache: it is fast).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import Tensor

from tasks.speech.datamodule import SPLITS, SpeechDataModule, Utterance

__all__ = ["SYNTH_RATE", "make_synthetic", "SyntheticDataModule"]

SYNTH_RATE = 8000


def _orders(num_phones: int, phones_per_word: int | None) -> int:
    """How many distinct words (orders of ``phones_per_word`` distinct phones) there are."""
    k = num_phones if phones_per_word is None else phones_per_word
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= num_phones:
        raise ValueError(f"phones_per_word={phones_per_word!r}; must be an int in 1..num_phones={num_phones}")
    return math.factorial(num_phones) // math.factorial(num_phones - k)


def make_synthetic(
    *,
    num_classes: int = 8,
    num_phones: int = 4,
    per_class: Sequence[int] = (40, 10, 20),
    min_phone_frames: int = 6,
    max_phone_frames: int = 14,
    snr_db: float = 10.0,
    data_seed: int = 0,
    phones_per_word: int | None = None,
) -> tuple[dict[str, list[Utterance]], list[str]]:
    """Spoken-word-like utterances at 8 kHz, generated from ``data_seed``.

    ``num_phones`` "phones" each get two formant frequencies; a word is a distinct ORDER of all
    the phones (``num_classes`` of the ``num_phones!`` permutations), so every word holds the same
    phones and only their order (context) tells the words apart. An utterance: 3-8 frames of
    noise, then each phone for ``min_phone_frames..max_phone_frames`` frames (random per phone,
    formants jittered by +-3%, raised-cosine edges, 20 ms pauses between phones), then noise;
    white noise at ``snr_db``. ``per_class`` = utterances per word in train, val, test.

    ``phones_per_word`` (default ``num_phones``): each word is an order of that many distinct
    phones; below ``num_phones`` words differ in WHICH phones they hold too, so a model that
    ignores order (a bag of frames) tells some words apart and stays above chance.
    """
    k = num_phones if phones_per_word is None else phones_per_word
    orders = _orders(num_phones, phones_per_word)
    if num_classes > orders:
        raise ValueError(f"num_classes={num_classes} > {orders} orders of {k} of num_phones={num_phones} phones")
    if len(per_class) != 3 or min(per_class) < 1:
        raise ValueError(f"per_class={list(per_class)!r}; expected three positive counts (train, val, test)")
    g = torch.Generator().manual_seed(int(data_seed))
    hop = SYNTH_RATE // 100
    # formants: F1 in 300-900 Hz, F2 in 1000-3000 Hz, distinct per phone
    f1 = 300 + 600 * torch.randperm(64, generator=g)[:num_phones].float() / 64
    f2 = 1000 + 2000 * torch.randperm(64, generator=g)[:num_phones].float() / 64
    words: list[tuple[int, ...]] = []
    while len(words) < num_classes:
        w = tuple(torch.randperm(num_phones, generator=g)[:k].tolist())
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
                 snr_db: float = 10.0, phones_per_word: int | None = None, phone_frames: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.synth = dict(num_classes=num_classes, num_phones=num_phones, per_class=list(per_class), snr_db=snr_db)
        if phones_per_word is not None:  # absent by default: the data of earlier configs is unchanged
            self.synth["phones_per_word"] = phones_per_word
        if phone_frames is not None:  # an utterance-length sweep's axis: phones of 0.6-1.4x this many frames
            self.synth.update(min_phone_frames=max(1, round(0.6 * phone_frames)),
                              max_phone_frames=max(1, round(1.4 * phone_frames)))
        if num_classes > _orders(num_phones, phones_per_word):
            raise ValueError(f"num_classes={num_classes} > {_orders(num_phones, phones_per_word)} orders of "
                             f"phones_per_word={phones_per_word} of num_phones={num_phones} phones")

    def utterances(self) -> tuple[dict[str, list[Utterance]], list[str], int]:
        utts, names = make_synthetic(**self.synth, data_seed=self.data_seed)
        return utts, names, SYNTH_RATE
