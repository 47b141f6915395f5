"""Speech networks, registered by name with their family.

Every network is an :class:`SpeechNet`: an encoder mapping feature frames ``x (B, L, F)`` with
``mask (B, L)`` (True = real frame) to ``h (B, L, d_model)`` (the same shape for every family),
then a head chosen by the data's ``info["form"]``: ``classify`` -> masked mean pooling and a
linear layer (``(B, C)`` logits), ``tag`` -> a linear layer per frame (``(B, L, C)``).

Encoders (variants are presets of one class):

* ``transformer`` (family ``attention``, pattern ``full``): :class:`TransformerEncoderNet`, a
  linear input projection, sinusoidal positions and an :class:`attn_core.TransformerEncoder`
  (pre-LN). ``transformer_w8/_w16/_w32/_w64`` (pattern ``truncated``): the same with truncated
  attention, each frame attending to frames within ``window`` of it (O(L * w)). ``pattern`` may be
  any registered sequence pattern that takes key padding, with its ``pattern_params``.
* ``lstm`` (family ``rnn``): :class:`RecurrentEncoder`, a bidirectional LSTM over the packed
  (unpadded) frames, ``d_model / 2`` units per direction; ``stack`` > 1 reads ``stack`` frames
  per recurrent step.
* ``cnn`` (family ``cnn``): :class:`ConvEncoder`, TC-ResNet-like (Choi et al. 2019): 1-D
  temporal convolutions over the features as channels, residual blocks of two kernel-9 convs with
  BatchNorm; stride 1 with growing dilation (instead of TC-ResNet's stride 2) so that every frame
  keeps its own output for tagging.
* ``frame_mlp`` (family ``other``): :class:`FrameMLP`, the no-context floor: a per-frame MLP
  (each frame alone, no order), pooled like the others.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import attn_core
from tasks.common.patterns import PATTERN_PARAMS, PatternCheck, model_pattern, register_variants, takes_window
from tasks.common.registry import register_model, register_preset
from tasks.common.rnn import run_padded

__all__ = ["SpeechNet", "TransformerEncoderNet", "RecurrentEncoder", "ConvEncoder", "FrameMLP", "build_model",
           "transformer", "lstm", "cnn", "frame_mlp"]


def _zero_pad(h: Tensor, mask: Tensor) -> Tensor:
    """Zero the padded frames of ``h (B, L, D)`` (``mask (B, L)`` True = real)."""
    return h * mask.unsqueeze(-1).to(h.dtype)


# --------------------------------------------------------------------------- encoders
POSITIONS = ("sinusoidal", "conv", "both")


class TransformerEncoderNet(nn.Module):
    """``Linear(F, d) -> + positions -> dropout -> attn_core.TransformerEncoder``.

    ``positions``: ``"sinusoidal"`` (absolute, added), ``"conv"`` (a convolutional position
    encoding: ``h + depthwise_conv(h)`` with ``pos_kernel`` frames, which tells each frame
    about its neighbours in order and is the same at every position, i.e. relative), or ``"both"``.

    ``pattern="full"`` (``window=None``), ``"truncated"`` with ``window`` frames either side, or
    any registered sequence pattern that takes key padding with its ``pattern_params`` (``window``
    is ignored by a pattern without one). ``pattern_max_len``: the longest utterance in frames,
    for patterns sized by it (``"linformer"``; default ``max_len``). The ``mask`` is always passed
    as the key padding mask (even all real: checking would be a host-device sync every step)."""

    def __init__(self, num_features: int, *, d_model: int = 96, num_heads: int = 4, num_layers: int = 3,
                 dim_feedforward: int | None = None, dropout: float = 0.1, attn_dropout: float = 0.0,
                 pattern: str = "full", window: int | None = None, positions: str = "conv", pos_kernel: int = 15,
                 max_len: int = 10000, pattern_params: dict[str, Any] | None = None,
                 pattern_max_len: int | None = None) -> None:
        super().__init__()
        window = window if window is not None and takes_window(pattern) else None
        params = model_pattern(pattern, pattern_params, window=window, padding=True)
        if positions not in POSITIONS:
            raise ValueError(f"positions={positions!r}; valid: {', '.join(POSITIONS)}")
        if pos_kernel % 2 == 0:
            raise ValueError(f"pos_kernel={pos_kernel} must be odd (same-length output)")
        self.inp = nn.Linear(num_features, d_model)
        self.pos = (attn_core.SinusoidalPositionalEncoding(d_model, max_len=max_len)
                    if positions in ("sinusoidal", "both") else None)
        self.pos_conv = (nn.Conv1d(d_model, d_model, pos_kernel, padding=pos_kernel // 2, groups=d_model)
                         if positions in ("conv", "both") else None)
        self.drop = nn.Dropout(dropout)
        self.encoder = attn_core.TransformerEncoder(
            d_model, num_heads, num_layers, dim_feedforward=dim_feedforward or 2 * d_model, dropout=dropout,
            attn_dropout=attn_dropout, pattern=pattern, pattern_params=params, max_len=pattern_max_len or max_len,
        )
        self.d_model = d_model

    def forward(self, x: Tensor, mask: Tensor, *, need_weights: bool = False) -> Any:
        h = _zero_pad(self.inp(x), mask)  # (B, L, d)
        if self.pos_conv is not None:
            h = h + self.pos_conv(h.transpose(1, 2)).transpose(1, 2)
        if self.pos is not None:
            h = self.pos(h)
        h = self.drop(h)
        # always the mask: asking whether it is all real would read it on the host (a sync)
        out = self.encoder(h, key_padding_mask=mask, need_weights=need_weights)
        if need_weights:
            return _zero_pad(out[0], mask), out[1]
        return _zero_pad(out, mask)  # (B, L, d)


class RecurrentEncoder(nn.Module):
    """Input projection, then a ``num_layers`` bidirectional LSTM (``d_model / 2`` per direction)
    over the packed frames, so padding never enters the recurrence.

    ``stack > 1`` reads the input at a lower frame rate, like low-frame-rate recurrent acoustic
    models: every ``stack`` consecutive frames are concatenated into one step (the last step of an
    utterance is zero-filled), the LSTM runs over ``ceil(L / stack)`` steps, and each step's output
    is repeated for its frames, so the output keeps the shape ``(B, L, d_model)``. The recurrence
    is sequential in time, so this is what buys the LSTM more epochs in the same wall time."""

    def __init__(self, num_features: int, *, d_model: int = 96, num_layers: int = 2, dropout: float = 0.1,
                 stack: int = 1) -> None:
        super().__init__()
        if d_model % 2:
            raise ValueError(f"d_model={d_model} must be even (two directions of d_model / 2)")
        if int(stack) < 1:
            raise ValueError(f"stack={stack} must be >= 1 (frames per recurrent step)")
        self.stack = int(stack)
        self.inp = nn.Linear(num_features * self.stack, d_model)
        self.rnn = nn.LSTM(d_model, d_model // 2, num_layers=num_layers, batch_first=True, bidirectional=True,
                           dropout=dropout if num_layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.d_model = d_model

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        B, L, F_ = x.shape
        k = self.stack
        lengths = mask.sum(1)  # (B,)
        if k > 1:
            S = -(-L // k)  # steps after stacking
            x = F.pad(_zero_pad(x, mask), (0, 0, 0, S * k - L)).reshape(B, S, k * F_)  # (B, S, k*F)
            lengths = torch.div(lengths + k - 1, k, rounding_mode="floor")
        h = self.drop(self.inp(x))  # (B, S, d)
        steps = torch.arange(h.shape[1], device=h.device)[None] < lengths[:, None]  # (B, S) real steps
        out, _ = run_padded(self.rnn, h, steps)  # (B, S, d), as packed (no host-device sync)
        if k > 1:
            out = out.repeat_interleave(k, dim=1)[:, :L]  # (B, L, d)
        return _zero_pad(self.drop(out), mask)  # (B, L, d)


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """``nn.BatchNorm1d`` over ``(B, C, L)`` whose training statistics count the real frames only
    (``m (B, 1, L)``): padding would pull the mean towards 0 and shrink the variance, more so the
    longer a batch is padded. Running statistics (momentum, unbiased variance) and evaluation are
    ``BatchNorm1d``'s, with its parameters and state-dict keys; no host synchronisation."""

    def forward(self, x: Tensor, m: Tensor | None = None) -> Tensor:  # type: ignore[override]
        if m is None or not self.training:
            return super().forward(x)
        n = m.sum()  # real frames in the batch (a device scalar)
        mean = (x * m).sum((0, 2)) / n  # (C,)
        var = ((x - mean[:, None]).square() * m).sum((0, 2)) / n  # (C,) biased, as used to normalise
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked += 1
                w = self.momentum if self.momentum is not None else 1.0 / self.num_batches_tracked  # None: mean
                self.running_mean.lerp_(mean, w)
                self.running_var.lerp_(var * n / (n - 1).clamp(min=1), w)
        y = (x - mean[:, None]) * torch.rsqrt(var + self.eps)[:, None]  # (B, C, L)
        return y * self.weight[:, None] + self.bias[:, None] if self.affine else y


