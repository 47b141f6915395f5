"""Incremental decoding (``TransformerDecoder.init_cache`` / ``step``, ``MultiHeadAttention.
project_kv`` / ``step`` and ``init_decoding`` / ``decode``): decoding position by position must
give the teacher-forced causal decoder's outputs at every position, for pre-LN and post-LN, full,
truncated (windows narrower than the sequence included), local_global (key/value caches),
linear and performer (recurrent fixed-size states), with memory padding; a key/value cache
must grow one position a step, a recurrent state keep its size, and both follow a reordering
of the batch."""

from __future__ import annotations

import copy

import pytest
import torch

from attn_core.multihead import MultiHeadAttention, decoding_patterns, incremental_patterns
from attn_core.patterns import get_pattern, register_pattern, unregister_pattern
from attn_core.transformer import TransformerDecoder, TransformerDecoderLayer
from tests.helpers.attention import DEC_B as B, DEC_E as E, DEC_FF as FF, DEC_H as H, DEC_LAYERS as LAYERS
from tests.helpers.attention import DEC_T as T
from tests.helpers.attention import decoder_inputs as _inputs, make_decoder as _decoder, step_all as _step_all
from tests.helpers.attention import randomise as _randomise  # random weights, LayerNorms and biases too



CASES = [("full", None), ("truncated", 0), ("truncated", 2), ("truncated", 5), ("truncated", T + 3),
         ("linear", None), ("performer", None),  # the kernel patterns: a recurrent state (running sums)
         ("local_global", 0), ("local_global", 2)]  # its mask rule on the last row (1 global token)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("pattern, window", CASES)
def test_step_by_step_equals_teacher_forced(dtype, atol, norm_first, pattern, window):
    dec = _decoder(dtype, norm_first, pattern, window)
    x, memory, mask = _inputs(dtype)
    with torch.no_grad():
        full = dec(x, memory, memory_key_padding_mask=mask)  # (B, T, E)
        inc, _ = _step_all(dec, x, memory, mask)
    assert full.abs().max() > 0.1  # non-trivial outputs
    torch.testing.assert_close(inc, full, atol=atol, rtol=0)


def test_window_changes_the_output_so_the_slicing_is_checked():
    """A narrow window gives other outputs than full attention at late positions (so the equality
    above for truncated windows really tests the cache slicing), and equal ones at the first."""
    x, memory, mask = _inputs(torch.float64)
    with torch.no_grad():
        full, _ = _step_all(_decoder(torch.float64, True, "full", None), x, memory, mask)
        narrow, _ = _step_all(_decoder(torch.float64, True, "truncated", 1), x, memory, mask)
    torch.testing.assert_close(narrow[:, :2], full[:, :2], atol=1e-12, rtol=0)
    assert (narrow[:, 2:] - full[:, 2:]).abs().max() > 1e-3


def test_memory_padding_content_does_not_leak():
    dec = _decoder(torch.float64, True, "truncated", 2)
    x, memory, mask = _inputs(torch.float64)
    other = memory.clone()
    other[~mask] = 100.0  # padded positions only
    with torch.no_grad():
        a, _ = _step_all(dec, x, memory, mask)
        b, _ = _step_all(dec, x, other, mask)
        c, _ = _step_all(dec, x, other, torch.ones_like(mask))  # now they count
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    assert (a - c).abs().max() > 1e-3


