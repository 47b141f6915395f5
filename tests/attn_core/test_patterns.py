"""The pattern registry: lookups and their errors, registration, parameter checks, a custom
pattern through MultiHeadAttention and the Transformer stacks, the existing patterns unchanged
(same numbers, same state_dict keys), and every variant through the modules."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch import nn

import attn_core
from attn_core import (
    PATTERNS,
    MultiHeadAttention,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
    attention,
    check_pattern,
    get_pattern,
    graph_attention,
    list_patterns,
    masked_softmax,
    register_pattern,
    unregister_pattern,
)
from attn_core.transformer import DECODER_PATTERNS

DT = torch.float64
E, H = 8, 2
BUILTIN = ("full", "truncated", "graph", "linear", "linformer", "local_global", "nystrom", "performer")
#: Each efficient variant with small parameters, as MultiHeadAttention / layer keyword arguments.
VARIANT_KW = {
    "linear": {},
    "performer": {"pattern_params": {"features": 8}},
    "linformer": {"pattern_params": {"k_proj": 4}, "max_len": 16},
    "nystrom": {"pattern_params": {"landmarks": 4}},
    "local_global": {"window": 1, "pattern_params": {"global_tokens": 2}},
}


def _x(b=2, length=10, seed=0):
    return torch.randn(b, length, E, generator=torch.Generator().manual_seed(seed), dtype=DT)


def _kpm(b=2, length=10):
    kpm = torch.ones(b, length, dtype=torch.bool)
    kpm[1, 7:] = False
    return kpm


# --------------------------------------------------------------------------- lookups
def test_patterns_is_a_live_view_of_the_registry(restore_registry):
    assert "full" in PATTERNS and "sparse" not in PATTERNS
    assert tuple(PATTERNS) == list_patterns(kind=None) and set(BUILTIN) <= set(PATTERNS)
    assert len(PATTERNS) == len(tuple(PATTERNS)) and PATTERNS[0] == "full"
    assert attn_core.multihead.PATTERNS is PATTERNS
    register_pattern("extra", causal=True, padding=True, cross=True, complexity="L^2")(lambda q, k, v, **kw: v)
    assert "extra" in PATTERNS and "extra" in DECODER_PATTERNS
    unregister_pattern("extra")
    assert "extra" not in PATTERNS


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        get_pattern("sparse")
    msg = str(err.value)
    assert "pattern='sparse'" in msg and "\n" not in msg
    assert all(repr(name) in msg for name in BUILTIN)


def test_check_pattern_names_the_supporters():
    assert check_pattern("linear", causal=True).name == "linear"
    with pytest.raises(ValueError) as err:
        check_pattern("nystrom", causal=True)
    msg = str(err.value)
    assert "\n" not in msg and "does not support causal" in msg
    supporters = msg.split("supporting causal: ")[1]
    assert set(supporters.replace("'", "").split(", ")) == {"full", "truncated", "linear", "performer", "local_global"}
    with pytest.raises(ValueError, match=r"graph pattern, not a sequence one; sequence patterns: 'full'"):
        check_pattern("graph")
    assert check_pattern("graph", kind="graph").kind == "graph"
    with pytest.raises(ValueError, match=r"cross-attention; sequence patterns supporting cross-attention: .*'linformer'"):
        check_pattern("nystrom", cross=True)


def test_registration_flags():
    expected = {  # name: (causal, padding, cross, needs_max_len, params)
        "full": (True, True, True, False, {}),
        "truncated": (True, True, True, False, {"window": None}),
        "graph": (False, False, True, False, {"score": "dot"}),
        "linear": (True, True, True, False, {}),
        "performer": (True, True, True, False, {"features": 128, "redraw": False}),
        "linformer": (False, True, True, True, {"k_proj": 64}),
        "nystrom": (False, True, False, False, {"landmarks": 64, "pinv_iterations": 6}),
        "local_global": (True, True, True, False, {"window": None, "global_tokens": 1}),
    }
    for name, (causal, padding, cross, max_len, params) in expected.items():
        p = get_pattern(name)
        assert (p.causal, p.padding, p.cross, p.needs_max_len, dict(p.params)) == (causal, padding, cross, max_len, params)
        assert p.complexity and p.description
    assert get_pattern("graph").kind == "graph"


def test_reregistering_needs_override(restore_registry):
    def mine(q, k, v, **kw):
        return v

    with pytest.raises(ValueError, match="'full' is already registered.*override=True"):
        register_pattern("full", causal=True, padding=True, cross=True, complexity="L^2")(mine)
    assert get_pattern("full").fn is not mine
    register_pattern("full", causal=True, padding=True, cross=True, complexity="L^2", override=True)(mine)
    assert get_pattern("full").fn is mine
    with pytest.raises(ValueError, match="identifier"):
        register_pattern("not a name", causal=False, padding=False, cross=False, complexity="L")
    with pytest.raises(ValueError, match=r"incremental='yes' is invalid: expected a bool"):
        register_pattern("mine", causal=True, padding=True, cross=True, complexity="L", incremental="yes")
    with pytest.raises(ValueError, match=r"allows=3 is invalid: expected None or the mask rule"):
        register_pattern("mine", causal=True, padding=True, cross=True, complexity="L", allows=3)
    with pytest.raises(ValueError, match=r"recurrence=\(1, 2\) is invalid: expected None or an attn_core.Recurrence"):
        register_pattern("mine", causal=True, padding=True, cross=True, complexity="L", recurrence=(1, 2))
    rec = get_pattern("linear").recurrence
    with pytest.raises(ValueError, match=r"Recurrence\(init, step\) of a causal pattern"):  # decoding is causal
        register_pattern("mine", causal=False, padding=True, cross=True, complexity="L", recurrence=rec)


# --------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("kwargs,match", [
    (dict(pattern="performer", pattern_params={"feature": 3}), r"unknown key\(s\) 'feature'.*valid keys: 'features', 'redraw'"),
    (dict(pattern="full", pattern_params={"window": 3}), r"unknown key\(s\) 'window'.*valid keys: none"),
    (dict(pattern="performer", pattern_params={"features": 2.5}), "features=2.5"),
    (dict(pattern="performer", pattern_params={"features": 0}), "features=0"),
    (dict(pattern="nystrom", pattern_params={"landmarks": True}), "landmarks=True"),
    (dict(pattern="local_global"), "window=None"),
    (dict(pattern="local_global", window=2, pattern_params={"global_tokens": -1}), "global_tokens=-1"),
    (dict(pattern="truncated", window=3, pattern_params={"window": 4}), "give it once"),
    (dict(pattern="full", window=3), r"window=3.*'truncated', 'local_global'"),
    (dict(pattern="linformer"), "max_len=None"),
    (dict(pattern="nystrom", causal=True), r"'nystrom' is invalid.*supporting causal: 'full'"),
    (dict(pattern="linear", pattern_params=[("a", 1)]), "pattern_params"),
])
def test_bad_pattern_arguments_raise_one_line(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        MultiHeadAttention(E, H, **kwargs)
    assert "\n" not in str(err.value)


def test_window_shorthand_equals_pattern_params():
    torch.manual_seed(0)
    a = MultiHeadAttention(E, H, pattern="truncated", window=3).double()
    b = MultiHeadAttention(E, H, pattern="truncated", pattern_params={"window": 3}).double()
    b.load_state_dict(a.state_dict())
    assert a.window == b.window == 3
    torch.testing.assert_close(a(_x()), b(_x()), atol=0, rtol=0)
    g = MultiHeadAttention(E, H, pattern="graph", pattern_params={"score": "additive"})
    assert g.score == "additive" and MultiHeadAttention(E, H, pattern="graph", score="additive").score == "additive"


# --------------------------------------------------------------------------- existing patterns unchanged
def _heads(mha, x, proj):
    return proj(x).unflatten(-1, (mha.num_heads, mha.head_dim)).transpose(1, 2)  # (B, H, L, Dh)


@pytest.mark.parametrize("kw", [dict(pattern="full"), dict(pattern="full", causal=True),
                                dict(pattern="truncated", window=3), dict(pattern="truncated", window=2, causal=True)])
@pytest.mark.parametrize("train", [False, True])
def test_full_and_truncated_are_bit_for_bit_attention(kw, train):
    torch.manual_seed(1)
    mha = MultiHeadAttention(E, H, dropout=0.2, **kw).double().train(train)
    x, kpm = _x(length=40), _kpm(length=40)
    torch.manual_seed(5)
    out = mha(x, key_padding_mask=kpm)
    q, k, v = (_heads(mha, x, p) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    torch.manual_seed(5)
    ref = attention(q, k, v, causal=kw.get("causal", False), window=kw.get("window"), key_padding_mask=kpm,
                    dropout_p=0.2 if train else 0.0)
    assert torch.equal(out, mha.out_proj(ref.transpose(1, 2).flatten(-2)))


@pytest.mark.parametrize("score", ["dot", "additive"])
def test_graph_is_bit_for_bit_graph_attention(score):
    torch.manual_seed(2)
    mha = MultiHeadAttention(E, H, pattern="graph", score=score).double()
    x = torch.randn(6, E, dtype=DT)
    ei = torch.tensor([[0, 1, 2, 3, 4, 5, 0], [1, 2, 3, 4, 5, 0, 3]])
    split = lambda p: p(x).unflatten(-1, (H, E // H))  # (N, H, Dh)
    ref = graph_attention(split(mha.q_proj), split(mha.k_proj), split(mha.v_proj), ei, score=score)
    assert torch.equal(mha(x, edge_index=ei), mha.out_proj(ref.flatten(-2)))


PROJ_KEYS = {f"{p}_proj.{w}" for p in ("q", "k", "v", "out") for w in ("weight", "bias")}


@pytest.mark.parametrize("kw", [dict(pattern="full"), dict(pattern="truncated", window=2), dict(pattern="graph"),
                                dict(pattern="linear"), dict(pattern="nystrom")])
def test_stateless_patterns_keep_the_state_dict_keys(kw):
    mha = MultiHeadAttention(E, H, **kw)
    assert set(mha.state_dict()) == PROJ_KEYS and mha.pattern_state is None
    layer_keys = set(TransformerEncoderLayer(E, H, dim_feedforward=16, **kw).state_dict())
    assert layer_keys == {f"self_attn.{k}" for k in PROJ_KEYS} | {
        f"{m}.{w}" for m in ("linear1", "linear2", "norm1", "norm2") for w in ("weight", "bias")}


# --------------------------------------------------------------------------- a custom pattern
class _Temperature(nn.Module):
    """A learned per-head log-temperature (a parameter) and a fixed offset (a buffer)."""

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.log_t = nn.Parameter(torch.linspace(-0.5, 0.5, num_heads))
        self.register_buffer("offset", torch.tensor(0.25))


def _register_tempered(**flags):
    def make_state(num_heads, head_dim, *, max_len, temperature):
        return _Temperature(num_heads)

    def tempered(q, k, v, *, causal=False, key_padding_mask=None, dropout_p=0.0, scale=None, state=None,
                 temperature=1.0):
        """Softmax attention with scores (q k^T / sqrt(d) + offset) * temperature * exp(log_t[h])."""
        s = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5 + state.offset) * temperature
        s = s * state.log_t.exp()[:, None, None]  # (B, H, Lq, Lk)
        mask = None if key_padding_mask is None else key_padding_mask[:, None, None, :]
        return masked_softmax(s, mask) @ v

    base = dict(causal=False, padding=True, cross=True)
    register_pattern("tempered", complexity="L^2", params={"temperature": 1.0}, make_state=make_state,
                     description="test pattern", **{**base, **flags})(tempered)


def test_custom_pattern_through_multihead_attention(restore_registry):
    _register_tempered()
    torch.manual_seed(3)
    mha = MultiHeadAttention(E, H, pattern="tempered", pattern_params={"temperature": 2.0}).double()
    assert mha.pattern_state.offset.dtype == DT  # buffers follow .double() / .to()
    assert {"pattern_state.log_t", "pattern_state.offset"} <= set(mha.state_dict())
    x, kpm = _x(), _kpm()
    out = mha(x, key_padding_mask=kpm)
    q, k, v = (_heads(mha, x, p) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    s = (q @ k.transpose(-2, -1) / 2 + 0.25) * 2.0 * mha.pattern_state.log_t.exp()[:, None, None]
    s = s.masked_fill(~kpm[:, None, None, :], float("-inf"))
    ref = mha.out_proj((torch.softmax(s, -1) @ v).transpose(1, 2).flatten(-2))
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    out.sum().backward()
    assert mha.pattern_state.log_t.grad.abs().sum() > 0  # the state's parameters train


def test_custom_pattern_through_the_stacks(restore_registry):
    _register_tempered()
    enc = TransformerEncoder(E, H, 2, dim_feedforward=16, dropout=0.0, pattern="tempered",
                             pattern_params={"temperature": 0.5}).double()
    states = [layer.self_attn.pattern_state for layer in enc.layers]
    assert states[0] is not states[1]  # one state per layer
    assert all(layer.self_attn.pattern_params == {"temperature": 0.5} for layer in enc.layers)
    out = enc(_x(), key_padding_mask=_kpm())
    out.sum().backward()
    assert all(s.log_t.grad.abs().sum() > 0 for s in states)
    with pytest.raises(ValueError, match=r"'tempered' is invalid.*causal"):  # registered non-causal
        TransformerDecoder(E, H, 1, pattern="tempered")


def test_custom_pattern_capabilities_are_enforced(restore_registry):
    _register_tempered(padding=False, cross=False)
    mha = MultiHeadAttention(E, H, pattern="tempered")
    mha(_x().float())  # self-attention without padding: fine
    with pytest.raises(ValueError, match=r"'tempered' is invalid: it does not support key padding; .*'linear'"):
        mha(_x().float(), key_padding_mask=_kpm())
    with pytest.raises(ValueError, match=r"does not support cross-attention; .*'full'"):
        mha(_x().float(), _x(length=7).float())
    with pytest.raises(ValueError, match="need_weights"):
        mha(_x().float(), need_weights=True)
    with pytest.raises(ValueError, match="project_kv/step"):
        mha.project_kv(_x().float())


# --------------------------------------------------------------------------- decoders
def test_decoder_refuses_non_causal_patterns():
    assert set(DECODER_PATTERNS) == {"full", "truncated", "linear", "performer", "local_global"}
    for name in ("nystrom", "linformer", "graph"):
        for causal in (True, False):  # a decoder generates left to right, even when built non-causal
            with pytest.raises(ValueError, match=rf"pattern='{name}' is invalid.*'linear', 'local_global', 'performer'"):
                TransformerDecoderLayer(E, H, pattern=name, max_len=16, causal=causal)


@pytest.mark.parametrize("name", ["linear", "performer", "local_global"])
def test_causal_variants_in_a_decoder_never_see_the_future(name):
    torch.manual_seed(4)
    dec = TransformerDecoder(E, H, 2, dim_feedforward=16, dropout=0.0, pattern=name, **VARIANT_KW[name]).double()
    x, mem = _x(length=9), _x(length=5, seed=1)
    out = dec(x, mem)
    x2 = x.clone()
    x2[:, 6:] += 3.0 * _x(length=3, seed=7)  # random: LayerNorm would erase a constant shift
    out2 = dec(x2, mem)
    torch.testing.assert_close(out2[:, :6], out[:, :6], atol=1e-12, rtol=0)
    assert not torch.allclose(out2[:, 6:], out[:, 6:])
    first, _ = dec.eval().step(x[:, :1], dec.init_cache(mem))  # registered incremental: a cache too
    torch.testing.assert_close(first, out[:, :1], atol=1e-12, rtol=0)


# --------------------------------------------------------------------------- variants through the modules
@pytest.mark.parametrize("name", list(VARIANT_KW))
def test_variants_through_an_encoder_stack(name):
    torch.manual_seed(5)
    enc = TransformerEncoder(E, H, 2, dim_feedforward=16, dropout=0.1, pattern=name, **VARIANT_KW[name]).double()
    x, kpm = _x(length=12), _kpm(length=12)
    enc.train()
    loss = enc(x, key_padding_mask=kpm).pow(2).sum()
    loss.backward()
    assert torch.isfinite(loss)
    for n, p in enc.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    enc.eval()
    out = enc(x, key_padding_mask=kpm)
    x2 = x.clone()
    x2[~kpm] += 5.0 * _x(length=12, seed=8)[~kpm]  # padded positions: real outputs must not move
    out2 = enc(x2, key_padding_mask=kpm)
    torch.testing.assert_close(out2[kpm], out[kpm], atol=1e-10, rtol=0)
    assert not torch.allclose(out2[~kpm], out[~kpm])


def test_variant_state_is_per_layer_and_moves_with_the_module():
    enc = TransformerEncoder(E, H, 2, pattern="linformer", max_len=12, pattern_params={"k_proj": 4})
    e0, e1 = (layer.self_attn.pattern_state.E for layer in enc.layers)
    assert e0.shape == (4, 12) and not torch.equal(e0, e1)
    assert "layers.0.self_attn.pattern_state.F" in enc.state_dict()
    mha = MultiHeadAttention(E, H, pattern="performer", pattern_params={"features": 6}).double()
    assert mha.pattern_state.projection.dtype == DT and mha.pattern_state.projection.shape == (6, E // H)
    assert "pattern_state.projection" in mha.state_dict()
    with pytest.raises(ValueError, match="never forms its attention weights"):
        mha(_x(), need_weights=True)
    lg = MultiHeadAttention(E, H, pattern="local_global", window=1).double()
    _, w = lg(_x(), need_weights=True)
    assert w.shape == (2, H, 10, 10) and (w[:, :, 5, 1:4] == 0).all() and (w[:, :, 5, 0] > 0).all()


@pytest.mark.parametrize("name", list(VARIANT_KW))
def test_variant_modules_copy_and_save(name):
    """deepcopy and torch.save/load (checkpoint averaging, whole-model saves) keep working."""
    torch.manual_seed(6)
    enc = TransformerEncoder(E, H, 1, dim_feedforward=16, pattern=name, **VARIANT_KW[name]).double().eval()
    buf = io.BytesIO()
    torch.save(enc, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    x = _x(length=12)
    for other in (copy.deepcopy(enc), loaded):
        torch.testing.assert_close(other(x), enc(x), atol=0, rtol=0)
