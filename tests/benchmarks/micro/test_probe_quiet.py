"""``attnbench profile`` / ``bench train``: the profiler's native log lines (written to file
descriptor 2 by torch's C++ code, one per pause/resume) are muted, and stderr works after."""

from __future__ import annotations

import os

import torch

from benchmarks.micro.train.probe import _native_stderr_muted, _toggle


def test_native_writes_to_fd2_are_muted_and_stderr_comes_back(capfd) -> None:
    with _native_stderr_muted():
        os.write(2, b"native noise\n")
    os.write(2, b"after\n")
    err = capfd.readouterr().err
    assert "native noise" not in err
    assert "after" in err


def test_pausing_and_resuming_the_profiler_prints_nothing(capfd) -> None:
    x = torch.randn(64, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            _toggle(prof, False)
            x @ x
            _toggle(prof, True)
            x @ x
    assert "Toggling" not in capfd.readouterr().err  # (start/stop of this bare profiler may log: not muted here)
    assert sum(e.count for e in prof.key_averages() if e.key == "aten::mm") == 3  # only the resumed ones
