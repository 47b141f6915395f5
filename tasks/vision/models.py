"""Image classifiers, registered by name with their family. Every network is
``net(x (B, C, H, W) float) -> logits (B, num_classes)`` and reads channels, size and classes
from the DataModule's ``info``, so one config runs on MNIST, Fashion-MNIST or CIFAR-10.

* ``vit`` / ``vit_local`` (family ``attention``): :class:`ViT` (Dosovitskiy et al. 2021): a
  linear patch embedding, learned positions, a pre-LN :class:`attn_core.TransformerEncoder`,
  mean pooling (or a class token) and a linear head. ``vit`` attends over every patch;
  ``vit_local`` only within a Chebyshev ``radius`` on the 2-D patch grid
  (:func:`attn_core.grid_window_edges`), as ``MultiHeadAttention(pattern="graph")`` over the
  batch's patch graphs: the truncated variant in two dimensions. ``pattern`` may also name any
  registered sequence pattern (``"performer"``, ...) over the raster-order patch sequence, with
  its ``pattern_params``.
* ``resnet`` (family ``cnn``): torchvision's ResNet-18 adapted to small images (3x3 stride-1
  stem, no max-pool), with a width option ``base_channels`` (64 = ResNet-18; narrower for CPU
  budgets).
* ``cnn`` (family ``cnn``): a small plain CNN (conv-BN-ReLU-maxpool stages, global pooling).
* ``row_rnn`` (family ``rnn``): an LSTM (or GRU) reading the image row by row (or patch by
  patch in raster order) and classifying from its last state.
* ``patch_bag`` (family ``other``): the no-context floor: each patch through an MLP on its
  own, then an average with no positions, so it cannot see where anything is.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torchvision
from torch import Tensor, nn

import attn_core
from tasks.common.patterns import PATTERN_PARAMS, model_pattern, register_variants
from tasks.common.registry import Bounds, register_model, register_preset

__all__ = [
    "patchify",
    "resolve_patch_size",
    "unpatchify",
    "grid_edges_batched",
    "rollout",
    "ViT",
    "vit_pattern",
    "SmallResNet",
    "PlainCNN",
    "RowRNN",
    "PatchBag",
    "vit",
    "resnet",
    "cnn",
    "row_rnn",
    "patch_bag",
]


# --------------------------------------------------------------------------- patches
def _check_patch(patch_size: object, height: int, width: int) -> None:
    if isinstance(patch_size, bool) or not isinstance(patch_size, int) or patch_size < 1 \
            or height % patch_size or width % patch_size:
        valid = [p for p in range(1, min(height, width) + 1) if height % p == 0 and width % p == 0]
        raise ValueError(f"patch_size={patch_size!r} must divide the image size {height}x{width}; "
                         f"valid: {', '.join(map(str, valid))}")


def resolve_patch_size(patch_size: int | None, patch_grid: int | None, height: int, width: int) -> int:
    """The patch side in pixels from exactly one of ``patch_size`` (pixels) and ``patch_grid``
    (patches per side of a square grid), checked against the image size."""
    if (patch_size is None) == (patch_grid is None):
        raise ValueError(f"set exactly one of patch_size (pixels) and patch_grid (patches per side), got "
                         f"patch_size={patch_size!r}, patch_grid={patch_grid!r}; to use patch_grid set patch_size: null")
    if patch_grid is None:
        _check_patch(patch_size, height, width)
        return int(patch_size)  # type: ignore[arg-type]
    if isinstance(patch_grid, bool) or not isinstance(patch_grid, int) or patch_grid < 1 \
            or height % patch_grid or width % patch_grid or height // patch_grid != width // patch_grid:
        valid = [g for g in range(1, min(height, width) + 1)
                 if height % g == 0 and width % g == 0 and height // g == width // g]
        raise ValueError(f"patch_grid={patch_grid!r} must divide the image size {height}x{width} into square "
                         f"patches; valid: {', '.join(map(str, valid)) or '(none: the image is not square)'}")
    return height // patch_grid


def patchify(x: Tensor, patch_size: int) -> Tensor:
    """``(B, C, H, W)`` -> ``(B, P, C*p*p)``: non-overlapping ``p x p`` patches in raster order
    (patch ``r * (W/p) + c`` covers rows ``r*p..r*p+p-1``, columns ``c*p..c*p+p-1``), each
    flattened channel-major (``c, dy, dx``)."""
    b, c, h, w = x.shape
    _check_patch(patch_size, h, w)
    p = patch_size
    x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)  # (B, gh, gw, C, p, p)
    return x.reshape(b, (h // p) * (w // p), c * p * p)


def unpatchify(patches: Tensor, patch_size: int, channels: int, height: int, width: int) -> Tensor:
    """The inverse of :func:`patchify`: ``(B, P, C*p*p)`` -> ``(B, C, H, W)``."""
    p, b = patch_size, patches.shape[0]
    _check_patch(p, height, width)
    x = patches.reshape(b, height // p, width // p, channels, p, p).permute(0, 3, 1, 4, 2, 5)  # (B, C, gh, p, gw, p)
    return x.reshape(b, channels, height, width)


def grid_edges_batched(gh: int, gw: int, radius: int, batch: int, *, cls_token: bool = False,
                       device: torch.device | None = None) -> Tensor:
    """The local-window graph of :func:`attn_core.grid_window_edges` for ``batch`` images as one
    ``edge_index`` over ``batch * n`` nodes (image ``b`` holds nodes ``b*n .. b*n + n - 1``;
    ``n = gh*gw``, plus one leading class-token node per image when ``cls_token``: it attends to
    every node of its image and every node attends to it)."""
    e, n = _image_edges(gh, gw, radius, cls_token=cls_token, device=device)
    return _batch_edges(e, n, batch)


def _image_edges(gh: int, gw: int, radius: int, *, cls_token: bool = False,
                 device: torch.device | None = None) -> tuple[Tensor, int]:
    """``(edge_index (2, E0) of one image, its node count n)`` for :func:`grid_edges_batched`."""
    e = attn_core.grid_window_edges(gh, gw, radius, device=device)  # (2, E0) over 0..P-1
    n = gh * gw
    if cls_token:
        nodes = torch.arange(n + 1, device=device)
        patches = nodes[1:]
        zeros = torch.zeros_like(patches)
        e = torch.cat([e + 1, torch.stack([nodes, torch.zeros_like(nodes)]),  # everything -> cls
                       torch.stack([zeros, patches])], dim=1)  # cls -> every patch
        n += 1
    return e, n


def _batch_edges(e: Tensor, n: int, batch: int) -> Tensor:
    """One image's ``edge_index`` ``e (2, E0)`` over ``n`` nodes repeated for ``batch`` images
    (shapes only: no host-device sync)."""
    offsets = torch.arange(batch, device=e.device) * n  # (B,)
    return (e[:, None, :] + offsets[None, :, None]).reshape(2, -1)  # (2, B*E0)


def rollout(weights: list[Tensor], pool: str = "mean") -> Tensor:
    """Attention rollout (Abnar & Zuidema 2020) from per-layer weights ``(B, H, L, L)``: average
    the heads, add the identity (the residual path) and renormalise rows, multiply through the
    layers (``R = A_L ... A_1``). Returns ``(B, P)``, how much each input patch flows into the
    pooled output, summing to 1: ``mean`` pooling averages the rows of ``R``; ``cls`` takes the
    class token's row over the patches (token 0 dropped) and renormalises it."""
    r: Tensor | None = None
    for w in weights:
        a = w.float().mean(1)  # (B, L, L)
        a = a + torch.eye(a.shape[-1], device=a.device)
        a = a / a.sum(-1, keepdim=True)
        r = a if r is None else a @ r  # (B, L, L)
    assert r is not None, "rollout needs at least one layer"
    if pool == "mean":
        return r.mean(1)  # (B, P)
    m = r[:, 0, 1:]  # (B, P)
    return m / m.sum(-1, keepdim=True)


