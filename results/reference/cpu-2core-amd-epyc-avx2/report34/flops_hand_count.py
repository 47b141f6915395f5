"""FLOPs per sample of every registered model against a hand count (issue 34).

Run from the repository root: ``python results/reference/cpu-2core-amd-epyc-avx2/report34/flops_hand_count.py``.
Each model is built at the sync-free test's small sizes on its task's synthetic data and one
validation batch is counted twice:
- attnbench: ``benchmarks.run.flops.flops_per_sample`` (torch's FlopCounterMode + the recurrent rule),
  and its per-module breakdown;
- by hand: forward hooks apply the textbook formula of each weight layer to the shapes it saw:
  Linear ``2 * rows * in * out``, Conv ``2 * out.numel() * in/groups * prod(kernel)``,
  LSTM/GRU/RNN ``2 * B * T * gates * H * (I + H)`` per layer and direction (projection too).
The weight layers must agree exactly; what attnbench counts outside them (attention products,
embedding-tied output layers, graph messages) is shown as the remainder.
"""
from __future__ import annotations

import math
import sys
import tempfile
import warnings
from collections import defaultdict

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, ".")
from benchmarks.run.flops import flops_per_sample, register_recurrent_flops  # noqa: E402
from tests.tasks.common.test_sync_free import DATASETS, _cases, build  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def hand(mod: nn.Module, inp: tuple, out) -> int:
    x = inp[0]
    if isinstance(mod, nn.Linear):
        return 2 * (x.numel() // mod.in_features) * mod.in_features * mod.out_features
    if isinstance(mod, (nn.Conv1d, nn.Conv2d)):
        return 2 * out.numel() * (mod.in_channels // mod.groups) * math.prod(mod.kernel_size)
    if isinstance(mod, nn.RNNBase):
        packed = isinstance(x, nn.utils.rnn.PackedSequence)
        tokens = int(x.batch_sizes.sum()) if packed else x.shape[0] * x.shape[1]
        g, total = GATES[mod.mode.split("_")[0]], 0
        for layer in range(mod.num_layers):
            for d in range(2 if mod.bidirectional else 1):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w = [getattr(mod, f"weight_ih{sfx}"), getattr(mod, f"weight_hh{sfx}")]
                if mod.proj_size:
                    w.append(getattr(mod, f"weight_hr{sfx}"))
                total += 2 * tokens * sum(t.numel() for t in w)
        return total
    return 0


def main() -> None:
    register_recurrent_flops()
    rows = []
    for case in _cases():
        task, dataset, model = case.values
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module, dm = build(task, dataset, model, tmp)
            module.eval()
            ours = flops_per_sample(module, dm)
            counts, names = defaultdict(int), {}
            for name, m in module.named_modules():
                names[m] = name
            hooks = [m.register_forward_hook(lambda m, i, o: counts.__setitem__(m, counts[m] + hand(m, i, o)))
                     for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.RNNBase))]
            batch = module.transfer_batch_to_device(next(iter(dm.val_dataloader())), module.device, 0)
            with torch.no_grad(), FlopCounterMode(display=False) as fc:
                out = module.step(batch, "val")
            for h in hooks:
                h.remove()
            n = max(int(out.samples), 1)
            by_mod = fc.get_flop_counts()
            # keys are "<class of the first module called>.<path below it>": match the path below the net
            below = {k.split(".", 1)[1]: v for k, v in by_mod.items() if "." in k}
            ab_layers = sum(sum(below.get(names[m].split(".", 1)[1], {}).values()) for m in counts)
            hand_layers = sum(counts.values())
            total = fc.get_total_flops()
        rows.append((f"{task}/{dataset}", model, ours, hand_layers / n, ab_layers / n, (total - ab_layers) / n))
        print(rows[-1], flush=True)
    with open(sys.argv[1] if len(sys.argv) > 1 else "FLOPS.md", "w") as f:
        f.write("| task/data | model | attnbench FLOPs/sample | weight layers by hand | weight layers by attnbench | "
                "ratio | remainder (attention, messages) |\n|---|---|---:|---:|---:|---:|---:|\n")
        for t, m, ours, h, a, rest in rows:
            ratio = f"{a / h:.4f}" if h else "-"
            f.write(f"| {t} | {m} | {ours:,.0f} | {h:,.0f} | {a:,.0f} | {ratio} | {rest:,.0f} |\n")


if __name__ == "__main__":
    main()
