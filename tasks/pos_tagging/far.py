"""The far-dependency tagging diagnostic (dataset ``synthetic_far``): ambiguous words whose tag
is decided by the sentence's first word, more than ``min_gap`` tokens back (default 5-8 filler
words, then 4 ambiguous ones: beyond the reach of a 2-layer CNN, +-3 words).

Every sentence opens with a marker word: a determiner-like marker (tagged ``DET``) makes every
later ambiguous word a ``NOUN``, a pronoun-like marker (``PRON``) makes them ``VERB``. Then
``min_gap``..``max_gap`` filler words of unambiguous open classes in random order, then a tail
where ambiguous words and filler alternate at random. Nothing but the marker says which tag an
ambiguous word takes, so:

* a model that sees the whole sentence (BiLSTM, Transformer) can tag every ambiguous word;
* a CNN whose receptive field is shorter than ``min_gap`` cannot see the marker and guesses
  (about half of the ambiguous words), like the per-word MLP floor;
* no model reaches 100%: unseen filler words without a tag-bearing suffix cannot be told apart.

Filler words are drawn Zipf-distributed from the same pseudo-word lexicon as the ``synthetic``
grammar (:func:`tasks.pos_tagging.data.make_lexicon`). Deterministic from ``data_seed``.
"""

from __future__ import annotations

from typing import Any

import torch

from tasks.pos_tagging.data import LOADER_DEFAULTS, Sentence, SyntheticTaggingDataModule, check_keys, make_lexicon

__all__ = ["make_far_corpus", "FarTaggingDataModule", "FAR_DEFAULTS", "build_far"]

_FILLER = ("NOUN", "VERB", "ADJ", "ADV")


def make_far_corpus(num_sentences: int, *, data_seed: int = 0, min_gap: int = 5, max_gap: int = 8,
                    tail: int = 4, p_ambiguous: float = 1.0, open_class_size: int = 300,
                    num_ambiguous: int = 30, suffix_p: float = 0.7, zipf: float = 1.0) -> list[Sentence]:
    """``num_sentences`` sentences ``marker filler{min_gap..max_gap} tail{tail} PUNCT``; each
    tail word is ambiguous with probability ``p_ambiguous`` (tag from the marker), else filler."""
    if not 1 <= min_gap <= max_gap:
        raise ValueError(f"synthetic_far: need 1 <= min_gap <= max_gap, got min_gap={min_gap}, max_gap={max_gap}")
    if not (isinstance(tail, int) and tail >= 1):
        raise ValueError(f"synthetic_far: tail={tail!r}; must be an int >= 1")
    if not 0 < p_ambiguous <= 1:
        raise ValueError(f"synthetic_far: p_ambiguous={p_ambiguous!r}; must be in (0, 1]")
    g = torch.Generator().manual_seed(int(data_seed))
    n = open_class_size
    sizes = {"NOUN": n, "VERB": n * 2 // 3, "ADJ": n // 2, "ADV": n // 5, "DET": 4, "PRON": 4, "NV": num_ambiguous}
    lex = make_lexicon(g, sizes, suffix_p)
    weights = {c: 1.0 / torch.arange(1, len(ws) + 1, dtype=torch.float64) ** zipf for c, ws in lex.items()}

    def pick(cls: str) -> str:
        return lex[cls][int(torch.multinomial(weights[cls], 1, generator=g))]

    def filler() -> tuple[str, str]:
        tag = _FILLER[int(torch.randint(len(_FILLER), (1,), generator=g))]
        return pick(tag), tag

    sents: list[Sentence] = []
    for _ in range(num_sentences):
        marker = "DET" if float(torch.rand(1, generator=g)) < 0.5 else "PRON"
        target = "NOUN" if marker == "DET" else "VERB"
        toks = [(pick(marker), marker)]
        toks += [filler() for _ in range(int(torch.randint(min_gap, max_gap + 1, (1,), generator=g)))]
        for _ in range(tail):
            toks.append((pick("NV"), target) if float(torch.rand(1, generator=g)) < p_ambiguous else filler())
        toks.append((".", "PUNCT"))
        sents.append(([w for w, _ in toks], [t for _, t in toks]))
    return sents


class FarTaggingDataModule(SyntheticTaggingDataModule):
    """:func:`make_far_corpus` split into train/val/test (one corpus, one lexicon)."""

    def __init__(self, *, num_train: int = 800, num_val: int = 200, num_test: int = 300, data_seed: int = 0,
                 min_gap: int = 5, max_gap: int = 8, tail: int = 4, p_ambiguous: float = 1.0,
                 open_class_size: int = 300, num_ambiguous: int = 30, suffix_p: float = 0.7,
                 gap: int | None = None, **kwargs: Any) -> None:
        super().__init__(num_train=num_train, num_val=num_val, num_test=num_test, data_seed=data_seed, **kwargs)
        if gap is not None:  # a distance sweep's axis: exactly ``gap`` filler words before the tail
            min_gap = max_gap = gap
        self.gen = dict(data_seed=data_seed, min_gap=min_gap, max_gap=max_gap, tail=tail, p_ambiguous=p_ambiguous,
                        open_class_size=open_class_size, num_ambiguous=num_ambiguous, suffix_p=suffix_p)
        make_far_corpus(1, **self.gen)  # validate the parameters now

    def sentences(self) -> dict[str, list[Sentence]]:
        a, b, c = self.sizes
        corpus = make_far_corpus(a + b + c, **self.gen)
        return {"train": corpus[:a], "val": corpus[a:a + b], "test": corpus[a + b:]}


FAR_DEFAULTS: dict[str, Any] = {"num_train": 800, "num_val": 200, "num_test": 300, "data_seed": 0, "min_gap": 5,
                                "max_gap": 8, "tail": 4, "p_ambiguous": 1.0, "open_class_size": 300,
                                "num_ambiguous": 30, "suffix_p": 0.7, "gap": None, **LOADER_DEFAULTS}


def build_far(data_dir=None, cache_dir=None, seed: int = 0, **params: Any) -> FarTaggingDataModule:
    """DatasetSpec builder: the corpus depends on ``data_seed``, never on the run seed."""
    del data_dir, cache_dir
    check_keys(params, FAR_DEFAULTS, "synthetic_far")
    dm = FarTaggingDataModule(**{**FAR_DEFAULTS, **params})
    dm.shuffle_seed = int(seed)
    return dm