# --------------------------------------------------------------------------- ViT
def vit_pattern(pattern: str, pattern_params: dict[str, Any] | None = None) -> tuple[str, dict[str, Any] | None]:
    """``(attn_core pattern, its parameters)`` of a ViT's ``pattern``: ``"local"`` is the
    ``"graph"`` pattern over the 2-D window's edges (no ``pattern_params``); anything else must be
    a registered sequence pattern (no causal or padding needed: every image has all its patches).
    Raises a one-line ``ValueError``."""
    if pattern == "local":
        if pattern_params:
            raise ValueError(f"pattern_params={pattern_params!r} is invalid with pattern='local' (its window is "
                             "radius); pattern_params go with a sequence pattern")
        return "graph", None
    if pattern not in attn_core.list_patterns(kind="sequence"):
        valid = ", ".join(map(repr, ("local", *attn_core.list_patterns(kind="sequence"))))
        raise ValueError(f"pattern={pattern!r} is invalid: expected 'local' or a sequence pattern; valid: {valid}")
    return pattern, model_pattern(pattern, pattern_params)


def _check_vit(params: dict[str, Any]) -> None:
    """``ModelSpec.check`` of the ViTs: :func:`vit_pattern` of the resolved params."""
    vit_pattern(params["pattern"], params.get(PATTERN_PARAMS))


