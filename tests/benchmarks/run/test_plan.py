"""The plan before a run (issue 46 item 3) on fake records: measured costs from records, merged
into ``costs.json``; each cell's predicted seconds; the wall of starting them longest first on the
pool's workers (exact arithmetic); estimates and unknowns marked; the device key of a machine;
and the local pool starting its cells in the plan's order."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.config.suite import expand, validate_suite
from benchmarks.run import plan as P
from benchmarks.run import records as R
from tests.helpers.toy_task import register

CPU_AVX2 = {"device": "cpu", "cuda": None, "device_name": "AMD EPYC", "cpu_model": "AMD EPYC", "cpu_affinity": 2,
            "cpu_count": 2, "cpu_vector": ["sse4_2", "avx", "avx2", "fma"], "torch_threads": 2}
DEV = "cpu-2core-amd-epyc-avx2"


def _cells(models: list[str], seeds: int = 1, trainer: dict | None = None, suite: str = "s") -> list[Any]:
    register()
    return expand(validate_suite({"suite": suite, "seeds": seeds,
                                  "trainer": {"max_epochs": 50, "accelerator": "cpu", **(trainer or {})},
                                  "cells": [{"task": "toy", "dataset": "points", "models": models}]}, source="t.yaml"))


def _record(model: str, seed: int, train_s: float, epochs: int, wall_s: float, *, suite: str = "s",
            stop: str = "early_stopping", env: dict | None = None, status: str = "ok") -> dict[str, Any]:
    """A result record with what the costs read: times, epochs, what stopped it, the machine."""
    start = "2026-11-28T10:00:00+00:00"
    end = f"2026-11-28T10:{int(wall_s // 60):02d}:{wall_s % 60:06.3f}+00:00"
    return {"schema": R.SCHEMA_VERSION, "suite": suite, "cell_id": f"{model}{seed}", "task": "toy", "dataset": "points",
            "model": model, "seed": seed, "status": status, "epochs_run": epochs, "cost": {"train_time_s": train_s},
            "stop": {"reason": stop}, "env": env or CPU_AVX2, "resources": {"cpu_threads": 2, "cells_sharing_device": 1},
            "config": {}, "started": start, "finished": end}


def _write(results: Path, recs: list[dict[str, Any]]) -> Path:
    for rec in recs:
        R.write_json_atomic(R.record_path(results, rec), rec)
    return results


def _costs(recs: list[dict[str, Any]]) -> dict[str, Any]:
    return P.costs_from_records(recs)[DEV]


# ----------------------------------------------------------------------------- the machine
@pytest.mark.parametrize("env,key", [
    ({"device": "cuda", "cuda": "13.0", "device_name": "NVIDIA H100 80GB HBM3"}, "h100-80gb-hbm3"),
    (CPU_AVX2, "cpu-2core-amd-epyc-avx2"),
    ({**CPU_AVX2, "cpu_vector": ["avx2", "avx512f"]}, "cpu-2core-amd-epyc-avx512"),
    ({**CPU_AVX2, "cpu_vector": None}, "cpu-2core-amd-epyc"),  # records from before the vector units were kept
    ({**CPU_AVX2, "device": "cuda"}, "cpu-2core-amd-epyc-avx2"),  # asked for CUDA on a machine without it
    ({"device": "cpu", "cpu_model": "Intel(R) Xeon(R) Gold 6338", "cpu_count": 16}, "cpu-16core-intel-xeon-gold-6338"),
])
def test_the_device_key_names_the_machine_as_the_reference_folders_do(env, key):
    assert P.device_key(env) == key


def _outside_tuning(records: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """The records a run trained in ``folder``: not a search's trials, nor their copies (``--reuse``)."""
    return [r for r in records if "tuning" not in Path(r["_path"]).relative_to(folder).parts and not r.get("reused")]


def test_the_reference_folders_with_records_have_their_costs_committed():
    for folder in sorted(P.REFERENCE_DIR.iterdir()):
        recs = _outside_tuning(R.load_records(folder), folder) if folder.is_dir() else []
        devices = set(P.costs_from_records(recs))
        assert devices <= {folder.name}  # each folder holds one machine's records, named by its key
        if devices:
            costs = json.loads((folder / P.COSTS_FILE).read_text())
            assert costs["device"] == folder.name and costs["costs"]


