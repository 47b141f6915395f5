"""Synthetic speech with ``phones_per_word`` below ``num_phones``: words are orders of distinct
phone subsets (a bag of frames can tell some apart); the default keeps the earlier data."""

from __future__ import annotations

import pytest
import torch

from tasks.speech.synthetic import make_synthetic


def test_subset_words_and_default_unchanged():
    _, names = make_synthetic(num_classes=12, num_phones=5, phones_per_word=4, per_class=[1, 1, 1])
    assert len(set(names)) == 12 and all(len(n.split("-")) == 4 for n in names)
    assert len({frozenset(n.split("-")) for n in names}) > 1  # not one shared phone set
    a, na = make_synthetic(num_classes=8, num_phones=4, per_class=[1, 1, 1], data_seed=2)
    b, nb = make_synthetic(num_classes=8, num_phones=4, per_class=[1, 1, 1], data_seed=2, phones_per_word=4)
    assert na == nb and all(torch.equal(x[0], y[0]) for x, y in zip(a["train"], b["train"]))


@pytest.mark.parametrize("kw, msg", [({"phones_per_word": 0}, "phones_per_word"), ({"phones_per_word": 6}, "phones_per_word"),
                                     ({"num_classes": 21, "phones_per_word": 2}, "num_classes=21 > 20")])
def test_bad_values(kw, msg):
    with pytest.raises(ValueError, match=msg):
        make_synthetic(**{"num_phones": 5, "per_class": [1, 1, 1], **kw})
