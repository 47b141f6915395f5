"""Padded batches are exact: a right-padded batch of random lengths gives, at every real
position, what each sequence gives alone, in both directions, gradients included; padded
outputs are zeros and garbage (NaN) in the padding reaches nothing. Reversal within lengths."""

from __future__ import annotations

import pytest
import torch

from attn_core.recurrent import Bidirectional, resolve_mask, reverse_within

from tests.attn_core.recurrent.naive import CASES, D_MODEL, make

IDS = [c[0] for c in CASES]
LENGTHS = [5, 1, 9, 0, 3]  # 9 = the padded length: one sequence with no padding; 0: nothing real


def build(cls, kwargs, bidirectional, merge="sum"):
    if not bidirectional:
        return make(cls, kwargs, seed=2)
    layers = iter([make(cls, kwargs, seed=2), make(cls, kwargs, seed=3)])  # own parameters per direction
    return Bidirectional(lambda: next(layers), merge=merge).double()


@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("name,cls,kwargs,loop", CASES, ids=IDS)
def test_padded_batch_equals_each_sequence_alone(name, cls, kwargs, loop, bidirectional):
    m = build(cls, kwargs, bidirectional)
    g = torch.Generator().manual_seed(11)
    lengths = torch.tensor(LENGTHS)
    length = max(LENGTHS)
    x = torch.randn(len(LENGTHS), length, D_MODEL, generator=g, dtype=torch.float64)
    mask = torch.arange(length)[None, :] < lengths[:, None]  # (B, L)
    x = x.masked_fill(~mask[..., None], float("nan")).requires_grad_()  # garbage in the padding
    w = torch.randn(x.shape, generator=g, dtype=torch.float64)
    for how in ({"lengths": lengths}, {"key_padding_mask": mask}):
        y = m(x, **how)
        assert torch.isfinite(y).all() and not y[~mask].any()
        params = list(m.parameters())
        g_x, *g_p = torch.autograd.grad((y * w.nan_to_num()).sum(), [x, *params], allow_unused=True)
        assert not g_x[~mask].any()
        alone_p = [torch.zeros_like(p) for p in params]
        states = None if bidirectional else m(x, **how, return_state=True)[1]  # after each last real position
        for b, n in enumerate(LENGTHS):
            if n == 0:
                continue
            xb = x[b : b + 1, :n].detach().requires_grad_()
            yb = m(xb)
            torch.testing.assert_close(y[b : b + 1, :n], yb, rtol=1e-10, atol=1e-12)
            gb_x, *gb_p = torch.autograd.grad((yb * w[b : b + 1, :n]).sum(), [xb, *params], allow_unused=True)
            torch.testing.assert_close(g_x[b : b + 1, :n], gb_x, rtol=1e-10, atol=1e-12)
            alone_p = [acc + (gp if gp is not None else 0) for acc, gp in zip(alone_p, gb_p)]
            if states is not None:  # the state step() continues from, as for the sequence alone
                _, state = m(x[b : b + 1, :n], return_state=True)
                for key, val in states.items():
                    torch.testing.assert_close(val[b : b + 1], state[key], rtol=1e-10, atol=1e-12)
        for got, want in zip(g_p, alone_p):
            torch.testing.assert_close(got if got is not None else torch.zeros_like(want), want,
                                       rtol=1e-9, atol=1e-11)


def test_bidirectional_reads_the_reversed_sequence_with_its_own_parameters():
    """The backward direction at position t sees positions t..n-1: changing the last real
    token changes the first output; the two directions do not share parameters."""
    name, cls, kwargs, _ = CASES[0]
    m = build(cls, kwargs, True, merge="concat")
    assert {id(p) for p in m.forward_layer.parameters()}.isdisjoint(id(p) for p in m.backward_layer.parameters())
    x = torch.randn(1, 6, D_MODEL, dtype=torch.float64)
    lengths = torch.tensor([4])
    x2 = x.clone()
    x2[0, 3] += 1.0
    assert not torch.allclose(m(x, lengths=lengths)[0, 0], m(x2, lengths=lengths)[0, 0])
    x3 = x.clone()
    x3[0, 5] += 1.0  # padding: no effect anywhere
    torch.testing.assert_close(m(x, lengths=lengths), m(x3, lengths=lengths))


def test_reverse_within_keeps_padding_in_place():
    x = torch.arange(10.0).view(2, 5, 1)
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])
    out = reverse_within(x, mask)
    assert out[..., 0].tolist() == [[2.0, 1.0, 0.0, 3.0, 4.0], [9.0, 8.0, 7.0, 6.0, 5.0]]
    torch.testing.assert_close(reverse_within(out, mask), x)


def test_bad_padding_arguments_are_one_clear_line():
    x = torch.zeros(2, 4, D_MODEL)
    with pytest.raises(ValueError, match=r"key_padding_mask row 1 has a real token after a padded one"):
        resolve_mask(x, key_padding_mask=torch.tensor([[True, True, False, False], [True, False, True, False]]))
    with pytest.raises(ValueError, match=r"lengths span \[0, 5\]: expected values in \[0, 4\]"):
        resolve_mask(x, lengths=torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"pass lengths or key_padding_mask, not both"):
        resolve_mask(x, lengths=torch.tensor([1, 2]), key_padding_mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"lengths has shape \(2,\) and dtype torch.float32"):
        resolve_mask(x, lengths=torch.tensor([1.0, 2.0]))
