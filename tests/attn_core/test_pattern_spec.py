"""Issue 32.4: pattern registrations answer for themselves. attn_core compares no pattern names
outside the registrations; a plug-in band pattern registered here (its width a parameter of its
own name, its decoding declared) works in MultiHeadAttention, the layers and incremental decoding
exactly as an explicit mask + softmax, without editing attn_core."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
import torch

import attn_core
from attn_core import MultiHeadAttention, TransformerDecoder, TransformerEncoder, get_pattern, register_pattern
from attn_core.multihead import decoding_patterns, incremental_patterns
from tests.helpers.attention import randomise

ATTN_CORE = Path(attn_core.__file__).parent
E, H, B, L = 8, 2, 3, 9
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


# --------------------------------------------------------------------------- no name comparisons
def _name_comparisons(tree: ast.AST, names: set[str]) -> list[int]:
    """Lines comparing a value with a registered pattern name (``== "truncated"``, ``in ("full", ...)``);
    comparisons of a ``kind`` (``"sequence"``/``"graph"`` kinds, not names) are not counted."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if any(isinstance(o, (ast.Name, ast.Attribute)) and getattr(o, "id", getattr(o, "attr", "")) == "kind"
               for o in operands):
            continue
        consts = [c for o in operands for c in ([o] if isinstance(o, ast.Constant) else getattr(o, "elts", []))]
        if any(isinstance(c, ast.Constant) and c.value in names for c in consts):
            lines.append(node.lineno)
    return lines


def test_attn_core_never_compares_pattern_names():
    """Only the registrations (attn_core/variants/) may name patterns; everything else asks the spec."""
    names = set(attn_core.PATTERNS)
    found = {
        str(path.relative_to(ATTN_CORE)): lines
        for path in sorted(ATTN_CORE.rglob("*.py"))
        if "variants" not in path.parts
        and (lines := _name_comparisons(ast.parse(path.read_text()), names))
    }
    assert not found, f"pattern names compared (ask the registration instead): {found}"


def test_the_name_check_can_fail():
    code = 'a = self.pattern == "truncated"\nb = p in ("full", "x")\nc = spec.kind == "graph"\nd = s == "dot"'
    assert _name_comparisons(ast.parse(code), set(attn_core.PATTERNS)) == [1, 2]


def test_builtin_registrations_answer_for_themselves():
    trunc, lg, full, lin = (get_pattern(n) for n in ("truncated", "local_global", "full", "linear"))
    assert trunc.band == "window" and trunc.positional and trunc.buffer({"window": 3}) == (0, 3)
    assert lg.band is None and lg.positional and lg.buffer({"window": 2, "global_tokens": 1}) == (1, 2)
    assert not full.positional and full.buffer is None and full.decodes
    assert lin.decodes and lin.recurrence is not None and not lin.positional
    assert get_pattern("graph").graph and not full.graph
    mha = MultiHeadAttention(E, H, pattern="truncated", window=3, causal=True)
    assert mha.spec is trunc and mha._band == 3 and mha._buffer == (0, 3)


# --------------------------------------------------------------------------- a plug-in band pattern
def _band_mask(lq: int, lk: int, width: int, causal: bool) -> torch.Tensor:
    """``(Lq, Lk)``: the plug-in's rule written out position by position."""
    return torch.tensor([[abs(i - j) <= width and (j <= i or not causal) for j in range(lk)] for i in range(lq)])


def _band_fn(q, k, v, *, causal=False, key_padding_mask=None, dropout_p=0.0, scale=None, state=None, width=1):
    """The plug-in's own function: dense softmax under its band, q (B, H, Lq, D) -> (B, H, Lq, Dv)."""
    mask = _band_mask(q.shape[2], k.shape[2], width, causal)[None, None]  # (1, 1, Lq, Lk)
    mask = mask if key_padding_mask is None else mask & key_padding_mask[:, None, None, :]
    return attn_core.reference_attention(q, k, v, mask, scale)


@pytest.fixture
def band(restore_registry):
    register_pattern("plugin_band", causal=True, padding=True, cross=True, complexity="L*w", params={"width": 1},
                     dropout=False, incremental=True, band="width", description="a user's band")(_band_fn)
    return "plugin_band"


