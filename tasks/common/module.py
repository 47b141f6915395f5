"""The shared base of every task's LightningModule.

A task module *receives* its network (it never builds one): the same module trains an
attention model, an RNN or a CNN, so the comparison differs only in the network. The
base owns the optimiser and schedule, the logging convention (``<stage>/loss``,
``<stage>/<metric>``) and counts the samples and tokens each stage processed, which the
runner turns into throughput.

Several ranks (one cell on several devices, DDP): each rank sees a disjoint shard of every
epoch (:mod:`tasks.common.sampling`), so everything a task accumulates must be summed over the
ranks before a metric is computed from it. :func:`sum_over_ranks` and :func:`gather_over_ranks`
do that (and nothing in one process); the per-batch logs here are reduced by Lightning
(``sync_dist``, a float ``batch_size`` so that the sample-weighted mean is exact) and
:attr:`TaskModule.counts` are summed over the ranks at the end of every epoch.

One process: the per-batch values are not handed to ``self.log`` per step (each call costs
Lightning ~1 ms of host work, a third of a small graph model's step) but summed on the device,
weighted by the batch's samples, and logged once per epoch as the same sample-weighted means
(:class:`EpochMeans`), at the epoch's end. Lightning publishes a training epoch's values only
after validation, so the training means are also kept in :attr:`TaskModule.epoch_means` from
the epoch's last batch on (before validation: the learning curve reads its loss there). Full-
batch graphs have one step per epoch: there the log calls are per step, in the epoch's end.

Per-item test outcomes (what a bootstrap over test items needs): a task whose ``item_unit`` is set
returns, from its test steps, each counted unit's correctness (:attr:`StepOutput.items`, with
``item_mask`` where a batch row holds several units: tokens, frames, nodes); the module keeps them on
the device and, at the test epoch's end, reads them once and puts them in data order (each batch's
dataset indices come from the test loader's batch sampler, re-drawn: evaluation batches are not
shuffled), as :attr:`TaskModule.test_items`. Several ranks: not collected (``test_items`` stays None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from attn_core.recurrent import param_groups
from tasks.common.sampling import rank_and_world

OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULERS = ("none", "cosine", "inverse_sqrt")
STAGES = ("train", "val", "test")


#: floating-point dtypes torch's fused Adam/AdamW kernels take
_FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def optimizer_impl(params: list[Tensor]) -> str:
    """Which Adam/AdamW implementation to run for ``params``: ``"fused"`` (one kernel for every
    parameter's update) when every parameter is a floating-point CUDA tensor, else torch's own
    default: ``"foreach"`` (multi-tensor) on CUDA, ``"for-loop"`` on the CPU. The record stores it
    (``cost.optimizer_impl``)."""
    params = [p for p in params if p.requires_grad]
    on_cuda = bool(params) and all(p.is_cuda for p in params)
    if on_cuda and all(p.dtype in _FUSED_DTYPES and not p.is_sparse for p in params):
        return "fused"
    return "foreach" if on_cuda else "for-loop"


# ----------------------------------------------------------------------------- across ranks
def world_size() -> int:
    """How many ranks train this cell: the initialised process group's size, else 1."""
    return rank_and_world()[1]


def sum_over_ranks(t: Tensor) -> Tensor:
    """``t`` summed element-wise over every rank (a new tensor, ``t``'s device and dtype); ``t``
    itself in one process. Every rank must call it, in the same order (a collective). Under
    NCCL the sum travels through the current CUDA device."""
    if world_size() == 1:
        return t
    via = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else t.device
    out = t.detach().to(via, copy=True)
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out.to(t.device)


def gather_over_ranks(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` in one process (a collective)."""
    n = world_size()
    if n == 1:
        return [obj]
    out: list[Any] = [None] * n
    dist.all_gather_object(out, obj)
    return out


@dataclass
class StepOutput:
    """What a task's ``step`` returns: the loss to optimise, metric values to log (already
    reduced over the batch, or ``(sum, count)`` pairs are not needed: log means weighted by
    ``samples``), and how many samples/tokens the batch held: a Python int known on the host
    (a shape) or a 0-d device tensor (e.g. ``mask.sum()``), never read inside the step: tensor
    counts are added on the device and read once, at the epoch's end."""

    loss: Tensor
    metrics: dict[str, Tensor | float]
    samples: int | Tensor
    tokens: int | Tensor = 0
    #: test steps of a task with ``item_unit`` (only when :meth:`TaskModule.keeps_items`): each
    #: counted unit's correctness, ``(B,)`` (one unit per example) or ``(B, L)`` bool, on the device
    items: Tensor | None = None
    #: ``(B, L)`` bool: which positions of ``items`` are units (padding, unscored nodes excluded)
    item_mask: Tensor | None = None
    #: ``items``' shape, int: each unit's value on the task's :attr:`TaskModule.item_axis` (POS on
    #: UD: the word's distance to its syntactic head), kept beside its correctness; else None
    item_axis: Tensor | None = None


@dataclass
class ItemOutcomes:
    """The last test epoch's per-unit outcomes, in data order (examples by dataset index, the units
    of one example in their order): what a bootstrap over test items resamples."""

    unit: str  #: token | node | utterance | frame | image | sentence
    ids: np.ndarray  #: (N,) int64, ascending: the example's dataset index, or (units finer than
    #: examples) the unit's position in data order
    values: np.ndarray  #: (N,) bool correctness, or (N, K) int64 statistics (columns ``fields``)
    group: str | None = None  #: the example a unit belongs to where units are finer (sentence, utterance)
    group_ids: np.ndarray | None = None  #: (E,) int64 those examples' dataset indices, ascending
    group_sizes: np.ndarray | None = None  #: (E,) int64 units per example, in that order
    fields: tuple[str, ...] | None = None  #: names of the statistics' columns
    axis: str | None = None  #: the name of a per-unit covariate (:attr:`TaskModule.item_axis`), else None
    axis_values: np.ndarray | None = None  #: (N,) int64 its value per unit, in the order of ``values``


class EpochMeans:
    """Sample-weighted means of per-batch values over an epoch, one set per stage, summed
    where the values live (device tensors stay on the device: no host read per step). The
    epoch's mean of a value equals Lightning's ``on_epoch`` mean with the same ``batch_size``."""

    def __init__(self) -> None:
        self._sums: dict[str, dict[str, tuple[Tensor | float, Tensor | float]]] = {s: {} for s in STAGES}

    def add(self, stage: str, name: str, value: Tensor | float, weight: Tensor | float) -> None:
        """Add ``value * weight`` and ``weight`` to ``stage``'s ``name`` (not in place: a
        validation tensor is an inference tensor)."""
        if isinstance(value, Tensor):
            value = value.detach().float().reshape(())
        if isinstance(weight, Tensor):
            weight = weight.detach().float().reshape(())
        acc = self._sums[stage]
        prev = acc.get(name)
        acc[name] = (value * weight, weight) if prev is None else (prev[0] + value * weight, prev[1] + weight)

    def pending(self, stage: str) -> bool:
        return bool(self._sums[stage])

    def pop(self, stage: str) -> dict[str, Tensor | float]:
        """``{name: mean}`` of ``stage`` since the last pop, and forget them."""
        acc, self._sums[stage] = self._sums[stage], {}
        return {name: s / w for name, (s, w) in acc.items()}


class TaskModule(L.LightningModule):
    """Base LightningModule: subclasses implement :meth:`step`. A subclass that overrides an
    ``on_*_epoch_end`` or ``on_fit_end`` hook calls ``super()`` (the counts are summed there)."""

    #: every rank reads its own shard of the data; False when every rank processes all of it
    #: (full-batch graphs): then the counts are one rank's, not a sum over identical work
    shards_data: bool = True
    #: the unit a test step's :attr:`StepOutput.items` scores (None: the task keeps no items), and
    #: the example several units belong to (None: units are the sampled items themselves)
    item_unit: str | None = None
    item_group: str | None = None
    #: the name of the per-unit value a task's steps return as :attr:`StepOutput.item_axis` (an axis
    #: the report bins test outcomes by, without retraining), or None
    item_axis: str | None = None

    def __init__(
        self,
        net: nn.Module,
        *,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        optimizer: str = "adamw",
        scheduler: str = "none",
        warmup_steps: int = 0,
        **hparams: Any,
    ) -> None:
        super().__init__()
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
        if scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler={scheduler!r}; valid: {', '.join(SCHEDULERS)}")
        self.net = net
        self.save_hyperparameters(ignore=["net"])
        #: samples and tokens each stage processed, over every rank (the runner's throughput)
        self.counts: dict[str, dict[str, int]] = {s: {"samples": 0, "tokens": 0} for s in STAGES}
        self._pending: dict[str, list[int]] = {s: [0, 0] for s in STAGES}  # this rank's, not yet summed
        #: this rank's tensor counts ``(samples, tokens)`` on the device, read at the epoch's end
        self._device_pending: dict[str, Tensor | None] = {s: None for s in STAGES}
        #: one process: the per-batch loss and metrics, logged once per epoch
        self._means = EpochMeans()
        #: one process: each stage's last logged epoch means (``{stage: {name: value}}``): the
        #: training loss of the epoch that just ended, which ``callback_metrics`` only holds
        #: after ``on_train_epoch_end`` (after validation)
        self.epoch_means: dict[str, dict[str, Tensor | float]] = {}
        self._unlogged: set[str] = set()  # stages whose epoch_means are not logged yet
        #: whether test steps keep per-unit outcomes (off: measure the test epoch without them)
        self.collect_items = True
        self._item_batches: list[tuple[Tensor, Tensor | None, Tensor | None]] = []  # this test epoch's, on the device
        #: the last test epoch's per-unit outcomes in data order (one process), else None
        self.test_items: ItemOutcomes | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets and restores ``_current_fx_name`` around every hook call (~30 times a
        # training step); nn.Module.__setattr__'s parameter/buffer/module checks cost a dozen
        # Python calls each time for a plain string attribute. Same result, without them.
        if name == "_current_fx_name":
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    # -- to implement ------------------------------------------------------------------
    def step(self, batch: Any, stage: str) -> StepOutput:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- Lightning hooks ---------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.net(*args, **kwargs)

    @property
    def distributed(self) -> bool:
        """Whether several ranks train this module (their metrics must be reduced)."""
        return world_size() > 1

    def _run(self, batch: Any, stage: str) -> Tensor:
        """One step of ``stage``: counts and per-batch logs without reading a device value
        (no host-device sync): tensor counts stay on the device until the epoch's end."""
        out = self.step(batch, stage)
        if self.keeps_items(stage):
            self._keep_items(out)
        many = self.distributed
        samples, tokens = out.samples, out.tokens
        if isinstance(samples, Tensor) or isinstance(tokens, Tensor):
            dev = (samples if isinstance(samples, Tensor) else tokens).device
            pair = torch.stack([v.detach().long().reshape(()) if isinstance(v, Tensor)
                                else torch.zeros((), dtype=torch.long, device=dev)
                                for v in (samples, tokens)])  # (2,); an int is counted on the host below
            acc = self._device_pending[stage]
            self._device_pending[stage] = pair if acc is None else acc + pair  # not in place: inference mode
        host = [v if not isinstance(v, Tensor) else 0 for v in (samples, tokens)]
        if many:  # summed over the ranks at the epoch's end
            self._pending[stage][0] += int(host[0])
            self._pending[stage][1] += int(host[1])
        else:
            self.counts[stage]["samples"] += int(host[0])
            self.counts[stage]["tokens"] += int(host[1])
        # several ranks: Lightning's synced mean divides the ranks' weighted sums by their summed
        # batch sizes, exact only when those are floats (an int count floors, Lightning #21859);
        # a tensor count is a valid weight as it is (Lightning only adds and multiplies it)
        bs: int | float | Tensor
        if isinstance(samples, Tensor):
            bs = samples.detach().clamp(min=1).float() if many else samples.detach().clamp(min=1)
        else:
            bs = float(max(int(samples), 1)) if many else max(int(samples), 1)
        if not many:
            self._means.add(stage, "loss", out.loss, bs)
            for name, value in out.metrics.items():
                self._means.add(stage, name, value, bs)
            return out.loss
        self.log(f"{stage}/loss", out.loss.detach(), batch_size=bs, prog_bar=stage != "test", on_epoch=True,
                 on_step=False, sync_dist=many)
        for name, value in out.metrics.items():
            self.log(f"{stage}/{name}", value, batch_size=bs, prog_bar=stage == "val", on_epoch=True, on_step=False,
                     sync_dist=many)
        return out.loss

    def keeps_items(self, stage: str) -> bool:
        """Whether ``stage``'s steps should return :attr:`StepOutput.items`: the test stage of a
        task with an ``item_unit``, in one process, unless ``collect_items`` is off."""
        return stage == "test" and self.item_unit is not None and self.collect_items and not self.distributed

    def _keep_items(self, out: StepOutput) -> None:
        if out.items is not None:  # device tensors: read once, at the epoch's end
            self._item_batches.append((out.items.detach(), None if out.item_mask is None else out.item_mask.detach(),
                                       None if out.item_axis is None else out.item_axis.detach()))

    def _test_batches(self, sizes: list[int]) -> list[list[int]] | None:
        """The dataset indices of each test batch, drawn again from the test loader's batch sampler
        (twice: a sampler that does not give the same batches both times is not trusted), if they
        match the batch ``sizes`` seen; else None."""
        loaders = self.trainer.test_dataloaders
        if isinstance(loaders, (list, tuple)):
            loaders = loaders[0] if len(loaders) == 1 else None
        sampler = getattr(loaders, "batch_sampler", None)
        if sampler is None:
            return None
        first, again = [list(map(int, b)) for b in sampler], [list(map(int, b)) for b in sampler]
        return first if first == again and [len(b) for b in first] == sizes else None

    def finish_items(self, values: np.ndarray, counts: np.ndarray, sizes: list[int],
                     fields: tuple[str, ...] | None = None, axis: np.ndarray | None = None) -> None:
        """Set :attr:`test_items` from the test epoch's outcomes in batch order: ``values`` (M,) or
        (M, K), the units of every example one after another; ``counts`` (E,) units per example;
        ``sizes`` examples per batch. Examples go to data order (stable: an example's units keep
        theirs); a loader whose batches cannot be matched leaves it None, with a warning. ``axis``
        (M,): each unit's :attr:`item_axis` value, reordered with them."""
        from lightning.pytorch.utilities import rank_zero_warn

        self.test_items = None
        batches = self._test_batches(sizes)
        if batches is None:
            rank_zero_warn(f"{type(self).__name__}: the test batches' dataset indices are unknown (the test "
                           "loader's batch sampler does not repeat them); no per-item test outcomes kept")
            return
        example = np.asarray([i for b in batches for i in b], dtype=np.int64)  # (E,) in batch order
        counts = np.asarray(counts, dtype=np.int64)  # (E,)
        units = np.argsort(np.repeat(example, counts), kind="stable")  # (M,): units into data order
        by_index = np.argsort(example, kind="stable")  # (E,): examples into data order
        values, group_ids, group_sizes = np.asarray(values)[units], example[by_index], counts[by_index]
        one_each = self.item_group is None and bool((counts == 1).all())
        # one unit per example: the dataset index; finer units (tokens, frames, a graph's nodes): the position
        ids = group_ids if one_each else np.arange(len(values), dtype=np.int64)
        grouped = self.item_group is not None
        self.test_items = ItemOutcomes(self.item_unit or "item", ids, values, self.item_group,
                                       group_ids if grouped else None, group_sizes if grouped else None, fields,
                                       self.item_axis if axis is not None else None,
                                       None if axis is None else np.asarray(axis, dtype=np.int64)[units])

    def _finish_step_items(self) -> None:
        """The test epoch's kept step items, read once (one copy each for values and masks)."""
        kept, self._item_batches = self._item_batches, []
        if not kept:
            return
        values = torch.cat([v.reshape(-1) for v, _, _ in kept]).cpu().numpy()
        masks = torch.cat([(m if m is not None else torch.ones_like(v, dtype=torch.bool)).reshape(-1)
                           for v, m, _ in kept]).cpu().numpy().astype(bool)
        axis = None  # every batch's, or none
        if all(a is not None for _, _, a in kept):
            axis = torch.cat([a.reshape(-1) for _, _, a in kept]).cpu().numpy()[masks]
        rows, pos = [], 0  # per example: how many of its positions are units
        for v, _, _ in kept:
            n = v.numel()
            rows.append(masks[pos:pos + n].reshape(v.shape[0], -1).sum(1))
            pos += n
        self.finish_items(values[masks].astype(bool), np.concatenate(rows), [v.shape[0] for v, _, _ in kept],
                          axis=axis)

    def _close_means(self, stage: str) -> None:
        """End ``stage``'s epoch sums (one process): their means become :attr:`epoch_means`
        (device tensors, no host read), to be logged by :meth:`_log_means`."""
        means = self._means.pop(stage)
        if means:
            self.epoch_means[stage] = means
            self._unlogged.add(stage)

    def _log_means(self, stage: str) -> None:
        """Log ``stage``'s closed epoch means once, with the names and progress-bar choices of
        the per-step path; nothing when the stage saw no batch."""
        if self._means.pending(stage):
            self._close_means(stage)
        if stage not in self._unlogged:
            return
        self._unlogged.discard(stage)
        for name, value in self.epoch_means[stage].items():
            bar = stage != "test" if name == "loss" else stage == "val"
            self.log(f"{stage}/{name}", value, batch_size=1, prog_bar=bar, on_epoch=True, on_step=False)

    def _sum_counts(self, stage: str) -> None:
        """Add every rank's pending counts of ``stage`` to :attr:`counts`: the device counts
        (read here, once an epoch) and, several ranks, the host ones summed over the ranks (a
        collective: all ranks call it at the same hooks)."""
        device = self._device_pending[stage]
        self._device_pending[stage] = None
        if not self.distributed:
            if device is not None:
                samples, tokens = device.tolist()
                self.counts[stage]["samples"] += int(samples)
                self.counts[stage]["tokens"] += int(tokens)
            return
        local = torch.tensor(self._pending[stage], dtype=torch.long)
        if device is not None:
            local = local + device.cpu()
        total = sum_over_ranks(local) if self.shards_data else local
        self.counts[stage]["samples"] += int(total[0])
        self.counts[stage]["tokens"] += int(total[1])
        self._pending[stage] = [0, 0]

    def on_train_epoch_end(self) -> None:
        self._log_means("train")  # closed at the last batch, or here (a step or time limit, no length)
        self._sum_counts("train")

    def on_fit_end(self) -> None:  # a time or step limit can end training inside an epoch
        self._sum_counts("train")

    def on_validation_epoch_end(self) -> None:
        self._log_means("val")
        self._sum_counts("val")

    def on_test_epoch_end(self) -> None:
        self._log_means("test")
        self._sum_counts("test")
        self._finish_step_items()

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = self._run(batch, "train")
        if batch_idx + 1 >= self.trainer.num_training_batches:
            self._close_means("train")  # before validation: see the module docstring
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._run(batch, "val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        if batch_idx == 0:  # a new test epoch
            self._item_batches, self.test_items = [], None
        self._run(batch, "test")

    def configure_optimizers(self):
        hp = self.hparams
        # one group with lr/weight_decay, plus one per hint a recurrence put on its A/Lambda/Delta
        # (no decay, own lr); without hints it is the single group it always was
        params = param_groups(self, hp.lr, hp.weight_decay)
        impl = optimizer_impl([p for g in params for p in (g["params"] if isinstance(g, dict) else [g])])
        self.optimizer_impl = impl if hp.optimizer in ("adam", "adamw") else ("foreach" if impl != "for-loop" else impl)
        fused = {"fused": True} if self.optimizer_impl == "fused" else {}
        if hp.optimizer == "adam":
            opt = torch.optim.Adam(params, lr=hp.lr, weight_decay=hp.weight_decay, **fused)
        elif hp.optimizer == "adamw":
            opt = torch.optim.AdamW(params, lr=hp.lr, weight_decay=hp.weight_decay, **fused)
        else:
            opt = torch.optim.SGD(params, lr=hp.lr, weight_decay=hp.weight_decay, momentum=0.9)
        if hp.scheduler == "none" and hp.warmup_steps == 0:
            return opt
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warm = max(int(hp.warmup_steps), 0)

        def factor(step: int) -> float:
            if warm and step < warm:
                return (step + 1) / warm
            if hp.scheduler == "cosine":
                return 0.5 * (1 + math.cos(math.pi * min(step - warm, total) / max(total - warm, 1)))
            if hp.scheduler == "inverse_sqrt":
                return math.sqrt(max(warm, 1) / max(step + 1, 1))
            return 1.0

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
