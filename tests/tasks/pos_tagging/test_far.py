"""The far-dependency diagnostic's data (``synthetic_far``): the marker alone decides every
ambiguous word's tag, always at least ``min_gap`` tokens back; deterministic from data_seed."""

from __future__ import annotations

import pytest

from tasks.pos_tagging.far import build_far, make_far_corpus


def test_marker_decides_ambiguous_tags_far_back():
    corpus = make_far_corpus(300, data_seed=3, min_gap=10, max_gap=14, tail=5)
    word_tags: dict[str, set[str]] = {}
    for words, tags in corpus:
        for w, t in zip(words, tags):
            word_tags.setdefault(w, set()).add(t)
    ambiguous = {w for w, ts in word_tags.items() if len(ts) > 1}
    assert ambiguous and all(word_tags[w] == {"NOUN", "VERB"} for w in ambiguous)
    both = set()
    for words, tags in corpus:
        assert tags[0] in ("DET", "PRON") and tags[-1] == "PUNCT"
        target = "NOUN" if tags[0] == "DET" else "VERB"
        for i, (w, t) in enumerate(zip(words, tags)):
            if w in ambiguous:
                assert t == target and i > 10  # decided by the marker, beyond min_gap
                both.add(tags[0])
    assert both == {"DET", "PRON"}


def test_deterministic_and_validated():
    assert make_far_corpus(20, data_seed=1) == make_far_corpus(20, data_seed=1)
    assert make_far_corpus(20, data_seed=1) != make_far_corpus(20, data_seed=2)
    with pytest.raises(ValueError, match="min_gap"):
        make_far_corpus(1, min_gap=5, max_gap=4)
    with pytest.raises(ValueError, match="unknown params"):
        build_far(bogus=1)


def test_datamodule_splits():
    dm = build_far(num_train=30, num_val=5, num_test=7, seed=0)
    raw = dm.sentences()
    assert [len(raw[s]) for s in ("train", "val", "test")] == [30, 5, 7]