def _reference(mha: MultiHeadAttention, x, width: int, causal: bool, kpm=None):
    """Explicit multi-head attention: projections, a mask written out, softmax, output projection."""
    dh = E // H
    q, k, v = (lin(x).unflatten(-1, (H, dh)).transpose(1, 2) for lin in (mha.q_proj, mha.k_proj, mha.v_proj))
    mask = _band_mask(x.shape[1], x.shape[1], width, causal)[None, None]  # (1, 1, L, L)
    mask = mask if kpm is None else mask & kpm[:, None, None, :]
    scores = (q @ k.transpose(-1, -2) / dh**0.5).masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, -1).nan_to_num(0.0)  # rows with nothing to see: zeros
    return mha.out_proj((probs @ v).transpose(1, 2).flatten(-2))  # (B, L, E)


def _inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, E, generator=g, dtype=torch.float64).to(dtype)
    kpm = torch.ones(B, L, dtype=torch.bool)
    kpm[1, 6:] = False
    return x, kpm


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("width", [0, 2])
def test_a_plugin_band_equals_explicit_mask_softmax(band, dtype, causal, width):
    torch.manual_seed(0)
    mha = MultiHeadAttention(E, H, pattern=band, causal=causal, pattern_params={"width": width}).to(dtype)
    randomise(mha, 1)
    x, kpm = _inputs(dtype)
    for mask in (None, kpm):
        xs = [x.clone().requires_grad_(True) for _ in range(2)]
        ours, ref = mha(xs[0], key_padding_mask=mask), _reference(mha, xs[1], width, causal, mask)
        torch.testing.assert_close(ours, ref, atol=TOL[dtype], rtol=TOL[dtype])
        g = torch.randn_like(ours)
        ours_grads = torch.autograd.grad(ours, [xs[0], mha.q_proj.weight], g)
        ref_grads = torch.autograd.grad(ref, [xs[1], mha.q_proj.weight], g)
        for a, b in zip(ours_grads, ref_grads):
            torch.testing.assert_close(a, b, atol=TOL[dtype], rtol=TOL[dtype])


def _use_reference(stack: torch.nn.Module, width: int, causal: bool) -> None:
    """Every layer's self-attention replaced by :func:`_reference` on the same weights."""
    for layer in stack.layers:
        mha = layer.self_attn
        mha.forward = lambda q, key=None, value=None, *, key_padding_mask=None, m=mha, **_: _reference(
            m, q, width, causal, key_padding_mask)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_plugin_band_in_the_encoder_and_decoder(band, dtype):
    x, kpm = _inputs(dtype)
    memory = torch.randn(B, 5, E, dtype=dtype, generator=torch.Generator().manual_seed(3))
    for stack, causal, call in (
        (TransformerEncoder(E, H, 2, dropout=0.0, pattern=band, pattern_params={"width": 2}), False,
         lambda s: s(x, key_padding_mask=kpm)),
        (TransformerDecoder(E, H, 2, dropout=0.0, pattern=band, pattern_params={"width": 2}), True,
         lambda s: s(x, memory)),
    ):
        stack = stack.to(dtype).eval()
        randomise(stack, 2)
        ref_stack = copy.deepcopy(stack)  # the registration copies as its name
        _use_reference(ref_stack, 2, causal)
        ours, ref = call(stack), call(ref_stack)
        assert ours.abs().max() > 0.1
        torch.testing.assert_close(ours, ref, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("width", [0, 2])
def test_a_plugin_band_decodes_from_a_rolling_buffer(band, dtype, width):
    """Its declared band gives it a key/value cache of its last ``width`` positions, and each
    decoded position equals the teacher-forced decoder's row."""
    assert band in incremental_patterns() and band in decoding_patterns()
    dec = TransformerDecoder(E, H, 2, dropout=0.0, pattern=band, pattern_params={"width": width}).to(dtype)
    randomise(dec, 4)
    dec.eval()
    x, _ = _inputs(dtype, seed=5)
    memory = torch.randn(B, 5, E, dtype=dtype, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        full = dec(x, memory)  # (B, L, E)
        cache = dec.init_cache(memory)
        for t in range(L):
            out, cache = dec.step(x[:, t:t + 1], cache)
            torch.testing.assert_close(out, full[:, t:t + 1], atol=TOL[dtype], rtol=TOL[dtype])
            assert cache["kv.0.self_k"].shape[2] == min(t + 1, width) and dec.cache_length(cache) == t + 1


def test_band_and_buffer_registrations_are_checked(restore_registry):
    with pytest.raises(ValueError, match=r"^band='w' is invalid: .*among params: 'width'$"):
        register_pattern("bad_band", causal=True, padding=True, cross=True, complexity="L", params={"width": 1},
                         band="w")
    with pytest.raises(ValueError, match=r"^buffer=.* is invalid: .*mask rule \(allows or band\)$"):
        register_pattern("bad_buffer", causal=True, padding=True, cross=True, complexity="L", incremental=True,
                         buffer=lambda p: (0, 1))
