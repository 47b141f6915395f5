"""The vision ResNet against torchvision's in float64 (values and every gradient), and its memory
format: NCHW on every CPU (oneDNN's channels_last backward of stride-2 1x1 convolutions is wrong
or crashes on AVX2-only CPUs), channels_last only on CUDA."""

from __future__ import annotations

import pytest
import torch

from tasks.vision.models import SmallResNet


def _small_resnet(channels: int, **kw) -> SmallResNet:
    torch.manual_seed(channels)
    return SmallResNet(channels, 12, 12, 5, base_channels=4, layers=[1, 1, 1, 1], zero_init_residual=False, **kw)


def _conv_layouts(net: torch.nn.Module, x: torch.Tensor) -> list[tuple[str, bool, bool]]:
    """Forward and backward of ``net`` on ``x``; per Conv2d input, and per 3x3 weight and its
    gradient: (what, NCHW-contiguous, channels_last-contiguous). With 3 input channels every
    one of these tensors tells the two layouts apart (a 1-channel stem input is both)."""
    seen: list[tuple[str, bool, bool]] = []

    def layout(what: str, t: torch.Tensor) -> None:
        seen.append((what, t.is_contiguous(), t.is_contiguous(memory_format=torch.channels_last)))

    convs = {n: m for n, m in net.named_modules() if isinstance(m, torch.nn.Conv2d)}
    hooks = [m.register_forward_pre_hook(lambda m, args, n=n: layout(f"{n} input", args[0])) for n, m in convs.items()]
    net(x).sum().backward()
    for h in hooks:
        h.remove()
    for n, m in convs.items():
        if m.kernel_size != (1, 1):  # a 1x1 kernel is contiguous in both layouts
            layout(f"{n}.weight", m.weight)
            layout(f"{n}.weight.grad", m.weight.grad)
    return seen


def _assert_matches_float64_torchvision(net: SmallResNet, x: torch.Tensor, atol: float, rtol: float) -> None:
    """Outputs and every parameter gradient of ``net`` (train mode: batch-statistics BN) against
    torchvision's own forward on a float64 NCHW copy on the CPU (no oneDNN there)."""
    import copy

    import torchvision

    ref = copy.deepcopy(net).cpu().double().to(memory_format=torch.contiguous_format)
    out = net(x)
    expected = torchvision.models.ResNet.forward(ref, x.detach().cpu().double().contiguous())  # (B, classes)
    torch.testing.assert_close(out.cpu().double(), expected, atol=atol, rtol=rtol)
    g = torch.randn(out.shape, dtype=torch.float64)
    out.backward(g.to(out))
    expected.backward(g)
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu().double(), q.grad, atol=atol, rtol=rtol, msg=name)


@pytest.mark.parametrize("channels", [1, 3])
def test_resnet_on_cpu_matches_torchvision(channels):
    """The path the CPU runs (NCHW): values and gradients agree with a float64 reference. The
    downsample of layer2 is a stride-2 1x1 conv with 4 in-channels: in channels_last on an AVX2
    CPU (oneDNN) its weight gradient came out wrong, or the process aborted."""
    net = _small_resnet(channels)
    _assert_matches_float64_torchvision(net, torch.randn(6, channels, 12, 12), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("memory_format", ["auto", "contiguous"])
def test_resnet_on_cpu_never_uses_channels_last(memory_format):
    """Even given a channels_last input, every convolution sees NCHW inputs and weights on the CPU."""
    net = _small_resnet(3, memory_format=memory_format)
    x = torch.randn(4, 3, 12, 12).contiguous(memory_format=torch.channels_last)
    seen = _conv_layouts(net, x)
    assert len(seen) == 12 + 2 * 9  # 12 conv inputs (stem, 8 in blocks, 3 downsamples), 9 3x3 weights and grads
    assert [what for what, nchw, cl in seen if not nchw or cl] == []


def test_resnet_memory_format_is_checked():
    with pytest.raises(ValueError, match=r"memory_format='nhwc'; valid: 'auto', 'channels_last', 'contiguous'"):
        SmallResNet(1, 12, 12, 5, memory_format="nhwc")
    net = _small_resnet(1, memory_format="channels_last")
    with pytest.raises(ValueError, match=r"memory_format='channels_last' is only verified on CUDA, got a cpu "
                                         r"input .*valid here: 'auto', 'contiguous'"):
        net(torch.randn(2, 1, 12, 12))
    assert net.layer1[0].conv1.weight.is_contiguous()  # refused before any weight moved


@pytest.mark.skipif(not torch.cuda.is_available(), reason="channels_last is only used on CUDA (CPU runs NCHW)")
@pytest.mark.parametrize("channels", [1, 3])
def test_resnet_channels_last_on_cuda_matches_torchvision(channels):
    """On CUDA "auto" runs channels_last: values and gradients agree with the float64 NCHW
    reference (TF32 off); moved back to the CPU, the same network runs NCHW again."""
    net = _small_resnet(channels).cuda()
    x = torch.randn(6, channels, 12, 12)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        seen = _conv_layouts(net, x.cuda())
        assert all(cl for what, nchw, cl in seen), seen
        net.zero_grad()
        _assert_matches_float64_torchvision(net, x.cuda(), atol=1e-4, rtol=1e-3)
    net.cpu().zero_grad()
    assert all(nchw for what, nchw, cl in _conv_layouts(net, x)), "back on the CPU: NCHW"