def test_a_tuning_search_that_pools_machines_names_each_in_its_readme():
    """A search may reuse another machine's same-id trials (its budget is in epochs); its README
    must then name every machine whose records it holds, by its device key. So must a run whose
    records are a search's trials, copied by ``--reuse``."""
    reused = {p.parent for p in P.REFERENCE_DIR.glob("*/*/runs") if any(r.get("reused") for r in R.load_records(p.parent))}
    for search in sorted(P.REFERENCE_DIR.glob("*/tuning/*")) + sorted(reused):  # and the runs that copied trials
        devices = {P.device_key(r.get("env") or {}) for r in R.load_records(search)} if search.is_dir() else set()
        if devices - {search.relative_to(P.REFERENCE_DIR).parts[0]}:  # the machine folder it is in
            readmes = " ".join(p.read_text() for p in (search / "README.md", search.parent / "README.md") if p.exists())
            assert sorted(d for d in devices if d not in readmes) == [], search


# ----------------------------------------------------------------------------- measured costs
def test_costs_from_records_are_means_per_suite_task_dataset_model():
    recs = [_record("a", 0, 90.0, 9, 100.0), _record("a", 1, 110.0, 11, 124.0),
            _record("a", 2, 1.0, 1, 2.0, status="failed"), _record("a", 0, 50.0, 5, 55.0, suite="other"),
            _record("b", 0, 10.0, 0, 12.0)]  # no epoch: nothing to learn
    costs = _costs(recs)
    assert set(costs) == {"s/toy/points/a", "other/toy/points/a"}
    a = costs["s/toy/points/a"]
    assert (a["cells"], a["seconds_per_epoch"], a["epochs_run"], a["train_time_s"], a["wall_s"], a["overhead_s"]) == \
        (2, 10.0, 10.0, 100.0, 112.0, 12.0)
    assert a["stopped_by"] == {"early_stopping": 2} and a["cpu_threads"] == 2


def test_write_costs_merges_per_key_atomically_and_refuses_a_broken_file(tmp_path):
    path = tmp_path / DEV / P.COSTS_FILE
    P.write_costs(_write(tmp_path / "r1", [_record("a", 0, 90.0, 9, 100.0), _record("b", 0, 20.0, 2, 21.0)]), path)
    merged = P.write_costs(_write(tmp_path / "r2", [_record("a", 0, 40.0, 4, 41.0)]), path)
    assert merged["s/toy/points/a"]["train_time_s"] == 40.0  # the newer measurement of a
    assert merged["s/toy/points/b"]["train_time_s"] == 20.0  # b kept
    data = json.loads(path.read_text())
    assert data["device"] == DEV and data["costs"] == merged and not list(path.parent.glob("*.tmp*"))
    written = data["written"]
    P.write_costs(tmp_path / "r2", path)
    assert json.loads(path.read_text())["written"] == written  # nothing new: left as it was
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable costs file"):
        P.write_costs(tmp_path / "r2", path)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"device": "h100-80gb-hbm3", "costs": {}}))
    with pytest.raises(ValueError, match="holds the costs of h100-80gb-hbm3"):
        P.write_costs(tmp_path / "r2", other)


def test_write_from_the_command_line(tmp_path, capsys):
    results = _write(tmp_path / "r", [_record("a", 0, 90.0, 9, 100.0)])
    assert P.main(["write", str(results), "--to", str(tmp_path / "costs.json")]) == 0
    assert "1 costs" in capsys.readouterr().out
    assert P.main(["write", str(tmp_path / "empty")]) == 2
    assert "no ok records" in capsys.readouterr().err


# ----------------------------------------------------------------------------- predicting
def test_a_cells_seconds_from_its_measured_cost_capped_by_its_config():
    costs = _costs([_record("linear", 0, 90.0, 9, 100.0)])  # 10 s per epoch, 9 epochs, 10 s overhead
    (cell,) = _cells(["broken"])
    assert P.cell_seconds(cell, costs, "s") == (None, "unknown", None)
    assert P.cell_seconds(cell, costs, "s", estimate_s=33.0)[:2] == (33.0, "estimated")
    (a,) = _cells(["linear"])
    assert P.cell_seconds(a, costs, "s")[:2] == (100.0, "measured")
    assert P.cell_seconds(a, costs, "another suite")[:2] == (100.0, "measured")  # the same model measured elsewhere
    more = {**costs, **_costs([_record("linear", s, 20.0, 2, 25.0, suite="other") for s in range(3)])}
    assert P.cell_seconds(a, more, "another suite")[0] == 25.0  # elsewhere: the most measured
    assert P.cell_seconds(a, more, "s.tuning")[0] == 100.0  # a tuning search of s: s's own budget first
    (short,) = _cells(["linear"], trainer={"max_epochs": 4})
    assert P.cell_seconds(short, costs, "s")[0] == 50.0  # 4 epochs x 10 s + 10 s
    (capped,) = _cells(["linear"], trainer={"max_time_s": 60})
    assert P.cell_seconds(capped, costs, "s")[0] == 70.0  # 60 s of training + 10 s
    # a measurement the time cap stopped: this cell trains to its own cap or max_epochs
    stopped = _costs([_record("linear", 0, 90.0, 9, 100.0, stop="time_cap")])
    (longer,) = _cells(["linear"], trainer={"max_time_s": 300})
    assert P.cell_seconds(longer, stopped, "s")[0] == 310.0  # min(50 x 10, 300) + 10