class _ResBlock(nn.Module):
    """``relu(x + BN(conv(relu(BN(conv(x))))))``, convolutions of ``kernel`` frames, ``dilation``."""

    def __init__(self, channels: int, kernel: int, dilation: int, dropout: float) -> None:
        super().__init__()
        pad = dilation * (kernel - 1) // 2
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=pad, dilation=dilation, bias=False)
        self.bn1 = MaskedBatchNorm1d(channels)
        self.conv2 = nn.Conv1d(channels, channels, kernel, padding=pad, dilation=dilation, bias=False)
        self.bn2 = MaskedBatchNorm1d(channels)
        self.drop = nn.Dropout(dropout)

    def forward(self, h: Tensor, m: Tensor) -> Tensor:
        # h (B, d, L), m (B, 1, L): padding is zeroed before every convolution
        y = self.drop(F.relu(self.bn1(self.conv1(h * m), m)))
        y = self.bn2(self.conv2(y * m), m)
        return F.relu(h + y)


class ConvEncoder(nn.Module):
    """TC-ResNet-like temporal CNN: a kernel-3 input conv from the features to ``d_model``
    channels, then ``num_blocks`` residual blocks with dilations ``dilations[i % len]``."""

    def __init__(self, num_features: int, *, d_model: int = 96, num_blocks: int = 4, kernel: int = 9,
                 dilations: tuple[int, ...] | list[int] = (1, 2, 4, 8), dropout: float = 0.1) -> None:
        super().__init__()
        if kernel % 2 == 0:
            raise ValueError(f"kernel={kernel} must be odd (same-length output)")
        self.inp = nn.Conv1d(num_features, d_model, 3, padding=1, bias=False)
        self.bn = MaskedBatchNorm1d(d_model)
        self.blocks = nn.ModuleList(_ResBlock(d_model, kernel, dilations[i % len(dilations)], dropout)
                                    for i in range(num_blocks))
        self.d_model = d_model

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        m = mask.unsqueeze(1).to(x.dtype)  # (B, 1, L)
        h = F.relu(self.bn(self.inp(x.transpose(1, 2) * m), m))  # (B, d, L)
        for block in self.blocks:
            h = block(h, m)
        return _zero_pad(h.transpose(1, 2), mask)  # (B, L, d)


