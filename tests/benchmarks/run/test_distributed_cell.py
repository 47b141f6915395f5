"""One cell on several devices (issue 16), on CPU: a real 2-process (gloo) cell through the local
pool writes exactly one record whose metrics are those of the whole test set; the reduction
helpers under a fake 2-rank collective and under real gloo; rank detection and the follower
ranks, which never claim and never write."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from pathlib import Path
from typing import Any, Callable

import lightning as L
import pytest
import torch
from torch import nn

import tasks.common.module as TM
from benchmarks.run import distributed as D
from benchmarks.run import records as R
from benchmarks.cli import main
from benchmarks.config.suite import Cell
from benchmarks.run.worker import PLUGINS_ENV, execute_cell, log_path, record_target
from tests.helpers.suites import DDP_SUITE as SUITE



# ----------------------------------------------------------------------------- a real 2-process cell
def _single_process_test(rec: dict[str, Any], weights: Path, cache: Path,
                         root: Path) -> tuple[dict[str, float], Any, Any]:
    """The kept best ``weights`` of ``rec`` tested in this one process on the cell's own test
    set: ``(metrics, module, datamodule)``."""
    from benchmarks.run.scoring import eval_trainer, load_weights, score
    from tasks.common.registry import get_task

    cfg, task = rec["config"], get_task(rec["task"])
    dm = task.datasets.get(cfg["dataset"]).build(None, cache, rec["seed"], **cfg["dataset_params"])
    dm.prepare_data()
    dm.setup("fit")
    L.seed_everything(rec["seed"], verbose=False)
    module = task.make_module(task.models.get(cfg["model"]).build(dm.info, **cfg["model_params"]), dm.info,
                              **cfg["module_params"])
    module.load_state_dict(load_weights(weights)["state_dict"])
    return score(eval_trainer("32-true", "cpu", root), module, dm), module, dm


def test_a_two_process_cell_writes_one_record_with_metrics_over_every_rank(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(PLUGINS_ENV, "tests.helpers.ddp_strategy")  # the runner's strategy edit
    cfg, out, cache = tmp_path / "ddp.yaml", tmp_path / "out", tmp_path / "cache"
    cfg.write_text(SUITE.format(devices=2))
    assert main(["run", str(cfg), "--out", str(out), "--no-report", "--cache-dir", str(cache)]) == 0
    assert "on 2 ranks, its own process" in capsys.readouterr().out

    files = list(R.iter_record_files(out))
    assert len(files) == 1 and not list(out.rglob("*.claim"))
    rec = json.loads(files[0].read_text())
    assert rec["status"] == "ok" and rec["resources"]["ranks"] == 2, rec.get("reason")
    from benchmarks.run.launchers.local import LocalLauncher

    assert rec["resources"]["cpu_threads"] == D.rank_threads(LocalLauncher(None).threads, 2)  # cores split
    log = log_path(out, rec).read_text()
    starts = re.findall(r"pid \d+ rank (\d) of 2", log)
    assert sorted(starts) == ["0", "1"], log  # each rank trained once
    assert log.count("rank 1 of 2 ok (rank 0 writes the record)") == 1
    assert log.count("strategy: DDPStrategy over gloo") == 2

    # The record's test metrics are over the whole test set: the same weights tested in one
    # process give the same accuracy and confusion matrix (one rank's shard would not).
    from benchmarks.run.callbacks import quiet_lightning

    with quiet_lightning():
        single, module, dm = _single_process_test(rec, files[0].with_suffix(".pt"), cache, tmp_path / "eval")
    assert rec["test"]["acc"] == pytest.approx(single["acc"], abs=1e-7)
    assert rec["test"]["sent_acc"] == pytest.approx(single["sent_acc"], abs=1e-7)
    assert rec["extras"]["pos_confusion"] == module.report_extras()["pos_confusion"]
    test_words = sum(len(item[0]) for item in dm.splits["test"])
    assert sum(map(sum, rec["extras"]["pos_confusion"]["matrix"])) == test_words
    # training counts summed over the ranks: 2 epochs of 200 sentences, plus at most the one
    # batch (<= 16) each epoch repeats to give both ranks the same number of steps
    cost = rec["cost"]
    trained = cost["train_samples_per_s"] * cost["train_compute_s"]
    assert 2 * 200 * 0.99 <= trained <= 2 * 216 * 1.01, cost


# ----------------------------------------------------------------------------- a fake 2-rank collective
class FakeRanks:
    """``n`` ranks as ``n`` threads; :meth:`sum` and :meth:`gather` wait for every rank, as a
    collective does (a rank that skipped one would hang the test, not pass it)."""

    def __init__(self, n: int) -> None:
        self.n, self.local = n, threading.local()
        self.barrier, self.slots = threading.Barrier(n, timeout=20), [None] * n

    def _exchange(self, obj: Any) -> list[Any]:
        self.slots[self.local.rank] = obj
        self.barrier.wait()
        got = list(self.slots)
        self.barrier.wait()
        return got

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        parts = self._exchange(t.detach().clone())
        return torch.stack(parts).sum(0).to(t.dtype)

    def gather(self, obj: Any) -> list[Any]:
        return self._exchange(obj)

    def run(self, fn: Callable[[int], Any]) -> list[Any]:
        results: list[Any] = [None] * self.n
        errors: list[BaseException] = []

        def body(rank: int) -> None:
            self.local.rank = rank
            try:
                results[rank] = fn(rank)
            except BaseException as err:  # noqa: BLE001 - re-raised in the test's thread
                errors.append(err)
                self.barrier.abort()

        threads = [threading.Thread(target=body, args=(r,)) for r in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


@pytest.fixture
def two_ranks(monkeypatch) -> FakeRanks:
    fake = FakeRanks(2)
    monkeypatch.setattr(TM, "world_size", lambda: fake.n)
    for mod in ("tasks.common.module", "tasks.pos_tagging.module", "tasks.speech.module"):
        monkeypatch.setattr(f"{mod}.sum_over_ranks", fake.sum)
    monkeypatch.setattr("tasks.translation.module.gather_over_ranks", fake.gather)
    return fake


def _capture_logs(module: nn.Module) -> list[tuple[str, Any, dict]]:
    logged: list[tuple[str, Any, dict]] = []
    module.log = lambda name, value, **kw: logged.append((name, value, kw))  # type: ignore[method-assign]
    return logged


class _Given(nn.Module):
    """A network that returns the logits its batch carries."""

    def forward(self, batch: Any, *rest: Any) -> torch.Tensor:
        return batch["logits"] if isinstance(batch, dict) else batch[:, 0, :]


def _toy_classifier() -> TM.TaskModule:
    from tests.helpers.toy_parts import Classifier

    torch.manual_seed(0)
    return Classifier(nn.Linear(4, 2))


def test_one_process_logs_and_counts_as_before() -> None:
    m = _toy_classifier()
    logged = _capture_logs(m)
    m._run((torch.randn(5, 4), torch.zeros(5, dtype=torch.long)), "train")
    assert m.counts["train"] == {"samples": 5, "tokens": 20}  # at once, no epoch end needed
    assert all(kw["sync_dist"] is False and kw["batch_size"] == 5 and isinstance(kw["batch_size"], int)
               for _, _, kw in logged)


def test_counts_and_batch_logs_are_reduced_over_ranks(two_ranks: FakeRanks) -> None:
    sizes = {0: [5, 3], 1: [4]}  # uneven shards

    def rank(r: int) -> tuple[dict, list]:
        m = _toy_classifier()
        logged = _capture_logs(m)
        for n in sizes[r]:
            m._run((torch.randn(n, 4), torch.zeros(n, dtype=torch.long)), "val")
        assert m.counts["val"]["samples"] == 0  # pending until the epoch ends
        m.on_validation_epoch_end()
        return m.counts["val"], logged

    for counts, logged in two_ranks.run(rank):
        assert counts == {"samples": 12, "tokens": 48}
        assert logged and all(kw["sync_dist"] is True and isinstance(kw["batch_size"], float) for _, _, kw in logged)


def test_full_batch_graphs_count_one_rank_not_the_repeated_work(two_ranks: FakeRanks) -> None:
    from tasks.graphs.module import GraphNodeClassifier

    def rank(r: int) -> dict:
        m = GraphNodeClassifier(nn.Linear(2, 2))
        m._pending["train"] = [30, 0]
        m.on_train_epoch_end()
        return m.counts["train"]

    assert two_ranks.run(rank) == [{"samples": 30, "tokens": 0}] * 2


def _tagging_batches(seed: int, n: int, tags: int = 5) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        b, length = 3, 6
        mask = torch.rand(b, length, generator=g) > 0.2
        mask[:, 0] = True
        out.append({"mask": mask, "tags": torch.randint(0, tags, (b, length), generator=g),
                    "oov": torch.rand(b, length, generator=g) > 0.7,
                    "logits": torch.randn(b, length, tags, generator=g)})
    return out


def test_pos_tagging_corpus_metrics_and_confusion_are_over_every_rank(two_ranks: FakeRanks, monkeypatch) -> None:
    from tasks.pos_tagging.module import PosTaggerModule

    shards = {0: _tagging_batches(1, 3), 1: _tagging_batches(2, 2)}

    def evaluate(batches: list[dict]) -> tuple[list, PosTaggerModule]:
        m = PosTaggerModule(_Given(), num_tags=5)
        logged = _capture_logs(m)
        for b in batches:
            m.step(b, "test")
        m._log_epoch("test")
        return logged, m

    ranks = two_ranks.run(lambda r: evaluate(shards[r]))
    monkeypatch.setattr(TM, "world_size", lambda: 1)
    whole, ref = evaluate(shards[0] + shards[1])
    want = {name: value for name, value, _ in whole}
    for logged, m in ranks:
        assert {name: value for name, value, _ in logged} == want
        assert all(kw["sync_dist"] for _, _, kw in logged)
        assert m.report_extras() == ref.report_extras()
    assert want["test/acc"] != evaluate(shards[0])[0][0][1]  # one shard alone would differ


def test_speech_counters_and_confusion_are_over_every_rank(two_ranks: FakeRanks, monkeypatch) -> None:
    from tasks.speech.module import SpeechModule

    def batches(seed: int, n: int) -> list[dict]:
        g = torch.Generator().manual_seed(seed)
        return [{"x": torch.randn(4, 2, 3, generator=g), "mask": torch.ones(4, 2, dtype=torch.bool),
                 "y": torch.randint(0, 3, (4,), generator=g)} for _ in range(n)]

    shards = {0: batches(3, 2), 1: batches(4, 3)}

    def evaluate(bs: list[dict]) -> tuple[list, SpeechModule]:
        m = SpeechModule(_Given(), form="classify", num_classes=3)
        logged = _capture_logs(m)
        m.on_test_epoch_start()
        for b in bs:
            m.step(b, "test")
        m.on_test_epoch_end()
        return logged, m

    ranks = two_ranks.run(lambda r: evaluate(shards[r]))
    monkeypatch.setattr(TM, "world_size", lambda: 1)
    whole, ref = evaluate(shards[0] + shards[1])
    for logged, m in ranks:
        assert logged == [(n, v, {**kw, "sync_dist": True}) for n, v, kw in whole]
        assert torch.equal(m.test_confusion, ref.test_confusion) and int(ref.test_confusion.sum()) == 20


def test_translation_scores_the_corpus_of_every_rank(two_ranks: FakeRanks) -> None:
    from tasks.translation.module import TranslationModule, corpus_scores

    bufs = [{"nll": 6.0, "tokens": 4, "hyps": ["a cat sat here", "the dog"], "refs": ["a cat sat there", "the dog"],
             "decode_s": 0.5},
            {"nll": 2.0, "tokens": 4, "hyps": ["on the mat"], "refs": ["on a mat"], "decode_s": 1.0}]

    def rank(r: int) -> dict[str, float]:
        m = TranslationModule(nn.Linear(1, 1))
        logged = _capture_logs(m)
        m._buf["test"] = dict(bufs[r])
        m._log_corpus("test")
        assert all(kw["sync_dist"] for _, _, kw in logged)
        return {name: value for name, value, _ in logged}

    want = corpus_scores(bufs[0]["hyps"] + bufs[1]["hyps"], bufs[0]["refs"] + bufs[1]["refs"])
    for got in two_ranks.run(rank):
        assert got["test/bleu"] == pytest.approx(want["bleu"]) and got["test/chrf"] == pytest.approx(want["chrf"])
        assert got["test/ppl"] == pytest.approx(float(torch.exp(torch.tensor(1.0))))
        assert got["test/sent_per_s"] == pytest.approx(3 / 1.0)  # the slowest rank's decoding time


def test_translation_rank_with_nothing_decoded_still_joins_the_gather(two_ranks: FakeRanks) -> None:
    from tasks.translation.module import TranslationModule

    def rank(r: int) -> list[str]:
        m = TranslationModule(nn.Linear(1, 1))
        logged = _capture_logs(m)
        if r == 0:
            m._buf["val"] = {"nll": 1.0, "tokens": 1, "hyps": ["x"], "refs": ["x"], "decode_s": 0.1}
        m._log_corpus("val")
        return [name for name, _, _ in logged]

    assert two_ranks.run(rank) == [["val/bleu", "val/chrf", "val/ppl", "val/sent_per_s"]] * 2


# ----------------------------------------------------------------------------- real gloo
def _gloo_rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        t = torch.tensor([rank + 1, 10 * (rank + 1)], dtype=torch.long)
        summed = TM.sum_over_ranks(t)
        gathered = TM.gather_over_ranks({"rank": rank, "hyps": ["h"] * (rank + 1)})
        Path(out, f"{rank}.json").write_text(json.dumps({"sum": summed.tolist(), "dtype": str(summed.dtype),
                                                         "unchanged": t.tolist(), "gathered": gathered,
                                                         "world": TM.world_size()}))
    finally:
        dist.destroy_process_group()


def test_reduction_helpers_under_real_gloo(tmp_path) -> None:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # forked: the ranks inherit this process's imports (a spawned one would import Lightning again)
    mp.start_processes(_gloo_rank, args=(port, str(tmp_path)), nprocs=2, join=True, start_method="fork")
    for rank in range(2):
        got = json.loads((tmp_path / f"{rank}.json").read_text())
        assert got["sum"] == [3, 30] and got["dtype"] == "torch.int64" and got["world"] == 2
        assert got["unchanged"] == [rank + 1, 10 * (rank + 1)]
        assert got["gathered"] == [{"rank": 0, "hyps": ["h"]}, {"rank": 1, "hyps": ["h", "h"]}]
    assert TM.sum_over_ranks(t := torch.ones(2)) is t and TM.gather_over_ranks(1) == [1]  # one process


# ----------------------------------------------------------------------------- ranks and followers
@pytest.mark.parametrize("env,rank", [
    ({}, 0),
    ({"LOCAL_RANK": "0", "NODE_RANK": "0", "WORLD_SIZE": "2"}, 0),  # rank 0 once Lightning started the others
    ({"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2"}, 1),  # Lightning's re-run of the command
    ({"LOCAL_RANK": "1", "WORLD_SIZE": "1"}, 0),
    ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, 1),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, 0),
    ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}, 3),  # torchrun
    ({"LOCAL_RANK": "x", "WORLD_SIZE": "2"}, 0),
])
def test_launch_rank_reads_what_the_starter_set(env: dict[str, str], rank: int) -> None:
    assert D.launch_rank(env) == rank


@pytest.mark.parametrize("trainer,device,ranks", [
    ({}, "cpu", 1), ({"devices": 1}, "cpu", 1), ({"devices": 2}, "cpu", 2), ({"devices": "auto"}, "cpu", 1),
    ({"devices": [0, 3]}, "cuda", 2), ({"devices": "auto"}, "cuda", 4),
])
def test_cell_ranks(trainer: dict, device: str, ranks: int) -> None:
    config = {"trainer": trainer, **({"device": device} if device != "cpu" else {})}
    assert D.cell_ranks(config, visible_gpus=4) == ranks


def test_strategy_only_for_several_processes_and_threads_split() -> None:
    assert D.strategy_kwargs("cpu", 1) == {} and D.strategy_kwargs("cpu", "auto") == {}
    ddp = D.strategy_kwargs("cpu", 2)["strategy"]
    assert type(ddp).__name__ == "DDPStrategy" and ddp._process_group_backend == "gloo"
    assert [D.rank_threads(t, r) for t, r in ((2, 2), (1, 2), (8, 3), (4, 1))] == [1, 1, 2, 4]
    assert "SLURM_NTASKS" not in D.without_slurm_tasks({"SLURM_NTASKS": "2", "SLURM_JOB_ID": "7"})
    # a Slurm task is one rank with its CPUs; else this process's cores are split between the ranks
    assert D.unit_threads({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_CPUS_PER_TASK": "3"}, 2) == 3
    assert D.unit_threads({}, 2) == D.rank_threads(len(os.sched_getaffinity(0)), 2)


def test_a_follower_rank_trains_without_claim_or_record(tmp_path, monkeypatch) -> None:
    from benchmarks.run.runner import RunOptions

    cell = Cell("c0ffee", "toy", "points", "linear", "other", None, 0, {"trainer": {"devices": 2}})
    target = record_target(tmp_path, cell)
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"status": "ok", "started": "s", "finished": "f"}))  # rank 0 re-runs it (--force)
    ran: list[str] = []

    def fake_run_cell(c: Cell, suite: str, opts: Any) -> dict:
        assert not target.with_suffix(".claim").exists()  # no claim taken by this rank
        ran.append(c.cell_id)
        return {"status": "ok", "cell_id": c.cell_id}

    monkeypatch.setattr("benchmarks.run.cell.run_cell", fake_run_cell)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    status, rec, path = execute_cell(cell, "s", RunOptions(out=tmp_path))
    assert (status, path, ran) == ("ok", None, ["c0ffee"])
    assert json.loads(target.read_text())["started"] == "s"  # untouched
    assert not target.with_suffix(".claim").exists()