def test_cache_grows_and_holds_the_projections():
    dec = _decoder(torch.float64, False, "full", None)
    x, memory, mask = _inputs(torch.float64)
    with torch.no_grad():
        cache = dec.init_cache(memory)
        assert sorted(cache) == sorted(f"kv.{i}.{n}" for i in range(LAYERS) for n in ("self_k", "self_v", "cross_k", "cross_v"))
        assert all(cache[f"kv.{i}.self_k"].shape == (B, H, 0, E // H) for i in range(LAYERS))
        ck, cv = dec.layers[1].multihead_attn.project_kv(memory)
        assert torch.equal(cache["kv.1.cross_k"], ck) and torch.equal(cache["kv.1.cross_v"], cv)
        _, cache = _step_all(dec, x[:, :4], memory, mask)
        assert dec.cache_length(cache) == 4
        assert cache["kv.0.self_v"].shape == (B, H, 4, E // H)
        # Layer 0's cached keys are the keys of its (post-LN: raw) input, position by position.
        k0, _ = dec.layers[0].self_attn.project_kv(x[:, :4])
        torch.testing.assert_close(cache["kv.0.self_k"], k0, atol=1e-12, rtol=0)
        torch.testing.assert_close(cache["kv.1.cross_k"], ck, atol=0, rtol=0)  # cross K/V never change


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("window, global_tokens", [(0, 3), (2, 3), (2, 0), (1, T + 2)])
def test_local_global_decodes_from_its_global_tokens_and_a_rolling_window(dtype, atol, window, global_tokens):
    """local_global keeps its first ``global_tokens`` keys and the last ``window`` (the only ones
    a later position attends): steps equal teacher forcing with T > g + w + 1 (so keys were
    dropped), and the buffer holds min(g, t) + min(w, t - g) positions after t steps."""
    dec = _decoder(dtype, True, "local_global", window, pattern_params={"global_tokens": global_tokens})
    x, memory, mask = _inputs(dtype)
    with torch.no_grad():
        full = dec(x, memory, memory_key_padding_mask=mask)  # (B, T, E)
        inc, cache = _step_all(dec, x, memory, mask)
    torch.testing.assert_close(inc, full, atol=atol, rtol=0)
    g = min(global_tokens, T)
    assert dec.cache_length(cache) == T and cache["kv.1.self_v"].shape == (B, H, g + min(window, T - g), E // H)
    with torch.no_grad():  # the kept keys: the global ones, then the window's, in order
        k0, _ = dec.layers[0].self_attn.project_kv(dec.layers[0].norm1(x))  # (B, H, T, Dh)
    kept = list(range(g)) + list(range(T - min(window, T - g), T))
    torch.testing.assert_close(cache["kv.0.self_k"], k0[:, :, kept], atol=atol, rtol=0)


@pytest.mark.parametrize("window", [0, 2, T + 3])
def test_a_truncated_cache_is_a_rolling_buffer_of_the_last_window(window):
    """Causal truncated attention never looks back further than its window, so its cache keeps
    the last ``window`` keys/values only (O(window) a step) and counts every decoded position;
    the kept keys are the last positions' own (equality with teacher forcing: above)."""
    dec = _decoder(torch.float64, True, "truncated", window)
    x, memory, mask = _inputs(torch.float64)
    with torch.no_grad():
        for t in (1, T):
            _, cache = _step_all(dec, x[:, :t], memory, mask)
            assert dec.cache_length(cache) == t and torch.equal(cache["kv.0.self_n"], torch.full((B,), t))
            assert cache["kv.1.self_k"].shape == (B, H, min(window, t), E // H)
        k0, _ = dec.layers[0].self_attn.project_kv(dec.layers[0].norm1(x))  # pre-LN: keys of the normed input
        torch.testing.assert_close(cache["kv.0.self_k"], k0[:, :, T - min(window, T):], atol=1e-12, rtol=0)


def test_extra_state_entries_pass_through():
    dec = _decoder(torch.float64, True, "full", None)
    x, memory, mask = _inputs(torch.float64)
    state = {"mask": mask, **dec.init_cache(memory)}
    with torch.no_grad():
        _, new = dec.step(x[:, :1], state, memory_key_padding_mask=mask)
    assert new["mask"] is mask and set(new) == set(state)


@pytest.mark.parametrize("pattern, window", [("full", None), ("truncated", 2), ("linear", None), ("performer", None)])
def test_reordered_cache_equals_decoding_the_reordered_batch(pattern, window):
    """Beam search reorders the cache with ``index_select`` along dim 0 mid-decoding: continuing
    from the reordered cache must equal decoding the reordered batch from scratch."""
    dec = _decoder(torch.float64, True, pattern, window)
    x, memory, mask = _inputs(torch.float64)
    index = torch.tensor([2, 0, 0, 1])  # reorder and duplicate, as beams do
    split = 5
    with torch.no_grad():
        _, cache = _step_all(dec, x[:, :split], memory, mask)
        cache = {k: v.index_select(0, index) for k, v in cache.items()}
        outs = []
        for t in range(split, T):
            out, cache = dec.step(x[index, t : t + 1], cache, memory_key_padding_mask=mask[index])
            outs.append(out)
        continued = torch.cat(outs, 1)
        fresh = dec(x[index], memory[index], memory_key_padding_mask=mask[index])[:, split:]
    torch.testing.assert_close(continued, fresh, atol=1e-12, rtol=0)


def test_every_decoding_pattern_is_tested_here():
    assert set(decoding_patterns()) == {p for p, _ in CASES}  # a new one must join CASES
    assert set(incremental_patterns()) <= set(decoding_patterns())


@pytest.mark.parametrize("pattern, entries", [("linear", {"kv": (B, H, E // H, E // H), "z": (B, H, E // H)}),
                                              ("performer", {"kv": (B, H, 128, E // H), "z": (B, H, 128),
                                                             "stab": (B, H, 1, 1)})])
def test_a_recurrent_state_keeps_its_size(pattern, entries):
    """linear and performer decode from running sums: no keys are kept, the state has the same
    size after 1 and after T positions, and its count says how many were decoded."""
    dec = _decoder(torch.float64, True, pattern, None)
    x, memory, mask = _inputs(torch.float64)
    with torch.no_grad():
        _, one = _step_all(dec, x[:, :1], memory, mask)
        _, cache = _step_all(dec, x, memory, mask)
    own = {k.removeprefix("kv.1.self_"): tuple(v.shape) for k, v in cache.items() if k.startswith("kv.1.self_")}
    assert own == {**entries, "n": (B,)}
    assert all(one[k].shape == cache[k].shape for k in cache)
    assert dec.cache_length(cache) == T and cache["kv.0.self_n"].tolist() == [T] * B


def test_performer_state_is_rescaled_when_the_stabiliser_rises():
    """Keys that grow position by position raise the running maximum of their feature logits at
    most steps, so the earlier sums are rescaled each time: the float32 decoded rows still equal
    the causal function's, in float32 and in float64. (Much larger keys underflow every feature
    of FAVOR+ in float32, decoded or not: its ``-|k|^2 / 2`` term.)"""
    torch.manual_seed(0)
    mha = MultiHeadAttention(E, H, pattern="performer", causal=True).eval()
    x = torch.randn(2, T, E) * torch.linspace(1.0, 4.0, T)[None, :, None]  # (2, T, E): ever larger keys
    with torch.no_grad():
        full, full64 = mha(x), copy.deepcopy(mha).double()(x.double())  # (2, T, E)
        cache, rows, stabs = mha.init_decoding(2), [], []
        for t in range(T):
            out, cache = mha.decode(x[:, t : t + 1], cache)
            rows.append(out)
            stabs.append(cache["stab"])
    assert (torch.stack(stabs).diff(dim=0) > 0).float().mean() > 0.4  # the maximum rose at many steps
    torch.testing.assert_close(torch.cat(rows, 1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat(rows, 1), full64.float(), atol=1e-5, rtol=0)


def test_a_plugin_pattern_with_only_a_recurrence_decodes(restore_registry):
    """A pattern registered with a Recurrence but no key/value cache (incremental=False) is a
    decoding pattern: the decoder keeps its state and equals teacher forcing."""
    linear = get_pattern("linear")
    register_pattern("rnn_like", causal=True, padding=True, cross=True, complexity="L", dropout=False,
                     recurrence=linear.recurrence)(linear.fn)
    assert "rnn_like" in decoding_patterns() and "rnn_like" not in incremental_patterns()
    dec = _decoder(torch.float64, True, "rnn_like", None)
    x, memory, mask = _inputs(torch.float64)
    with torch.no_grad():
        inc, cache = _step_all(dec, x, memory, mask)
        full = dec(x, memory, memory_key_padding_mask=mask)
    torch.testing.assert_close(inc, full, atol=1e-12, rtol=0)
    assert "kv.0.self_k" not in cache
    with pytest.raises(ValueError, match="project_kv/step"):  # no key/value cache to step over
        dec.layers[0].self_attn.project_kv(x)
    unregister_pattern("rnn_like")


def test_decoding_errors_name_the_valid_patterns(restore_registry):
    full = get_pattern("full")  # causal, but registered with neither a cache nor a recurrence
    register_pattern("no_cache", causal=True, padding=True, cross=True, complexity="L^2")(full.fn)
    with pytest.raises(ValueError, match=r"pattern='no_cache' is invalid: decoding one position at a time supports "
                                         r"only 'full', 'truncated', 'linear', 'local_global', 'performer'"):
        MultiHeadAttention(E, H, pattern="no_cache", causal=True).init_decoding(1)
    with pytest.raises(ValueError, match=r"causal=False is invalid: init_decoding/decode are causal"):
        MultiHeadAttention(E, H, pattern="linear").init_decoding(1)
    mha = MultiHeadAttention(E, H, pattern="linear", causal=True)
    with pytest.raises(ValueError, match="one position"):
        mha.decode(torch.randn(1, 2, E), mha.init_decoding(1))


def test_a_pattern_without_a_cache_says_which_have_one():
    mha = MultiHeadAttention(E, H, pattern="nystrom", pattern_params={"landmarks": 2})
    with pytest.raises(ValueError, match="support only 'full', 'truncated', 'linear', 'local_global', 'performer'"):
        mha.project_kv(torch.randn(1, 3, E))


@pytest.mark.parametrize("pattern, window", [("full", None), ("truncated", 1), ("linear", None), ("performer", None),
                                             ("local_global", 1)])
def test_multihead_step_is_the_last_row_of_forward(pattern, window):
    g = torch.Generator().manual_seed(3)
    mha = MultiHeadAttention(E, H, pattern=pattern, window=window, causal=True).double()
    _randomise(mha, 4)
    x = torch.randn(2, 6, E, generator=g, dtype=torch.float64)
    kpm = torch.tensor([[True] * 6, [False, True, True, True, True, True]])
    k, v = mha.project_kv(x)
    out = mha.step(x[:, -1:], k, v, key_padding_mask=kpm)
    torch.testing.assert_close(out, mha(x, key_padding_mask=kpm)[:, -1:], atol=1e-12, rtol=0)


def test_step_errors_are_explicit():
    dec = TransformerDecoder(E, H, 1, dim_feedforward=FF, dropout=0.1)  # training mode by default
    memory = torch.randn(1, 3, E)
    cache = dec.init_cache(memory)
    with pytest.raises(RuntimeError, match="inference: call .eval"):
        dec.step(torch.randn(1, 1, E), cache)
    dec.eval()
    with pytest.raises(ValueError, match="one position"):
        dec.step(torch.randn(1, 2, E), cache)
    non_causal = TransformerDecoderLayer(E, H, dim_feedforward=FF, dropout=0.0, causal=False).eval()
    kv = non_causal.project_memory(memory)
    with pytest.raises(ValueError, match="causal"):
        non_causal.step(torch.randn(1, 1, E), kv, kv)
    with pytest.raises(ValueError, match="causal=True"):
        mha = MultiHeadAttention(E, H, pattern="truncated", window=1)
        mha.step(torch.randn(1, 1, E), *mha.project_kv(torch.randn(1, 3, E)))
    with pytest.raises(ValueError, match="project_kv/step"):
        MultiHeadAttention(E, H, pattern="graph").project_kv(torch.randn(1, 3, E))
    # Dropout 0 in training mode is allowed: the step is then deterministic.
    TransformerDecoder(E, H, 1, dim_feedforward=FF, dropout=0.0).step(torch.randn(1, 1, E), cache)


def test_a_non_causal_positional_pattern_cannot_step():
    """local_global's rule needs the query's position: without causal=True the query is not the
    last key, so step() refuses, naming the pattern (as truncated does)."""
    mha = MultiHeadAttention(E, H, pattern="local_global", window=1)
    k, v = mha.project_kv(torch.randn(1, 4, E))
    with pytest.raises(ValueError, match=r"pattern='local_global' is invalid: step\(\) needs causal=True"):
        mha.step(torch.randn(1, 1, E), k, v)
