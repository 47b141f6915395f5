"""Modern-recurrence image classifier (issue 31): the image read as a sequence by a recurrence
from :mod:`attn_core.recurrent` (``cell``: mingru, minlstm, s4d, mamba2, lru; the cell table is
:mod:`tasks.common.recurrence`'s). Family ``rnn``, kind ``modern``.

``mode``:

* ``rows``: each image row one step (``H`` steps of ``C*W`` features), as ``row_rnn`` reads it;
* ``patches``: the ViT's patch embedding (``patch_size`` or ``patch_grid``), raster order;
* ``pixel``: one pixel per step (``H*W`` steps of ``C`` features: 784 for 28x28), raster order as
  in sequential MNIST (sMNIST); ``permute: true`` reads the pixels in a fixed random order drawn
  from ``perm_seed`` (permuted sMNIST, psMNIST), the same for every image and every run.

``bidirectional`` (null: the mode's default, causal for ``pixel`` as in the sMNIST papers,
bidirectional for ``rows`` and ``patches``): a causal stack classifies from the last step's output
(its state after the whole image), a bidirectional one from the mean over steps.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor, nn

from attn_core.recurrent import RecurrentEncoder
from tasks.common.recurrence import check_cell, recurrence_params, register_cell_presets
from tasks.common.registry import register_model
from tasks.vision.models import patchify, resolve_patch_size

__all__ = ["MODES", "ModernRNN", "pixel_permutation", "check_modern", "modern_rnn"]

#: ``mode`` -> whether it reads both ways by default
MODES: dict[str, bool] = {"rows": True, "patches": True, "pixel": False}


def pixel_permutation(n: int, seed: int) -> Tensor:
    """The fixed pixel order of psMNIST: a permutation of ``0..n-1`` drawn from ``seed`` alone
    (its own generator: the global RNG and the model's initialisation are untouched)."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))  # (n,)


def _check_mode(mode: object, bidirectional: object) -> None:
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; valid: {', '.join(MODES)}")
    if bidirectional is not None and not isinstance(bidirectional, bool):
        raise ValueError(f"bidirectional={bidirectional!r}; valid: true, false, null (the mode's default: "
                         f"causal for pixel, bidirectional for rows and patches)")


def check_modern(params: Mapping[str, Any]) -> None:
    """The registration's config check: an unknown ``cell`` or ``mode`` is refused before any cell runs."""
    check_cell(params)
    _check_mode(params["mode"], params.get("bidirectional"))


class ModernRNN(nn.Module):
    """``net(x (B, C, H, W)) -> (B, num_classes)``: the image as a sequence (``mode``) -> ``Linear``
    to ``d_model`` -> ``num_layers`` blocks of recurrence ``cell`` (causal or bidirectional) ->
    last step (causal) or mean (bidirectional) -> dropout -> ``Linear`` to the classes."""

    def __init__(self, channels: int, height: int, width: int, num_classes: int, *, mode: str = "rows",
                 cell: str = "mingru", d_model: int = 64, d_state: int | None = None, num_layers: int = 2,
                 dropout: float = 0.1, bidirectional: bool | None = None, patch_size: int | None = 4,
                 patch_grid: int | None = None, permute: bool = False, perm_seed: int = 0,
                 backend: str = "pure") -> None:
        super().__init__()
        _check_mode(mode, bidirectional)
        name, params = recurrence_params(cell, d_state, backend)
        self.mode = mode
        self.bidirectional = MODES[mode] if bidirectional is None else bidirectional
        self.patch_size = resolve_patch_size(patch_size, patch_grid, height, width) if mode == "patches" else None
        feat = {"rows": channels * width, "pixel": channels,
                "patches": channels * (self.patch_size or 1) ** 2}[mode]
        # psMNIST's order, moved with the module (no host-device copy in a step)
        self.register_buffer("perm", pixel_permutation(height * width, perm_seed)
                             if mode == "pixel" and permute else None)
        self.embed = nn.Linear(feat, d_model)  # per step; in patches mode the ViT's patch embedding
        self.encoder = RecurrentEncoder(name, d_model, num_layers, bidirectional=self.bidirectional,
                                        dropout=dropout, params=params)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)

    def sequence(self, x: Tensor) -> Tensor:
        """``(B, C, H, W)`` -> ``(B, T, F)``: rows, raster-order patches or (permuted) pixels."""
        b, c, h, w = x.shape
        if self.mode == "rows":
            return x.permute(0, 2, 1, 3).reshape(b, h, c * w)  # (B, H, C*W)
        if self.mode == "patches":
            return patchify(x, self.patch_size)  # (B, P, C*p*p)
        seq = x.reshape(b, c, h * w).transpose(1, 2)  # (B, H*W, C), raster order
        return seq if self.perm is None else seq.index_select(1, self.perm)  # (B, H*W, C), psMNIST order

    def forward(self, x: Tensor) -> Tensor:
        h = self.encoder(self.embed(self.sequence(x)))  # (B, T, d_model)
        pooled = h.mean(1) if self.bidirectional else h[:, -1]  # (B, d_model)
        return self.head(self.drop(pooled))  # (B, classes)


@register_model(family="rnn", kind="modern", in_all=False, check=check_modern,
                omit_when_default=("backend",))  # cell ids from before `backend` stay valid
def modern_rnn(data_info: Mapping[str, Any], *, mode: str = "rows", cell: str = "mingru", d_model: int = 64,
               d_state: int | None = None, num_layers: int = 2, dropout: float = 0.1,
               bidirectional: bool | None = None, patch_size: int | None = 4, patch_grid: int | None = None,
               permute: bool = False, perm_seed: int = 0, backend: str = "pure") -> ModernRNN:
    """modern recurrence over rows, patches or pixels (cell: mingru, minlstm, s4d, mamba2, lru)"""
    return ModernRNN(int(data_info["channels"]), int(data_info["height"]), int(data_info["width"]),
                     int(data_info["num_classes"]), mode=mode, cell=cell, d_model=d_model, d_state=d_state,
                     num_layers=num_layers, dropout=dropout, bidirectional=bidirectional, patch_size=patch_size,
                     patch_grid=patch_grid, permute=permute, perm_seed=perm_seed, backend=backend)


register_cell_presets(modern_rnn, "modern recurrence over rows, patches or pixels")
