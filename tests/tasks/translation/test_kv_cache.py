"""Incremental decoding against the recompute-the-prefix reference: the Transformer's key/value
cache (``kv_cache=False`` is the reference) and ConvS2S's convolution windows
(``incremental=False``): the same logits at every step, and the same greedy and beam-search
tokens and scores, on small random models with padded sources."""

from __future__ import annotations

import pytest
import torch

from tasks.translation.data import BOS, EOS, PAD
from tasks.translation.models import ConvS2S, TransformerSeq2Seq
from tasks.translation.search import beam_search, greedy_search, reorder_state

VOCAB = 20


def _model(norm_first: bool, dtype: torch.dtype, seed: int = 0, pattern: str = "full",
           pattern_params: dict | None = None) -> TransformerSeq2Seq:
    torch.manual_seed(seed)
    net = TransformerSeq2Seq(VOCAB, d_model=16, num_heads=2, enc_layers=1, dec_layers=2, dim_feedforward=32,
                             norm_first=norm_first, max_positions=64, pad_id=PAD, pattern=pattern,
                             pattern_params=pattern_params)
    with torch.no_grad():  # random LayerNorms and biases too, so no part of the layer is trivial
        for name, p in net.named_parameters():
            if "norm" in name or "bias" in name:
                p.copy_(torch.randn_like(p) * 0.5 + (1.0 if "norm" in name and name.endswith("weight") else 0.0))
    return net.to(dtype).eval()


def _batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (4, 8), generator=g)  # (B, S)
    mask = torch.ones(4, 8, dtype=torch.bool)
    mask[1, 5:] = False
    mask[3, 3:] = False
    src[~mask] = PAD
    return src, mask


def _search(net: TransformerSeq2Seq, cached: bool, search, **kw):
    net.kv_cache = cached
    try:
        src, mask = _batch()
        return search(net, src, mask, bos=BOS, eos=EOS, pad=PAD, max_len_b=4, **kw)
    finally:
        net.kv_cache = True


STEPS = 9  # target positions fed one by one in the step-by-step tests


def _decode_steps_against_forward(net) -> tuple[dict, dict]:
    """Feed a fixed random prefix token by token through ``net.decode_step``, reordering the
    state beam-style (rows 3, 3, 0, 1) after 5 tokens, and check every step's logits against
    ``net.forward`` on the whole prefix (float64, atol 1e-10). Returns the state after
    ``encode`` and the final one, for model-specific checks."""
    src, mask = _batch()
    tgt = torch.randint(4, VOCAB, (4, STEPS), generator=torch.Generator().manual_seed(2))
    tgt[:, 0] = BOS
    index = torch.tensor([3, 3, 0, 1])
    with torch.no_grad():
        full = net(src, mask, tgt)  # (B, T, V)
        full_re = net(src[index], mask[index], tgt[index])
        state0 = state = net.encode(src, mask)
        for t in range(STEPS):
            if t == 5:
                state = reorder_state(state, index)
            rows = index if t >= 5 else torch.arange(4)
            logits, state = net.decode_step(state, tgt[rows, : t + 1])
            ref = full_re[:, t] if t >= 5 else full[:, t]
            torch.testing.assert_close(logits, ref, atol=1e-10, rtol=0)
    return state0, state


@pytest.mark.parametrize("norm_first", [True, False])
def test_cached_decode_step_logits_equal_teacher_forcing(norm_first):
    """Feeding a fixed random prefix token by token (with a beam-style reordering halfway) gives
    ``forward``'s logits at every position: positions and cache are right."""
    state0, state = _decode_steps_against_forward(_model(norm_first, torch.float64))
    assert "memory" not in state0 and state0["kv.0.cross_k"].shape[:3] == (4, 2, 8)
    assert state["kv.1.self_v"].shape[2] == STEPS


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [True, False])
def test_greedy_and_beam_equal_the_recompute_path(norm_first, dtype):
    net = _model(norm_first, dtype)
    for search, kw in ((greedy_search, {}), (beam_search, {"beam": 3}), (beam_search, {"beam": 1})):
        tok_c, score_c = _search(net, True, search, **kw)
        tok_r, score_r = _search(net, False, search, **kw)
        assert tok_c.shape[1] > 3  # hypotheses of several tokens, so the cache is exercised
        assert torch.equal(tok_c, tok_r), (search.__name__, kw)
        torch.testing.assert_close(score_c, score_r, atol=1e-5, rtol=0)