def test_predicted_seconds_are_this_machines_for_the_cells_it_can_predict(monkeypatch):
    monkeypatch.setattr(P, "this_device", lambda cuda=False: DEV)
    known, unknown = _cells(["linear", "broken"])
    recs = [_record("linear", 0, 90.0, 9, 100.0, suite="elsewhere")]  # the run's own records, already loaded
    assert P.predicted_seconds([known, unknown], "s", records=recs) == {known.cell_id: 100.0}
    monkeypatch.setattr(P, "this_device", lambda cuda=False: DEV if not cuda else "cpu-2core-x")
    gpu = type(known)(**{**known.__dict__, "config": {**known.config, "device": "cuda"}})
    assert P.predicted_seconds([gpu], "s", records=recs) == {}  # CUDA cells, no CUDA here: nothing to weigh by


def test_pool_size_never_gives_packed_gpu_workers_more_threads_than_cores():
    assert P.pool_size(None, 0, None, 2) == (1, 2, 1)
    assert P.pool_size(2, 0, None, 2) == (2, 1, 1)
    assert P.pool_size(None, 2, 4, 16) == (8, 2, 4)
    assert P.pool_size(None, 1, 8, 4) == (4, 1, 4)  # 8 asked, 4 cores: 4 at once
    assert P.pool_size(None, 2, 8, 4) == (4, 1, 2)  # spread over both GPUs
    for gpus in (1, 2, 4):
        for k in (1, 2, 3, 8, 16):
            for cores in (1, 2, 3, 16):
                workers, threads, per_gpu = P.pool_size(None, gpus, k, cores)
                assert workers * threads <= cores and workers <= gpus * per_gpu and per_gpu <= k


def test_the_plan_starts_longest_first_and_its_wall_is_the_list_schedule():
    register()
    cells = _cells(["linear", "broken"], seeds=2)  # config order: linear 0, linear 1, broken 0, broken 1
    costs = _costs([_record("linear", 0, 90.0, 9, 100.0),  # 100 s each
                    _record("broken", 0, 190.0, 19, 200.0), _record("broken", 1, 190.0, 19, 200.0)])  # 200 s each
    p = P.plan(cells, jobs=2, cells_per_gpu=None, costs=costs, suite="s", cores=2)
    by_id = {c.cell_id: c for c in cells}
    assert [(by_id[i].model, by_id[i].seed) for i in p.order] == [("broken", 0), ("broken", 1), ("linear", 0), ("linear", 1)]
    assert (p.workers, p.threads, p.cell_s, p.wall_s, p.unknown) == (2, 1, 600.0, 300.0, 0)
    # in config order the two 200 s cells would start last: 100 + 200 = 300 too; three jobs show the gain
    three = P.plan(cells[:1] + cells[2:], jobs=2, cells_per_gpu=None, costs=costs, suite="s", cores=2)
    assert three.wall_s == 300.0  # broken, broken | linear after 200 s: max(200, 200 + 100)
    lone = P.plan(cells[1:3], jobs=2, cells_per_gpu=None, costs=costs, suite="s", cores=2)
    assert lone.wall_s == 200.0
    one = P.plan(cells, jobs=1, cells_per_gpu=None, costs=costs, suite="s", cores=2)
    assert one.wall_s == 600.0 and one.threads == 2
    assert [(r.model, r.cells, r.seconds, r.source) for r in p.rows] == \
        [("toy/points/broken", 2, 200.0, "measured"), ("toy/points/linear", 2, 100.0, "measured")]


