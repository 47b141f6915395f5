"""benchmarks.run.measure: timer, memory, failure handling and isolation. Timing values are
never asserted (only counts and the statistics of given numbers)."""

import json
import math

import pytest

from benchmarks.run import measure
FAKES = "tests.helpers.fakes"


class FakeClock:
    """A timer whose time advances only when the fake function says so."""

    def __init__(self, durations_ms):
        self.now = 0.0
        self.durations = list(durations_ms)
        self.calls = 0

    def timer(self):
        return self.now

    def fn(self):
        self.now += self.durations[self.calls] / 1e3
        self.calls += 1


def test_summarize_statistics():
    s = measure.summarize([3.0, 1.0, 2.0, 10.0])
    assert s["median_ms"] == 2.5
    assert s["min_ms"] == 1.0 and s["max_ms"] == 10.0
    assert s["repeats"] == 4
    # inclusive quartiles of 1, 2, 3, 10: q1 = 1.75, q3 = 4.75
    assert math.isclose(s["iqr_ms"], 3.0)
    assert s["times_ms"] == [3.0, 1.0, 2.0, 10.0]  # in call order
    assert measure.summarize([5.0])["iqr_ms"] == 0.0
    with pytest.raises(ValueError):
        measure.summarize([])


def test_time_callable_warmup_and_repeats():
    clock = FakeClock([100, 50, 5, 1, 4, 2, 3])
    syncs = []
    res = measure.time_callable(clock.fn, warmup=2, repeats=5, sync=lambda: syncs.append(1), timer=clock.timer)
    assert clock.calls == 7  # 2 warm-up + 5 timed
    assert len(syncs) == 7  # synchronised after every call
    assert res["warmup"] == 2 and res["warmup_ms"] == pytest.approx([100, 50])
    assert res["times_ms"] == pytest.approx([5, 1, 4, 2, 3])  # warm-up calls are not timed
    assert res["median_ms"] == pytest.approx(3.0)
    assert res["min_ms"] == pytest.approx(1.0)


def test_time_callable_target_reduces_repeats_for_slow_calls():
    clock = FakeClock([2000] * 20)
    res = measure.time_callable(clock.fn, warmup=3, repeats=10, min_repeats=2, target_s=1.0, timer=clock.timer)
    assert res["warmup"] == 1  # warm-up stops once it took target_s
    assert res["repeats"] == 2  # never fewer than min_repeats
    assert clock.calls == 3
    clock = FakeClock([1] * 20)
    res = measure.time_callable(clock.fn, warmup=1, repeats=5, min_repeats=2, target_s=1.0, timer=clock.timer)
    assert res["repeats"] == 5  # fast calls keep every repeat


def test_time_callable_rejects_bad_counts():
    with pytest.raises(ValueError):
        measure.time_callable(lambda: None, repeats=0)


def test_peak_memory_cpu_sees_a_transient_allocation():
    torch = pytest.importorskip("torch")
    pm = measure.PeakMemory("cpu")
    pm.start()
    x = torch.ones(64 << 20, dtype=torch.uint8)  # 64 MiB, touched
    del x
    peak = pm.stop()
    assert peak >= 48 << 20
    assert pm.method.startswith("rss_hwm")


def test_measure_step_counts_calls_and_reports_memory():
    calls = []
    res = measure.measure_step(lambda: calls.append(1), device="cpu", warmup=2, repeats=3)
    assert len(calls) == 2 + 3 + 1  # warm-up, timed, one more for memory
    assert res["repeats"] == 3 and res["time_ms"] == res["median_ms"]
    assert res["peak_mem_bytes"] >= 0 and "mem_method" in res
    calls.clear()
    res = measure.measure_step(lambda: calls.append(1), device="cpu", warmup=2, repeats=3, timing=False)
    assert len(calls) == 2 + 1 and "time_ms" not in res and res["peak_mem_bytes"] >= 0  # memory-only worker
    calls.clear()
    res = measure.measure_step(lambda: calls.append(1), device="cpu", warmup=2, repeats=3, memory=False)
    assert len(calls) == 2 + 3 and "peak_mem_bytes" not in res and res["time_ms"] >= 0  # timing-only worker


def test_is_oom_error():
    assert measure.is_oom_error(MemoryError())
    assert measure.is_oom_error(RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 GB"))
    assert measure.is_oom_error(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert measure.is_oom_error(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate"))
    assert not measure.is_oom_error(RuntimeError("shape mismatch"))
    assert not measure.is_oom_error(ValueError("boom"))


def test_run_inline_turns_exceptions_into_records():
    from tests.helpers import fakes
    assert measure.run_inline(fakes.ok_point, {"value": 2.0})["status"] == "ok"
    rec = measure.run_inline(f"{FAKES}:oom_point")
    assert rec["status"] == "oom" and "not enough memory" in rec["reason"]
    rec = measure.run_inline(f"{FAKES}:error_point")
    assert rec["status"] == "error" and "ValueError: boom" in rec["reason"]


def test_run_isolated_ok_and_failures():
    rec = measure.run_isolated(f"{FAKES}:ok_point", {"value": 3.0})
    assert rec["status"] == "ok" and rec["time_ms"] == 3.0
    rec = measure.run_isolated(f"{FAKES}:oom_point")
    assert rec["status"] == "oom" and "not enough memory" in rec["reason"]
    rec = measure.run_isolated(f"{FAKES}:error_point")
    assert rec["status"] == "error" and "boom" in rec["reason"]


def test_run_isolated_memory_cap_makes_a_clean_oom():
    # 2 GiB allowed, 8 GiB asked: refused by the address-space cap, never near the OOM killer
    rec = measure.run_isolated(f"{FAKES}:alloc_bytes_point", {"nbytes": 8 << 30}, mem_cap_bytes=2 << 30)
    assert rec["status"] == "oom", rec
    rec = measure.run_isolated(
        f"{FAKES}:alloc_torch_point", {"nbytes": 8 << 30}, mem_cap_bytes=2 << 30, preload=["torch"]
    )
    assert rec["status"] == "oom", rec
    rec = measure.run_isolated(f"{FAKES}:alloc_bytes_point", {"nbytes": 16 << 20}, mem_cap_bytes=2 << 30)
    assert rec["status"] == "ok" and rec["allocated"] == 16 << 20


def test_run_isolated_timeout_and_kill():
    rec = measure.run_isolated(f"{FAKES}:sleep_point", {"seconds": 30}, timeout_s=1.5)
    assert rec["status"] == "timeout"
    rec = measure.run_isolated(f"{FAKES}:sigkill_point")
    assert rec["status"] == "oom" and "SIGKILL" in rec["reason"]


def test_atomic_write_json(tmp_path):
    path = tmp_path / "sub" / "r.json"
    measure.atomic_write_json(path, {"a": 1, "nan": float("nan"), "inf": [float("inf")]})
    assert json.loads(path.read_text()) == {"a": 1, "nan": None, "inf": [None]}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temp file left


def test_collect_environment_fields():
    env = measure.collect_environment("cpu")
    for key in ("python", "torch", "torch_geometric", "cuda", "device_name", "cpu_model", "cpu_count",
                "git_commit", "git_dirty", "date"):
        assert key in env
