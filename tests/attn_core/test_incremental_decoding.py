"""Key/value-cached incremental decoding (``TransformerDecoder.init_cache`` / ``step``,
``MultiHeadAttention.project_kv`` / ``step``): decoding position by position must give the
teacher-forced causal decoder's outputs at every position, for pre-LN and post-LN, full,
truncated (windows narrower than the sequence included), linear, performer and local_global
self-attention (every pattern registered ``incremental``), with memory padding;
the cache must grow one position a step and follow a reordering of the batch."""

from __future__ import annotations

import pytest
import torch

from attn_core.multihead import MultiHeadAttention, incremental_patterns
from attn_core.transformer import TransformerDecoder, TransformerDecoderLayer
from tests.helpers.attention import DEC_B as B, DEC_E as E, DEC_FF as FF, DEC_H as H, DEC_LAYERS as LAYERS
from tests.helpers.attention import DEC_T as T
from tests.helpers.attention import decoder_inputs as _inputs, make_decoder as _decoder, step_all as _step_all
from tests.helpers.attention import randomise as _randomise  # random weights, LayerNorms and biases too



CASES = [("full", None), ("truncated", 0), ("truncated", 2), ("truncated", 5), ("truncated", T + 3),
         ("linear", None), ("performer", None),  # the kernel patterns: their function over every cached key
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


def test_extra_state_entries_pass_through():
    dec = _decoder(torch.float64, True, "full", None)
    x, memory, mask = _inputs(torch.float64)
    state = {"mask": mask, **dec.init_cache(memory)}
    with torch.no_grad():
        _, new = dec.step(x[:, :1], state, memory_key_padding_mask=mask)
    assert new["mask"] is mask and set(new) == set(state)


@pytest.mark.parametrize("pattern, window", [("full", None), ("truncated", 2)])
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


def test_every_incremental_pattern_is_tested_here():
    assert set(incremental_patterns()) == {p for p, _ in CASES}  # a new one must join CASES


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
    non_causal = TransformerDecoderLayer(E, H, FF, dropout=0.0, causal=False).eval()
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