def test_longest_first_beats_the_config_order_and_unknowns_start_first():
    register()
    cells = _cells(["linear", "broken"], seeds=2)
    seconds = {cells[0].cell_id: 10.0, cells[1].cell_id: 10.0, cells[2].cell_id: 40.0, cells[3].cell_id: None}
    order = P.longest_first(cells, seconds)
    assert [c.cell_id for c in order] == [cells[3].cell_id, cells[2].cell_id, cells[0].cell_id, cells[1].cell_id]
    # two workers: config order 10, 10 | 40 after 10 -> 50; longest first 40 | 10, 10 -> 40
    assert P._makespan([(10.0, 1), (10.0, 1), (40.0, 1)], 2) == 50.0
    assert P._makespan([(40.0, 1), (10.0, 1), (10.0, 1)], 2) == 40.0
    assert P._makespan([(40.0, 1), (10.0, 2), (5.0, 1)], 2) == 55.0  # a 2-rank cell waits for both places


def test_estimates_and_unknowns_are_marked_in_the_table():
    register()
    cells = _cells(["linear", "broken"], seeds=2)
    costs = _costs([_record("linear", 0, 90.0, 9, 100.0)])
    text = P.format_plan(P.plan(cells, jobs=1, cells_per_gpu=None, costs=costs, suite="s", device=DEV, cores=2))
    assert f"plan on {DEV}: 4 cells, 1 at once x 2 thread(s)" in text
    assert "toy/points/linear" in text and "measured (s: 9 ep x 10 s + 10 s, 1 run(s))" in text
    assert "toy/points/broken" in text and "?  unknown" in text
    assert "total: at least 3.3 min wall" in text and "2 cells have no measured cost or estimate" in text
    est = P.format_plan(P.plan(cells, jobs=1, cells_per_gpu=None, costs={}, suite="s", estimate_s=1800.0, cores=2))
    assert "~30.0 min  estimated" in est and "total: ~2 h 00 min wall" in est and "~ = estimate (4 cells" in est
    none = P.format_plan(P.plan(cells, jobs=1, cells_per_gpu=None, costs={}, suite="s", cores=2))
    assert "total: unknown" in none and "4 cells have no measured cost" in none


@pytest.mark.parametrize("wall,seconds", [
    ("~1-2 h (at most 2.5 h), estimated for one H100", 7200.0), ("46 min, measured 2026-11-21 on a 2-core AMD EPYC", 2760.0),
    ("under 1 h, estimated for one H100", 3600.0), ("not stated", None), (None, None), ("soon, estimated", None),
])
def test_header_seconds_reads_the_upper_end_of_the_headers_wall(wall, seconds):
    assert P.header_seconds(wall) == seconds


