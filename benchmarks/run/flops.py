"""FLOPs per sample, recurrent layers included.

torch's :class:`~torch.utils.flop_counter.FlopCounterMode` counts matrix products (mm, addmm,
bmm, convolutions, attention), 2 FLOPs per multiply-add, and nothing else. A recurrent layer is
counted only when it happens to run as such products: on CPU a GRU, an RNN and a packed LSTM do,
but an unpacked LSTM runs as one fused oneDNN op (``aten.mkldnn_rnn_layer``) and every recurrent
layer on a GPU as one cuDNN/MIOpen op (``aten._cudnn_rnn``, ``aten.miopen_rnn``), which count 0.
:func:`register_recurrent_flops` gives those fused ops the same rule the unfused path follows:

    FLOPs = 2 * tokens * sum over the layer's weight matrices (input-hidden, hidden-hidden,
            and LSTM projection) of rows * columns

per layer and direction, ``tokens`` being time steps x batch (the sum of the batch sizes of a
packed sequence). For an LSTM (4 gates), GRU (3) and RNN (1) of hidden size H on inputs of
size I that is ``2 * tokens * gates * H * (I + H)`` per layer and direction. Element-wise gate
arithmetic is not counted, as for every other layer. :data:`FLOPS_RULE` names the rule in
records (``cost.flops_rule``), so that a report can tell counts made before it.

torch's counter also has no formula for CPU's fused attention (``aten._scaled_dot_product_flash_
attention_for_cpu`` and its backward), which every SDPA call on CPU runs: it gets torch's own
formula for the GPU flash kernel (``4 * B * H * Lq * Lk * D`` forward, every query-key pair of
the padded batch, as on GPU).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

__all__ = ["FLOPS_RULE", "register_recurrent_flops", "rnn_flops", "flops_per_sample"]

#: ``cost.flops_rule`` of a record whose FLOPs count recurrent layers and CPU SDPA (module docstring);
#: earlier records say ``matmul+recurrent`` (no CPU SDPA) or nothing (neither)
FLOPS_RULE = "matmul+recurrent+cpu_sdpa"


def _numel(shape: Any) -> int:
    return math.prod(int(s) for s in shape)


def rnn_flops(input_shape: Any, weight_shapes: Any, batch_first: bool, batch_sizes: Any) -> int:
    """FLOPs of one fused recurrent op: ``2 * tokens * sum(rows * cols)`` over its 2-D weights
    (biases are 1-D and not counted)."""
    if batch_sizes:  # packed: the op's input is (sum of batch sizes, features)
        tokens = sum(int(b) for b in batch_sizes)
    else:
        tokens = int(input_shape[0]) * int(input_shape[1])
    return 2 * tokens * sum(_numel(w) for w in weight_shapes if w is not None and len(w) == 2)


_registered = False


def register_recurrent_flops() -> None:
    """Teach :class:`~torch.utils.flop_counter.FlopCounterMode` the fused recurrent ops (once;
    a counter made afterwards uses them). Ops this torch build lacks are left out."""
    global _registered
    if _registered:
        return
    import torch
    from torch.utils.flop_counter import (flop_registry, register_flop_formula, sdpa_backward_flop_count,
                                          sdpa_flop_count)

    aten = torch.ops.aten

    def mkldnn(input, weight0, weight1, weight2, weight3, hx_, cx_, reverse, batch_sizes, mode, hidden_size,
               num_layers, has_biases, bidirectional, batch_first, train, *args, out_shape=None, **kwargs) -> int:
        # one layer, one direction; weight0/1: input-hidden and hidden-hidden matrices
        return rnn_flops(input, [weight0, weight1], batch_first, batch_sizes)

    def cudnn(input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers,
              batch_first, dropout, train, bidirectional, batch_sizes, *args, out_shape=None, **kwargs) -> int:
        # every layer and direction: weight is the flat list of their matrices and biases
        return rnn_flops(input, weight, batch_first, batch_sizes)

    def miopen(input, weight, weight_stride0, hx, cx, mode, hidden_size, num_layers, batch_first, dropout, train,
               bidirectional, batch_sizes, *args, out_shape=None, **kwargs) -> int:
        return rnn_flops(input, weight, batch_first, batch_sizes)

    def sdpa_cpu(query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_flop_count(query, key, value)

    def sdpa_cpu_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_backward_flop_count(grad_out, query, key, value)

    for name, formula in (("mkldnn_rnn_layer", mkldnn), ("_cudnn_rnn", cudnn), ("miopen_rnn", miopen),
                          ("_scaled_dot_product_flash_attention_for_cpu", sdpa_cpu),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", sdpa_cpu_backward)):
        op = getattr(aten, name, None)
        if op is not None and op not in flop_registry:
            register_flop_formula(op)(formula)
    _registered = True


def flops_per_sample(module: Any, datamodule: Any) -> float | None:
    """FLOPs of one evaluation step (forward + loss) on a validation batch, per sample,
    recurrent layers counted (:func:`register_recurrent_flops`); None (and a warning) when the
    count fails: a measurement never sinks a finished cell."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    register_recurrent_flops()
    try:
        batch = next(iter(datamodule.val_dataloader()))
        batch = module.transfer_batch_to_device(batch, module.device, 0)
        was_training = module.training
        module.eval()
        # eager even when trainer.compile compiled the network: torch.compile refuses the counter's mode
        with torch.compiler.set_stance("force_eager"), torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = module.step(batch, "val")
        module.train(was_training)
        return counter.get_total_flops() / max(int(out.samples), 1)
    except Exception as err:  # noqa: BLE001 - a measurement must never sink a finished cell
        warnings.warn(f"FLOP count failed: {err}")
        return None