class ViT(nn.Module):
    """Vision Transformer on :mod:`attn_core`.

    Args:
        channels, height, width, num_classes: from the data's ``info``.
        patch_size: side of the square patches in pixels (must divide the image).
        patch_grid: patches per side instead (the image sides must be divisible by it): the
            same config then cuts 28x28 MNIST and 32x32 CIFAR-10 into the same grid (4: 7- and
            8-pixel patches). Set ``patch_size`` to ``None`` when you use it.
        d_model, num_heads, num_layers, mlp_ratio: encoder width, heads, depth, FFN width ratio.
        dropout, attn_dropout: residual/FFN/embedding dropout and attention-probability dropout.
        pool: ``"mean"`` (average of the patch outputs) or ``"cls"`` (a learned class token).
        pattern: ``"full"`` (every patch), ``"local"`` (patches within Chebyshev ``radius``
            on the patch grid, the class token excepted: it sees and is seen by all), or any
            registered sequence pattern over the raster-order patches (:func:`vit_pattern`).
        radius: the local window's radius in patches (``pattern="local"`` only).
        pattern_params: the sequence pattern's own parameters (not with ``"local"``).
    """

    def __init__(self, channels: int, height: int, width: int, num_classes: int, *, patch_size: int | None = 4,
                 patch_grid: int | None = None, d_model: int = 64, num_heads: int = 4, num_layers: int = 4,
                 mlp_ratio: float = 2.0, dropout: float = 0.1, attn_dropout: float = 0.0, pool: str = "mean",
                 pattern: str = "full", radius: int = 1, pattern_params: dict[str, Any] | None = None) -> None:
        super().__init__()
        patch_size = resolve_patch_size(patch_size, patch_grid, height, width)
        if pool not in ("mean", "cls"):
            raise ValueError(f"pool={pool!r}; valid: 'mean', 'cls'")
        core, params = vit_pattern(pattern, pattern_params)  # "local" runs as attn_core's "graph"
        self.patch_size, self.pool, self.pattern, self.radius = patch_size, pool, pattern, radius
        self.grid = (height // patch_size, width // patch_size)
        n = self.grid[0] * self.grid[1] + (pool == "cls")
        self.embed = nn.Linear(channels * patch_size**2, d_model)  # the patch embedding (a p x p stride-p conv)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model)) if pool == "cls" else None
        self.pos = attn_core.LearnedPositionalEmbedding(d_model, n, dropout=dropout)
        self.encoder = attn_core.TransformerEncoder(
            d_model, num_heads, num_layers, dim_feedforward=int(mlp_ratio * d_model), dropout=dropout,
            attn_dropout=attn_dropout, norm_first=True, pattern=core, pattern_params=params, max_len=n,
        )
        self.head = nn.Linear(d_model, num_classes)
        self._edges: dict[tuple[int, str], Tensor] = {}
        # one image's window graph, built here on the host (it validates radius) and moved with
        # the module: a step only adds per-image offsets, with no host-device sync
        self.register_buffer("_image_edges", _image_edges(*self.grid, radius, cls_token=pool == "cls")[0]
                             if pattern == "local" else None, persistent=False)

    def _edge_index(self, batch: int, device: torch.device) -> Tensor:
        key = (batch, str(device))
        if key not in self._edges:  # the buffer is on the module's device already
            n = self.grid[0] * self.grid[1] + (self.cls is not None)
            self._edges = {key: _batch_edges(self._image_edges, n, batch)}
        return self._edges[key]

    def tokens(self, x: Tensor) -> Tensor:
        """``(B, C, H, W)`` -> embedded tokens with positions ``(B, n, D)`` (class token first)."""
        t = self.embed(patchify(x, self.patch_size))  # (B, P, D)
        if self.cls is not None:
            t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1)  # (B, 1+P, D)
        return self.pos(t)

    def encode(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Encoder outputs ``(B, n, D)``; with ``need_weights`` also each layer's attention as a
        dense ``(B, H, n, n)`` (zeros outside the local window)."""
        t = self.tokens(x)
        b, n, d = t.shape
        if self.pattern != "local":
            return self.encoder(t, need_weights=need_weights)
        ei = self._edge_index(b, t.device)
        res = self.encoder(t.reshape(b * n, d), edge_index=ei, need_weights=need_weights)  # nodes (B*n, D)
        if not need_weights:
            return res.reshape(b, n, d)
        h, edge_w = res
        dense = []
        for w in edge_w:  # (E, H) per layer -> (B, H, n, n)
            a = w.new_zeros(b * n, n, w.shape[1])
            a[ei[1], ei[0] % n] = w
            dense.append(a.reshape(b, n, n, -1).permute(0, 3, 1, 2))
        return h.reshape(b, n, d), dense

    def forward(self, x: Tensor) -> Tensor:
        h = self.encode(x)  # (B, n, D)
        pooled = h[:, 0] if self.cls is not None else h.mean(1)  # (B, D)
        return self.head(pooled)  # (B, classes)

    @property
    def forms_attention_weights(self) -> bool:
        """Whether the attention forms its weights (:meth:`attention_rollout` needs them): not the
        kernel and low-rank patterns (``linear``, ``performer``, ``linformer``, ``nystrom``)."""
        return self.pattern == "local" or attn_core.get_pattern(self.pattern).weights

    @torch.no_grad()
    def attention_rollout(self, x: Tensor) -> Tensor:
        """Rollout maps ``(B, gh, gw)`` over the patch grid, each summing to 1 (:func:`rollout`);
        only when :attr:`forms_attention_weights`."""
        _, weights = self.encode(x, need_weights=True)
        return rollout(weights, self.pool).reshape(x.shape[0], *self.grid)


# --------------------------------------------------------------------------- CNNs
_MEMORY_FORMATS = ("auto", "channels_last", "contiguous")


class SmallResNet(torchvision.models.ResNet):
    """torchvision's ResNet (BasicBlock; ``layers=(2, 2, 2, 2)`` is ResNet-18) for small images:
    a 3x3 stride-1 stem and no max-pool (CIFAR-style), input channels from the data, and stage
    widths ``base_channels * (1, 2, 4, 8)`` (64 = torchvision's). Reuses torchvision's ``_make_layer``
    and forward; only the fixed-width constructor is replaced.

    ``memory_format`` picks the layout of weights and activations, decided at each forward from
    the input's device: ``"auto"`` runs channels_last (NHWC, the layout tensor cores want) on CUDA
    and NCHW everywhere else; ``"contiguous"`` is NCHW everywhere; ``"channels_last"`` forces NHWC
    and is refused on a non-CUDA input. On CPU, oneDNN's channels_last backward of stride-2 1x1
    convolutions (the ResNet's downsample) is broken on AVX2-only CPUs (torch 2.14.1; seen with 2
    to 7 in-channels, nondeterministically): wrong weight gradients, or heap corruption that aborts
    the process. A self-test cannot guard it (a crash kills the process, and a run that passes
    proves nothing about the next), so CPU always runs NCHW."""

    def __init__(self, channels: int, height: int, width: int, num_classes: int, *, base_channels: int = 64,
                 layers: tuple[int, ...] | list[int] = (2, 2, 2, 2), zero_init_residual: bool = True,
                 memory_format: str = "auto") -> None:
        nn.Module.__init__(self)
        if memory_format not in _MEMORY_FORMATS:
            raise ValueError(f"memory_format={memory_format!r}; valid: {', '.join(map(repr, _MEMORY_FORMATS))}")
        self.memory_format = memory_format
        self._channels_last = False  # the layout the weights are in now
        if len(layers) != 4 or any(not isinstance(n, int) or n < 1 for n in layers):
            raise ValueError(f"layers={layers!r}: expected 4 positive ints (ResNet-18: [2, 2, 2, 2])")
        if not isinstance(base_channels, int) or base_channels < 1:
            raise ValueError(f"base_channels={base_channels!r}: expected a positive int (64 = ResNet-18)")
        block = torchvision.models.resnet.BasicBlock
        self._norm_layer = nn.BatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = base_channels, 1, 1, 64
        self.conv1 = nn.Conv2d(channels, base_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(base_channels)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity()
        self.layer1 = self._make_layer(block, base_channels, layers[0])
        self.layer2 = self._make_layer(block, base_channels * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, base_channels * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, base_channels * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(base_channels * 8, num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, torchvision.models.resnet.BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def layout_for(self, device: torch.device) -> torch.memory_format:
        """The memory format this network runs in on ``device`` (see the class docstring)."""
        if device.type == "cuda":
            return torch.contiguous_format if self.memory_format == "contiguous" else torch.channels_last
        if self.memory_format == "channels_last":
            raise ValueError(f"memory_format='channels_last' is only verified on CUDA, got a {device.type} input "
                             "(oneDNN's channels_last conv backward gives wrong gradients on AVX2 CPUs); "
                             "valid here: 'auto', 'contiguous'")
        return torch.contiguous_format

    def forward(self, x: Tensor) -> Tensor:
        layout = self.layout_for(x.device)
        channels_last = layout == torch.channels_last
        if channels_last != self._channels_last:  # first call on this device: move the weights once,
            with torch.inference_mode(False), torch.no_grad():  # outside inference mode (they stay trainable)
                self.to(memory_format=layout)
            self._channels_last = channels_last
        return super().forward(x.contiguous(memory_format=layout))  # (B, classes)


class PlainCNN(nn.Module):
    """Stages of (3x3 conv, BatchNorm, ReLU) x ``convs`` then 2x2 max-pool, global average
    pooling, dropout and a linear head."""

    def __init__(self, channels: int, height: int, width: int, num_classes: int, *,
                 widths: tuple[int, ...] | list[int] = (32, 64, 128), convs: int = 1, dropout: float = 0.1) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c = channels
        for w in widths:
            for _ in range(convs):
                layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
                c = w
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(c, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x).mean((2, 3)))  # (B, C') -> (B, classes)


# --------------------------------------------------------------------------- RNN
class RowRNN(nn.Module):
    """An LSTM/GRU reading the image as a sequence: rows (``patch_size=None``: ``H`` steps of
    ``C*W`` features) or patches in raster order (``P`` steps of ``C*p*p``), classifying from
    the last layer's final state (both directions' when ``bidirectional``)."""

    def __init__(self, channels: int, height: int, width: int, num_classes: int, *, cell: str = "lstm",
                 hidden: int = 128, num_layers: int = 1, bidirectional: bool = False, patch_size: int | None = None,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell={cell!r}; valid: 'lstm', 'gru'")
        if patch_size is not None:
            _check_patch(patch_size, height, width)
        self.patch_size = patch_size
        feat = channels * width if patch_size is None else channels * patch_size**2
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(feat, hidden, num_layers, batch_first=True, bidirectional=bidirectional,
                       dropout=dropout if num_layers > 1 else 0.0)
        self.dirs = 2 if bidirectional else 1
        self.head = nn.Linear(hidden * self.dirs, num_classes)

    def sequence(self, x: Tensor) -> Tensor:
        """``(B, C, H, W)`` -> ``(B, T, F)``: rows or raster-order patches."""
        if self.patch_size is None:
            b, c, h, w = x.shape
            return x.permute(0, 2, 1, 3).reshape(b, h, c * w)  # (B, H, C*W)
        return patchify(x, self.patch_size)  # (B, P, C*p*p)

    def forward(self, x: Tensor) -> Tensor:
        _, state = self.rnn(self.sequence(x))
        h = state[0] if isinstance(state, tuple) else state  # (layers*dirs, B, hidden)
        last = h[-self.dirs:].transpose(0, 1).flatten(1)  # (B, dirs*hidden)
        return self.head(last)


# --------------------------------------------------------------------------- floor
class PatchBag(nn.Module):
    """The no-context floor: every patch through the same MLP on its own, then the mean over
    patches (no positions, no interaction) and a linear head. It sees which patches occur,
    never where or next to what."""

    def __init__(self, channels: int, height: int, width: int, num_classes: int, *, patch_size: int = 4,
                 hidden: int = 128, dropout: float = 0.1) -> None:
        super().__init__()
        _check_patch(patch_size, height, width)
        self.patch_size = patch_size
        self.mlp = nn.Sequential(nn.Linear(channels * patch_size**2, hidden), nn.GELU(), nn.Linear(hidden, hidden),
                                 nn.GELU())
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.mlp(patchify(x, self.patch_size)).mean(1))  # (B, P, hid) -> (B, classes)


# --------------------------------------------------------------------------- registry
def _image(data_info: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """``(channels, height, width, num_classes)``: what every classifier is built on."""
    return int(data_info["channels"]), int(data_info["height"]), int(data_info["width"]), int(data_info["num_classes"])


# ``pattern`` also takes "local" (not a registered pattern: _check_vit checks it, see vit_pattern)
@register_model(family="attention", pattern="full", check=_check_vit, omit_when_default=(PATTERN_PARAMS,),
                renamed={"attention": "pattern"}, bounds={"pattern": Bounds(kind="str")})
def vit(
    data_info: Mapping[str, Any], *, patch_size: int | None = 4, patch_grid: int | None = None, d_model: int = 64,
    num_heads: int = 4, num_layers: int = 4, mlp_ratio: float = 2.0, dropout: float = 0.1, attn_dropout: float = 0.0,
    pool: str = "mean", radius: int = 1, pattern_params: dict[str, Any] | None = None, pattern: str = "full",
) -> ViT:
    """ViT: patch embedding, learned positions, pre-LN encoder, full attention over patches, mean pool"""
    return ViT(*_image(data_info), patch_size=patch_size, patch_grid=patch_grid, d_model=d_model, num_heads=num_heads,
               num_layers=num_layers, mlp_ratio=mlp_ratio, dropout=dropout, attn_dropout=attn_dropout, pool=pool,
               radius=radius, pattern_params=pattern_params, pattern=pattern)


# The record's pattern says what the model attends to: a 2-D window on the patch grid. It runs as
# the graph pattern over attn_core.grid_window_edges, but "graph" would read as a graph domain's mask.
register_preset("vit_local", vit, {"pattern": "local"}, pattern="grid_window",
                description="the same ViT attending only within a 3x3 patch window on the 2-D grid "
                            "(grid_window: graph attention over the grid's window edges)")


@register_model(family="cnn")
def resnet(data_info: Mapping[str, Any], *, base_channels: int = 64,
           layers: list[int] = [2, 2, 2, 2]) -> SmallResNet:  # noqa: B006 (copied, never mutated)
    """torchvision ResNet-18, 3x3 stem, no max-pool; base_channels 64 = the original width"""
    return SmallResNet(*_image(data_info), base_channels=base_channels, layers=layers)


@register_model(family="cnn", renamed={"convs": "num_layers"})
def cnn(data_info: Mapping[str, Any], *, widths: list[int] = [32, 64, 128], num_layers: int = 1,  # noqa: B006
        dropout: float = 0.1) -> PlainCNN:
    """small plain CNN: (conv-BN-ReLU) x num_layers then maxpool, per stage x 3, global average pool"""
    return PlainCNN(*_image(data_info), widths=widths, convs=num_layers, dropout=dropout)


@register_model(family="rnn", renamed={"hidden": "hidden_size"})
def row_rnn(data_info: Mapping[str, Any], *, cell: str = "lstm", hidden_size: int = 128, num_layers: int = 1,
            bidirectional: bool = False, patch_size: int | None = None, dropout: float = 0.0) -> RowRNN:
    """LSTM reading the image row by row, classifying from its last state"""
    return RowRNN(*_image(data_info), cell=cell, hidden=hidden_size, num_layers=num_layers, bidirectional=bidirectional,
                  patch_size=patch_size, dropout=dropout)


@register_model(family="other", renamed={"hidden": "d_model"})
def patch_bag(data_info: Mapping[str, Any], *, patch_size: int = 4, d_model: int = 128,
              dropout: float = 0.1) -> PatchBag:
    """no-context floor: per-patch MLP, mean over patches without positions"""
    return PatchBag(*_image(data_info), patch_size=patch_size, hidden=d_model, dropout=dropout)


#: ``vit_<pattern>`` presets of the efficient patterns over the raster-order patches (not in
#: ``models: all``); local_global: one grid row either side (4x4 grid: 4) and the first patch global.
register_variants(vit, allowed=lambda p: True, own={"local_global": {"window": 4, "global_tokens": 1}},
                  description="the ViT with {pattern} attention over the raster-order patches")
