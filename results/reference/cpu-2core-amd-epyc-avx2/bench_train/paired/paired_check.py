"""Step-paired decomposition of bench train's cell/bare gap (CPU): each timed training step of the
real cell path (Trainer + task module + the runner's callbacks, via the bench's own StepProbe and
probed_cell) is followed, inside its on_train_batch_end, by one bare step of a deep copy of the
module (own optimiser, same batch), so that the machine's drift cancels in every pair. Phases are
taken from Lightning's hooks (cell) and around the calls (bare): data loading (the previous
batch's end to this batch's start, within an epoch), forward (`module.step`), backward, optimiser
step; "framework" is the rest of the step. Usage: python paired_check.py TASK MODEL STEPS OUT.json [DATA_DIR] (with DATA_DIR: the real-data suites)"""
import collections, copy, json, platform, subprocess, sys, tempfile, time
from pathlib import Path

import torch

from benchmarks.micro.train import load_config, select_cells
from benchmarks.micro.train.probe import StepProbe, probed_cell
from benchmarks.run.runner import DEFAULT_CACHE, RunOptions

torch.set_num_threads(1)
task, model, N, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
data_dir = sys.argv[5] if len(sys.argv) > 5 else None
cfg = load_config(None, overrides=[f"models={{{task}: [{model}]}}"])
cell = select_cells(cfg, real=data_dir is not None, device="cpu")[0]
clip = cell.config["trainer"].get("gradient_clip_val")
pc = time.perf_counter


class Paired(StepProbe):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.marks, self.prev_end, self.twin = None, None, None
        self.cell = collections.defaultdict(float)
        self.bare = collections.defaultdict(float)
        self.n = 0

    def mark(self, name):
        if self.marks is not None:
            self.marks[name] = pc()

    def setup(self, trainer, pl_module, stage):
        super().setup(trainer, pl_module, stage)
        step = pl_module.step

        def timed_step(*a, **k):
            self.mark("fwd")
            r = step(*a, **k)
            self.mark("fwd_end")
            return r
        object.__setattr__(pl_module, "step", timed_step)

    def on_train_epoch_start(self, trainer, pl_module):
        self.prev_end = None  # loading across an epoch boundary is not a step's

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)
        self.marks = {"start": pc()}

    def on_before_backward(self, *a):
        self.mark("bwd")

    def on_after_backward(self, *a):
        self.mark("bwd_end")

    def on_before_optimizer_step(self, *a):
        self.mark("opt")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.mark("end")
        d = self.marks
        if self.twin is None:
            self.twin = copy.deepcopy(pl_module)
            object.__setattr__(self.twin, "step", type(self.twin).step.__get__(self.twin))
            conf = self.twin.configure_optimizers()
            self.opt = conf["optimizer"] if isinstance(conf, dict) else conf
            self.params = [p for p in self.twin.parameters() if p.requires_grad]
        t0 = pc(); self.opt.zero_grad(set_to_none=True); t1 = pc()
        loss = self.twin.step(batch, "train").loss; t2 = pc()
        loss.backward(); t3 = pc()
        if clip:
            torch.nn.utils.clip_grad_norm_(self.params, clip)
        self.opt.step(); t4 = pc()
        one = trainer.num_training_batches == 1  # full-batch graphs: every step is an epoch
        if self.phase(self.i) == "timed" and (self.prev_end is not None or one):
            c, b = self.cell, self.bare
            first = d["start"] if self.prev_end is None else self.prev_end
            c["load"] += d["start"] - first
            c["forward"] += d["fwd_end"] - d["fwd"]
            c["backward"] += d["bwd_end"] - d["bwd"]
            c["total"] += d["end"] - first
            b["forward"] += t2 - t1; b["backward"] += t3 - t2; b["total"] += t4 - t0
            # the optimiser step is inside Lightning's closure machinery: "opt" to "end" holds
            # optimizer.step plus the batch-end hooks; the bare side's step + clip
            c["optimizer+batch_end"] += d["end"] - d["opt"]; b["optimizer+batch_end"] += t4 - t3
            c["framework"] += (d["end"] - d["start"]) - (d["fwd_end"] - d["fwd"]) - (d["bwd_end"] - d["bwd"]) - (d["end"] - d["opt"])
            b["framework"] += t1 - t0  # zero_grad
            self.n += 1
        self.marks = None
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        self.prev_end = pc()


with tempfile.TemporaryDirectory() as tmp:
    opts = RunOptions(out=Path(tmp), data_dir=Path(data_dir) if data_dir else None, cache_dir=DEFAULT_CACHE, log=lambda s: None)
    probe = Paired(warmup=min(20, max(N // 4, 3)), steps=N, sync_steps=0, profile_steps=0)
    probed_cell(cell, "bench_train", opts, probe)
ms = lambda d: {k: round(1e3 * v / probe.n, 4) for k, v in d.items()}
res = {"task": task, "model": model, "data": "real (" + data_dir + ")" if data_dir else "synthetic (quick)", "paired_steps": probe.n, "cell_ms_per_step": ms(probe.cell),
       "bare_ms_per_step": ms(probe.bare), "ratio": probe.bare["total"] / probe.cell["total"],
       "git_commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "torch": torch.__version__, "cpu": platform.processor() or platform.machine(), "threads": 1}
Path(out_path).write_text(json.dumps(res, indent=1))
print(json.dumps(res))