class FrameMLP(nn.Module):
    """The no-context floor: the same two-layer MLP on every frame alone."""

    def __init__(self, num_features: int, *, d_model: int = 96, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(num_features, d_model), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(d_model, d_model), nn.ReLU(), nn.Dropout(dropout))
        self.d_model = d_model

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return _zero_pad(self.net(x), mask)  # (B, L, d)


# --------------------------------------------------------------------------- the network
class SpeechNet(nn.Module):
    """``encoder`` + head: ``forward(x (B, L, F), mask (B, L))`` -> logits ``(B, C)`` (``form``
    ``classify``: masked mean over frames) or ``(B, L, C)`` (``tag``)."""

    def __init__(self, encoder: nn.Module, num_classes: int, form: str) -> None:
        super().__init__()
        if form not in ("classify", "tag"):
            raise ValueError(f"form={form!r}; valid: classify, tag")
        self.encoder, self.form = encoder, form
        self.head = nn.Linear(encoder.d_model, num_classes)

    def encode(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``(B, L, F)`` -> ``(B, L, d_model)``, zero on padding."""
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        return self.encoder(x, mask)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        h = self.encode(x, mask)  # (B, L, d)
        if self.form == "tag":
            return self.head(h)  # (B, L, C)
        pooled = h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1).to(h.dtype)  # (B, d)
        return self.head(pooled)  # (B, C)


# --------------------------------------------------------------------------- registry
ENCODERS: dict[str, type] = {"transformer": TransformerEncoderNet, "lstm": RecurrentEncoder, "cnn": ConvEncoder,
                             "mlp": FrameMLP}


def build_model(kind: str, data_info: Mapping[str, Any], **params: Any) -> SpeechNet:
    """What every speech builder returns: encoder ``kind`` on ``data_info["num_features"]`` with a
    head for ``data_info["form"]`` and ``data_info["num_classes"]``."""
    cls = ENCODERS[kind]
    # the longest input, padded: length buckets round the longest up (tasks/common/buckets.py)
    longest = max(int(data_info.get("max_frames") or 0), int(data_info.get("padded_length") or 0))
    if cls is TransformerEncoderNet and params.get("positions", "conv") != "conv":
        params.setdefault("max_len", max(10000, longest + 1))
    if cls is TransformerEncoderNet and longest:
        params.setdefault("pattern_max_len", longest)
    enc = cls(int(data_info["num_features"]), **params)
    return SpeechNet(enc, int(data_info["num_classes"]), str(data_info.get("form", "classify")))


@register_model(family="attention", pattern="full", check=PatternCheck(padding=True, window_if_taken=True),
                omit_when_default=(PATTERN_PARAMS,))
def transformer(
    data_info: Mapping[str, Any], *, d_model: int = 96, num_heads: int = 4, num_layers: int = 3,
    dim_feedforward: int = 192, dropout: float = 0.1, attn_dropout: float = 0.0, positions: str = "conv",
    pos_kernel: int = 15, pattern_params: dict[str, Any] | None = None, pattern: str = "full",
    window: int | None = None,
) -> SpeechNet:
    """Transformer encoder, full self-attention over all frames"""
    return build_model("transformer", data_info, d_model=d_model, num_heads=num_heads, num_layers=num_layers,
                       dim_feedforward=dim_feedforward, dropout=dropout, attn_dropout=attn_dropout, positions=positions,
                       pos_kernel=pos_kernel, pattern_params=pattern_params, pattern=pattern, window=window)


for _w in (8, 16, 32, 64):
    register_preset(f"transformer_w{_w}", transformer, {"pattern": "truncated", "window": _w},
                    description=f"Transformer encoder, truncated self-attention (+-{_w} frames)")


@register_model(family="rnn")
def lstm(data_info: Mapping[str, Any], *, d_model: int = 96, num_layers: int = 2, dropout: float = 0.1,
         stack: int = 1) -> SpeechNet:
    """bidirectional LSTM, 2 layers"""
    return build_model("lstm", data_info, d_model=d_model, num_layers=num_layers, dropout=dropout, stack=stack)


@register_model(family="cnn", renamed={"num_blocks": "num_layers", "kernel": "kernel_size"})
def cnn(data_info: Mapping[str, Any], *, d_model: int = 96, num_layers: int = 4, kernel_size: int = 9,
        dilations: list[int] = [1, 2, 4, 8], dropout: float = 0.1) -> SpeechNet:  # noqa: B006 (copied, never mutated)
    """TC-ResNet-like temporal CNN (residual kernel-9 convs, dilations 1-8)"""
    return build_model("cnn", data_info, d_model=d_model, num_blocks=num_layers, kernel=kernel_size, dilations=dilations,
                       dropout=dropout)


@register_model(family="other")
def frame_mlp(data_info: Mapping[str, Any], *, d_model: int = 96, dropout: float = 0.1) -> SpeechNet:
    """per-frame MLP, no context (floor)"""
    return build_model("mlp", data_info, d_model=d_model, dropout=dropout)


#: ``transformer_<pattern>`` presets of the efficient patterns (not in ``models: all``); local_global
#: gets transformer_w16's window and the first frame as its global token.
register_variants(transformer, allowed=lambda p: attn_core.get_pattern(p).padding,
                  own={"local_global": {"window": 16, "global_tokens": 1}},
                  description="Transformer encoder with {pattern} self-attention")