@pytest.mark.parametrize("pattern, params", [("linear", None), ("performer", None),
                                             ("local_global", {"window": 2, "global_tokens": 1})])
def test_efficient_patterns_decode_from_the_cache_too(pattern, params):
    """linear and performer decode from a recurrent state (running sums: no keys kept),
    local_global by full attention over the cached keys its rule allows: cached step logits
    equal teacher forcing, and greedy and beam search give the recompute path's tokens, so
    decoding costs one position a step for them too."""
    net = _model(True, torch.float64, pattern=pattern, pattern_params=params)
    assert net.kv_cache
    state0, state = _decode_steps_against_forward(net)
    assert "memory" not in state0 and net.decoder.cache_length(state) == STEPS
    assert ("kv.1.self_k" in state) == (pattern == "local_global")  # a key/value cache or a state
    for search, kw in ((greedy_search, {}), (beam_search, {"beam": 3})):
        tok_c, score_c = _search(net, True, search, **kw)
        tok_r, score_r = _search(net, False, search, **kw)
        assert tok_c.shape[1] > 3 and torch.equal(tok_c, tok_r), (search.__name__, kw)
        torch.testing.assert_close(score_c, score_r, atol=1e-8, rtol=0)


def test_a_prefix_that_does_not_match_the_cache_is_an_error():
    net = _model(True, torch.float32)
    src, mask = _batch()
    state = net.encode(src, mask)
    prefix = torch.full((4, 1), BOS)
    with torch.no_grad():
        _, state = net.decode_step(state, prefix)
        with pytest.raises(ValueError, match="cache holds 1 positions but the prefix has 3 tokens"):
            net.decode_step(state, torch.full((4, 3), BOS))


# --------------------------------------------------------------------------- ConvS2S
def _convs2s(kernel_size: int, dtype: torch.dtype, seed: int = 0) -> ConvS2S:
    torch.manual_seed(seed)
    net = ConvS2S(VOCAB, emb_dim=16, hidden=24, enc_layers=2, dec_layers=3, kernel_size=kernel_size,
                  max_positions=64, pad_id=PAD)
    with torch.no_grad():  # random biases, so a zero window is not the same as a missing one
        for name, p in net.named_parameters():
            if "bias" in name:
                p.copy_(torch.randn_like(p) * 0.5)
    return net.to(dtype).eval()


@pytest.mark.parametrize("kernel_size", [1, 3, 5])
def test_convs2s_incremental_decode_step_equals_teacher_forcing(kernel_size):
    """Token by token (with a beam-style reordering halfway), the incremental ConvS2S decoder gives
    ``forward``'s logits at every position: each layer's window of past inputs is right."""
    state0, state = _decode_steps_against_forward(_convs2s(kernel_size, torch.float64))
    assert state0["conv.2"].shape == (4, kernel_size - 1, 24)
    assert state["steps"].tolist() == [STEPS] * 4


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_convs2s_greedy_and_beam_equal_the_recompute_path(dtype):
    net = _convs2s(3, dtype)
    src, mask = _batch()
    for search, kw in ((greedy_search, {}), (beam_search, {"beam": 3}), (beam_search, {"beam": 1})):
        out = {}
        for incremental in (True, False):
            net.incremental = incremental
            out[incremental] = search(net, src, mask, bos=BOS, eos=EOS, pad=PAD, max_len_b=4, **kw)
        net.incremental = True
        (tok_i, score_i), (tok_r, score_r) = out[True], out[False]
        assert tok_i.shape[1] > 3  # hypotheses of several tokens, so the windows are exercised
        assert torch.equal(tok_i, tok_r), (search.__name__, kw)
        torch.testing.assert_close(score_i, score_r, atol=1e-5, rtol=0)


def test_convs2s_prefix_that_does_not_match_the_state_is_an_error():
    net = _convs2s(3, torch.float32)
    src, mask = _batch()
    state = net.encode(src, mask)
    with torch.no_grad():
        _, state = net.decode_step(state, torch.full((4, 1), BOS))
        with pytest.raises(ValueError, match=r"decoded \[1, 1, 1, 1\] tokens but the prefix has 3"):
            net.decode_step(state, torch.full((4, 3), BOS))
