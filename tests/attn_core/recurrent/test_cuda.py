"""The recurrences on CUDA against the float64 CPU reference (values, gradients, a padded
bidirectional batch, step()): ``python -m pytest -m gpu`` on a GPU machine. Skips with
"needs CUDA" elsewhere."""

from __future__ import annotations

import pytest
import torch

from attn_core.recurrent import Bidirectional, linear_scan

from tests.attn_core.recurrent.naive import CASES, D_MODEL, make

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
IDS = [c[0] for c in CASES]
#: largest error over 1 + max |reference|, float32 on the GPU against float64 on the CPU
TOL = 1e-4


def _rel_err(got, want):
    return ((got.detach().cpu().to(want.dtype) - want).abs().max() / (1 + want.abs().max())).item()


def test_linear_scan_complex_on_cuda():
    g = torch.Generator().manual_seed(0)
    a = torch.polar(torch.rand(2, 300, 4, generator=g, dtype=torch.float64),
                    torch.rand(2, 300, 4, generator=g, dtype=torch.float64)).requires_grad_()
    b = torch.randn(2, 300, 4, generator=g, dtype=torch.complex128).requires_grad_()
    ref = linear_scan(a, b)
    ga, gb = torch.autograd.grad(ref.abs().square().sum(), [a, b])
    ac, bc = (t.detach().to("cuda", torch.complex64).requires_grad_() for t in (a, b))
    out = linear_scan(ac, bc)
    gac, gbc = torch.autograd.grad(out.abs().square().sum(), [ac, bc])
    assert out.is_cuda and max(_rel_err(out, ref), _rel_err(gac, ga), _rel_err(gbc, gb)) < TOL


@pytest.mark.parametrize("name,cls,kwargs,loop", CASES, ids=IDS)
def test_padded_bidirectional_layer_on_cuda_matches_cpu_float64(name, cls, kwargs, loop):
    layers = iter([make(cls, kwargs, seed=2), make(cls, kwargs, seed=3)])
    ref_model = Bidirectional(lambda: next(layers)).double()
    model = Bidirectional(lambda: cls(D_MODEL, **kwargs))
    model.load_state_dict(ref_model.state_dict())
    model = model.to("cuda", torch.float32)
    x = torch.randn(3, 37, D_MODEL, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    lengths = torch.tensor([37, 5, 20])
    xr = x.clone().requires_grad_()
    ref = ref_model(xr, lengths=lengths)
    ref_grads = torch.autograd.grad(ref.square().sum(), [xr, *ref_model.parameters()], allow_unused=True)
    xc = x.to("cuda", torch.float32).requires_grad_()
    out = model(xc, lengths=lengths.cuda())
    grads = torch.autograd.grad(out.square().sum(), [xc, *model.parameters()], allow_unused=True)
    assert _rel_err(out, ref) < TOL
    for got, want in zip(grads, ref_grads):
        if want is not None:
            assert _rel_err(got, want) < TOL


@pytest.mark.parametrize("name,cls,kwargs,loop", CASES, ids=IDS)
def test_step_on_cuda_equals_the_causal_pass(name, cls, kwargs, loop):
    model = make(cls, kwargs, seed=4).to("cuda", torch.float32).eval()
    x = torch.randn(2, 9, D_MODEL, device="cuda")
    y, state = model(x[:, :4], return_state=True)
    full = model(x)
    for t in range(4, 9):
        y_t, state = model.step(x[:, t], state)
        torch.testing.assert_close(y_t, full[:, t], rtol=1e-4, atol=1e-5)
