"""The driver's progress over all workers (issue 16): counted from the output folder (records
written since the run started, live claims), a bar on a terminal, plain lines in a log."""

from __future__ import annotations

import io
import time

from benchmarks.run import claims as C
from benchmarks.run import records as R
from benchmarks.run.progress import RUNNING_CREDIT, SuiteProgress, count_cells, finished_share, format_counts
from benchmarks.config.suite import Cell
from benchmarks.run.worker import record_target


def _cells(n: int) -> list[Cell]:
    return [Cell(f"c{i:011d}", "toy", "points", "linear", "other", None, i, {}) for i in range(n)]


def _write(out, cell, status, started="t0"):
    R.write_json_atomic(record_target(out, cell), {"cell_id": cell.cell_id, "status": status, "started": started,
                                                   "finished": started})


def test_counts_only_what_this_run_wrote_and_live_claims(tmp_path):
    cells = _cells(5)
    _write(tmp_path, cells[0], "ok", "old")  # finished before the run: seen, so not this run's
    seen = {c.cell_id: None for c in cells}
    seen[cells[0].cell_id] = {"status": "ok", "started": "old", "finished": "old"}
    assert count_cells(tmp_path, cells, seen) == {"done": 0, "failed": 0, "running": 0, "pending": 5}
    _write(tmp_path, cells[1], "ok")
    _write(tmp_path, cells[2], "failed")
    held = C.claim(C.claim_path(record_target(tmp_path, cells[3])))  # a live worker (this process)
    try:
        assert count_cells(tmp_path, cells, seen) == {"done": 1, "failed": 1, "running": 1, "pending": 2}
    finally:
        held.release()
    _write(tmp_path, cells[0], "ok", "new")  # rerun (--force) by this run
    assert count_cells(tmp_path, cells, seen)["done"] == 2


def test_format_counts_gives_an_eta_from_the_rate_so_far():
    c = {"done": 3, "failed": 1, "running": 2, "pending": 4}
    assert format_counts(c, 10, 120.0) == "4/10 finished (1 failed), 2 running, 4 pending, ETA 3.0 min"
    assert "ETA" not in format_counts({"done": 0, "failed": 0, "running": 1, "pending": 1}, 2, 5.0)


def test_the_eta_weighs_the_cells_by_their_predicted_seconds():
    cells = _cells(4)
    weights = {cells[0].cell_id: 60.0, cells[1].cell_id: 15.0, cells[2].cell_id: 15.0}  # the 4th: unknown
    assert finished_share([cells[0].cell_id], cells, weights) == 0.5  # 60 of 60 + 15 + 15 + 30 (the mean of the known)
    assert finished_share([cells[0].cell_id], cells, None) is None and finished_share([], cells, {}) is None
    c = {"done": 1, "failed": 0, "running": 2, "pending": 1}
    # the longest cell first: its 10 min were half the work, not a quarter
    assert format_counts(c, 4, 600.0, 0.5).endswith("ETA 10.0 min")
    assert format_counts(c, 4, 600.0).endswith("ETA 30.0 min")  # without weights: by the count of cells