def test_plan_run_shares_the_headers_wall_over_the_configs_cells(tmp_path, monkeypatch):
    register()
    monkeypatch.setattr(P, "REFERENCE_DIR", tmp_path / "reference")  # nothing measured on this machine
    cfg = validate_suite({"suite": "s", "seeds": 2, "trainer": {"max_epochs": 5, "accelerator": "cpu"},
                          "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]}, source="t.yaml")
    cells = expand(cfg)
    p = P.plan_run(cells, cfg, header_wall="~1-2 h, estimated for one H100")
    assert p.device == P.this_device() and p.estimated == 2 and p.wall_s == 7200.0
    assert P.plan_run(cells, cfg, jobs=2, header_wall="~1-2 h, estimated").wall_s == 3600.0
    assert P.plan_run(cells[:1], cfg, header_wall="2 h, estimated").wall_s == 3600.0  # --tasks: its share
    assert P.plan_run(cells, cfg).unknown == 2


def test_gpu_cells_planned_without_cuda_never_use_this_cpus_costs(tmp_path, monkeypatch):
    """A GPU config planned on a machine without CUDA (a Slurm login node): this CPU's measured
    costs of the same models must not stand in for a GPU's; the header's estimate does, marked."""
    import torch

    register()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = validate_suite({"suite": "s", "seeds": 2, "trainer": {"max_epochs": 5, "accelerator": "gpu"},
                          "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]}, source="t.yaml")
    cells = expand(cfg)
    cpu = P.this_device()
    (tmp_path / "reference" / cpu).mkdir(parents=True)
    costs = {"s/toy/points/linear": {"suite": "s", "task": "toy", "dataset": "points", "model": "linear", "cells": 2,
                                     "seconds_per_epoch": 1.0, "epochs_run": 5, "overhead_s": 1.0}}
    (tmp_path / "reference" / cpu / P.COSTS_FILE).write_text(json.dumps({"costs": costs}))
    monkeypatch.setattr(P, "REFERENCE_DIR", tmp_path / "reference")
    p = P.plan_run(cells, cfg, header_wall="~1 h, estimated for one H100")
    assert "GPU" in p.device and "none here" in p.device
    assert p.estimated == 2 and not [r for r in p.rows if r.source == "measured"] and p.wall_s == 3600.0


# ----------------------------------------------------------------------------- the pool's order
def test_the_local_pool_starts_its_cells_longest_first(tmp_path, monkeypatch):
    from benchmarks.run.launchers import CellJob, local

    register()
    cells = _cells(["linear", "broken"], seeds=2)
    ref = tmp_path / "reference"
    P.write_costs(_write(tmp_path / "r", [_record("linear", 0, 90.0, 9, 100.0), _record("broken", 0, 190.0, 19, 200.0)]),
                  ref / DEV / P.COSTS_FILE)
    monkeypatch.setattr(P, "REFERENCE_DIR", ref)
    monkeypatch.setattr(local, "this_device", lambda cuda=False: DEV)
    jobs = [CellJob(tmp_path / "out", c.cell_id, c.label, None, tmp_path / "cache") for c in cells]
    pool = local.LocalLauncher(None, argparse.Namespace(gpus=None, jobs=2, cells_per_gpu=None))
    lines: list[str] = []
    order = pool._order(jobs, {c.cell_id: c for c in cells}, "s", lines.append)
    assert [j.label.split("/")[2] for j in order] == ["broken seed=0", "broken seed=1", "linear seed=0", "linear seed=1"]
    assert lines == [f"local pool: cells start longest first (4 of 4 measured on {DEV}, the others first)"]
    (ref / DEV / P.COSTS_FILE).write_text("{broken")
    lines.clear()
    assert pool._order(jobs, {c.cell_id: c for c in cells}, "s", lines.append) == jobs  # config order, one line
    assert len(lines) == 1 and "not a readable costs file" in lines[0]


# ----------------------------------------------------------------------------- a resumed run
def test_a_resumed_runs_plan_counts_only_the_cells_it_would_train(tmp_path, monkeypatch):
    """Finished cells in the output folder are skipped as the runner skips them: an ok record
    always, a failed one unless ``retry_failed``; ``force`` plans them all again."""
    register()
    monkeypatch.setattr(P, "REFERENCE_DIR", tmp_path / "reference")
    monkeypatch.setattr(P, "this_device", lambda cuda=False: DEV)  # the records' machine, whatever runs the test
    cfg = validate_suite({"suite": "s", "seeds": 2, "trainer": {"max_epochs": 5, "accelerator": "cpu"},
                          "cells": [{"task": "toy", "dataset": "points", "models": ["linear", "broken"]}]}, source="t.yaml")
    cells = expand(cfg)  # linear 0, linear 1, broken 0, broken 1
    ok, failed = _record("linear", 0, 9.0, 9, 10.0), _record("broken", 0, 1.0, 1, 2.0, status="failed")
    ok["cell_id"], failed["cell_id"] = cells[0].cell_id, cells[2].cell_id
    out = _write(tmp_path / "out", [ok, failed])
    p = P.plan_run(cells, cfg, out=out)
    assert p.finished == 2 and sorted(p.order) == sorted([cells[1].cell_id, cells[3].cell_id])
    assert p.wall_s == 6.0 and p.unknown == 1  # linear seed 1: 5 epochs (its cap) x 1 s + 1 s; broken unknown
    text = P.format_plan(p)
    assert "2 cells to run (2 of 4 already finished: skipped)" in text
    assert P.plan_run(cells, cfg, out=out, retry_failed=True).finished == 1
    assert P.plan_run(cells, cfg, out=out, force=True).finished == 0
    assert P.plan_run(cells, cfg).finished == 0  # no output folder: every cell
    done = P.plan_run(cells[:1], cfg, out=out)
    assert done.finished == 1 and "nothing left to run" in P.format_plan(done)


def test_the_dry_run_of_a_resumed_run_marks_its_finished_cells(tmp_path, monkeypatch, capsys):
    import yaml

    from benchmarks.cli import main

    register()
    monkeypatch.setattr(P, "REFERENCE_DIR", tmp_path / "reference")
    raw = {"suite": "s", "seeds": 2, "trainer": {"max_epochs": 5, "accelerator": "cpu"},
           "cells": [{"task": "toy", "dataset": "points", "models": ["linear"]}]}
    cells = expand(validate_suite(raw, source="t.yaml"))
    rec = _record("linear", 0, 9.0, 9, 10.0)
    rec["cell_id"] = cells[0].cell_id
    out = _write(tmp_path / "out", [rec])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(tmp_path / "s.yaml"), "--dry-run", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.endswith("  finished") for ln in lines if cells[0].cell_id in ln or cells[1].cell_id in ln] == [True, False]
    assert any("1 cells to run (1 of 2 already finished: skipped)" in ln for ln in lines)
