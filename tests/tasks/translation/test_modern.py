"""The modern-recurrence encoder-decoder (issue 31): every cell builds and trains, incremental
decoding through ``step()`` equals the parallel teacher-forced pass, the bidirectional encoder
keeps padding out, the shared greedy/beam search drives it, and bad ``cell``/``score`` values are
refused in one line before any cell runs."""

from __future__ import annotations

import pytest
import torch

from tasks.common.recurrence import CELLS
from tasks.common.registry import get_task
from tasks.translation.data import BOS, EOS, PAD, build_synthetic
from tasks.translation.module import make_module
from tasks.translation.modern import SCORES
from tasks.translation.search import beam_search, greedy_search
from tests.helpers.domains import TRANSLATION_DATA

TASK = get_task("translation")
#: small sizes (mamba2 needs 2 * d_model divisible by its head size 64)
SMALL = dict(embedding_dim=16, d_model=32, d_state=8, enc_layers=2, dec_layers=2)
V = 30  # vocabulary of the hand-made batches


@pytest.fixture(scope="module")
def syn(tmp_path_factory):
    dm = build_synthetic(None, str(tmp_path_factory.mktemp("cache")), 0, **TRANSLATION_DATA)
    dm.setup("fit")
    return dm


def _net(cell: str, score: str = "bahdanau", vocab: int = V, seed: int = 0, **over) -> torch.nn.Module:
    torch.manual_seed(seed)
    spec = TASK.models.get("modern_rnn")
    return spec.build({"vocab_size": vocab, "pad_id": PAD}, **{**spec.params, **SMALL, "cell": cell, "score": score,
                                                                **over})


def _batch(seed: int = 0, lengths=(7, 4, 1), t: int = 6):
    """``src (B, S)`` with random NON-pad tokens after each length (only the mask says padding),
    ``src_mask (B, S)``, ``tgt_in (B, T)``."""
    g = torch.Generator().manual_seed(seed)
    s = max(lengths)
    src = torch.randint(4, V, (len(lengths), s), generator=g)
    mask = torch.arange(s)[None] < torch.tensor(lengths)[:, None]
    tgt = torch.randint(4, V, (len(lengths), t), generator=g)
    tgt[:, 0] = BOS
    return src, mask, tgt


def test_registered_as_a_modern_rnn_outside_all():
    spec = TASK.models.get("modern_rnn")
    assert (spec.family, spec.kind, spec.in_all) == ("rnn", "modern", False)
    assert {"embedding_dim", "d_model", "d_state", "enc_layers", "dec_layers", "dropout", "cell",
            "score", "backend"} == set(spec.params)


@pytest.mark.parametrize("cell", list(CELLS))
def test_builds_and_trains_one_step(syn, cell):
    net = _net(cell, vocab=syn.info["vocab_size"])
    module = make_module(net, syn.info)
    batch = next(iter(syn.train_dataloader()))
    logits = net(batch["src"], batch["src_mask"], batch["tgt"][:, :-1])
    assert logits.shape == (*batch["tgt"][:, :-1].shape, syn.info["vocab_size"]) and torch.isfinite(logits).all()
    opt = torch.optim.Adam(module.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in net.parameters()]
    module.train()
    out = module.step(batch, "train")
    out.loss.backward()
    opt.step()
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("cell", list(CELLS))
def test_decode_step_equals_the_teacher_forced_pass(cell, score):
    """float64: feeding ``tgt_in`` one token at a time through ``decode_step`` (the recurrences'
    ``step()``) gives the parallel pass's logits at every position, for every sentence of a
    padded batch."""
    net = _net(cell, score).double().eval()
    src, mask, tgt = _batch()
    with torch.no_grad():
        ref = net(src, mask, tgt)  # (B, T, V)
        state = net.encode(src, mask)
        steps = []
        for t in range(tgt.shape[1]):
            logits, state = net.decode_step(state, tgt[:, : t + 1])
            steps.append(logits)
    got = torch.stack(steps, 1)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, ref, atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("cell", list(CELLS))
def test_encoder_padding_is_exact(cell, score):
    """A padded batch gives each sentence exactly what it gets alone (the padded source positions
    hold real, non-pad tokens: only the mask keeps them out)."""
    net = _net(cell, score).double().eval()
    src, mask, tgt = _batch(seed=1)
    with torch.no_grad():
        batched = net(src, mask, tgt)
        for i, n in enumerate(mask.sum(1).tolist()):
            alone = net(src[i : i + 1, :n], mask[i : i + 1, :n], tgt[i : i + 1])
            torch.testing.assert_close(batched[i : i + 1], alone, atol=1e-10, rtol=1e-9)


def test_alignments_bahdanau_only():
    src, mask, tgt = _batch()
    with torch.no_grad():
        w = _net("mingru", "bahdanau").eval().alignments(src, mask, tgt)
        assert _net("mingru", "none").eval().alignments(src, mask, tgt) is None
    assert w.shape == (3, 1, tgt.shape[1], src.shape[1])
    assert (w.masked_select(~mask[:, None, None, :].expand_as(w)) == 0).all()  # no weight on padding
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 1, tgt.shape[1]))


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("cell", ["mingru", "mamba2"])
def test_greedy_and_beam_search_run_it(syn, cell, score):
    net = _net(cell, score, vocab=syn.info["vocab_size"]).eval()
    b = next(iter(syn.val_dataloader()))
    src, mask = b["src"][:3], b["src_mask"][:3]
    kw = dict(bos=BOS, eos=EOS, pad=PAD, max_len_b=4)
    g_tok, g_score = greedy_search(net, src, mask, **kw)
    b_tok, b_score = beam_search(net, src, mask, beam=1, **kw)
    assert torch.equal(g_tok, b_tok[:, : g_tok.shape[1]]) and torch.allclose(g_score, b_score, atol=1e-5)
    b4_tok, b4_score = beam_search(net, src, mask, beam=3, **kw)
    assert torch.isfinite(b4_score).all() and (b4_score >= g_score - 1e-5).all()
    for row, n in zip(b4_tok.tolist(), mask.sum(1).tolist()):  # ends in EOS within src_len + max_len_b
        assert EOS in row[: n + 4]


@pytest.mark.parametrize("key, value, config_message, build_message", [
    ("cell", "gru", r"model_params\.modern_rnn: cell='gru'; valid: mingru, minlstm, s4d, mamba2, lru",
     "cell='gru'; valid: mingru, minlstm, s4d, mamba2, lru"),
    ("score", "luong", r"model_params\.modern_rnn\.score='luong' is invalid: expected one of 'bahdanau', 'none'",
     "score='luong'; valid: bahdanau, none"),
])
def test_bad_cell_or_score_is_one_line_at_config_validation(key, value, config_message, build_message):
    from benchmarks.config.schema import ConfigError
    from benchmarks.config.suite import validate_suite

    with pytest.raises(ConfigError, match=config_message) as err:
        validate_suite(_suite({key: value}))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=build_message):
        _net(**{"cell": "mingru", "score": "bahdanau", key: value})


@pytest.mark.parametrize("score", SCORES)
def test_every_score_passes_config_validation(score):
    """``score`` is this model's own (not the graph layers' dot/additive of the registry's name rule)."""
    from benchmarks.config.suite import validate_suite

    validate_suite(_suite({"score": score, "cell": "lru"}))


def _suite(params: dict) -> dict:
    return {"suite": "t", "seeds": 1, "cells": [{"task": "translation", "dataset": "synthetic", "models": ["modern_rnn"],
                                                 "model_params": {"modern_rnn": params}}]}