def test_running_cells_count_for_the_time_they_have_run_at_most_most_of_their_weight():
    cells = _cells(4)
    a, b, c, d = (x.cell_id for x in cells)
    weights = {a: 60.0, b: 15.0, c: 15.0}  # d: unknown, weighs 30 (the mean); 120 s in all
    now = 10_000.0
    assert finished_share([a], cells, weights, running={b: now - 10}, now=now) == 70 / 120
    # only what ran since this run started counts (another driver's earlier work is not this run's pace)
    assert finished_share([a], cells, weights, running={d: now - 100}, since=now - 5, now=now) == 65 / 120
    # a cell past its prediction is not done: at most RUNNING_CREDIT of its weight
    assert finished_share([a], cells, weights, running={b: now - 1000}, now=now) == (60 + 15 * RUNNING_CREDIT) / 120
    assert finished_share([a], cells, weights, running={b: now - 10}) == 0.5  # no clock given: finished only
    assert finished_share([], cells, None, running={b: now - 10}, now=now) is None
    # so an ETA comes before the first cell finishes, and it stops growing while a long cell runs
    first = {"done": 0, "failed": 0, "running": 1, "pending": 3}
    assert format_counts(first, 4, 30.0, 30 / 120).endswith("ETA 1.5 min")
    # (60 s for the first cell, then d runs: at its predicted pace 60 - t seconds are left)
    mid = {"done": 1, "failed": 0, "running": 1, "pending": 2}
    eta = [format_counts(mid, 4, 60.0 + t, finished_share([a], cells, weights, running={d: now}, now=now + t))
           for t in (10, 25)]
    assert [line.rsplit("ETA ", 1)[1] for line in eta] == ["0.8 min", "0.6 min"]
    grew = [format_counts(mid, 4, 60.0 + t, finished_share([a], cells, weights)) for t in (10, 25)]
    assert [line.rsplit("ETA ", 1)[1] for line in grew] == ["1.2 min", "1.4 min"]  # finished cells only


def test_a_running_cells_start_comes_from_its_claim(tmp_path):
    cells, seen = _cells(2), {}
    held = C.claim(C.claim_path(record_target(tmp_path, cells[0])))
    try:
        c = count_cells(tmp_path, cells, seen)
        assert c["running"] == 1 and set(c.running_since) == {cells[0].cell_id}
        assert abs(c.running_since[cells[0].cell_id] - time.time()) < 5
    finally:
        held.release()
    assert count_cells(tmp_path, cells, seen).running_since == {}


def test_a_log_line_when_the_counts_change_or_at_the_heartbeat(tmp_path, monkeypatch):
    import benchmarks.run.progress as progress

    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    cells, lines = _cells(3), []
    prog = SuiteProgress(tmp_path, cells, {c.cell_id: None for c in cells}, lines.append, every_s=10,
                         heartbeat_s=300, stream=io.StringIO(), bar=None)
    now[0] = 20.0
    _write(tmp_path, cells[0], "ok")
    prog.update()
    for t in (40.0, 100.0, 250.0):  # only the ETA moves: no line before the heartbeat
        now[0] = t
        prog.update()
    assert len(lines) == 1
    now[0] = 330.0
    prog.update()
    assert len(lines) == 2 and lines[1].strip().startswith("progress: 1/3 finished")


def test_plain_lines_when_not_a_terminal(tmp_path):
    cells, lines = _cells(2), []
    prog = SuiteProgress(tmp_path, cells, {c.cell_id: None for c in cells}, lines.append, every_s=0,
                         stream=io.StringIO(), bar=None)
    assert prog.bar is None
    prog.update()
    _write(tmp_path, cells[0], "ok")
    prog.update()
    prog.update()  # nothing changed: no new line
    assert [ln.strip() for ln in lines] == ["progress: 0/2 finished (0 failed), 0 running, 2 pending",
                                           lines[1].strip()]
    assert lines[1].strip().startswith("progress: 1/2 finished (0 failed), 0 running, 1 pending, ETA")
    prog.log("a log line")
    assert lines[-1] == "a log line"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_with_log_lines_above_it(tmp_path, capsys):
    cells, lines, tty = _cells(3), [], _Tty()
    with SuiteProgress(tmp_path, cells, {c.cell_id: None for c in cells}, lines.append, poll_s=0.05,
                       stream=tty) as prog:
        assert prog.bar is not None
        prog.log("[1/3] toy/points/linear seed=0")
        _write(tmp_path, cells[0], "ok")
        _write(tmp_path, cells[1], "failed")
    text = tty.getvalue()
    # printed by the bar (on stdout, cleared and redrawn around it), not by the plain log function
    assert "[1/3] toy/points/linear seed=0" in capsys.readouterr().out and not lines
    assert "2/3" in text and "1 failed, 0 running, 1 pending" in text
