"""Test helpers for CUDA MPS without CUDA: a fake ``nvidia-cuda-mps-control`` put on PATH that logs
each call (its command, ``CUDA_VISIBLE_DEVICES`` and MPS folders) as one JSON line, keeps a
``control`` file in the pipe folder while "running" and an ``alive`` one beside it (a ``control``
without ``alive`` is a stale pipe), and answers ``get_server_list`` only while alive;
and a toy model, registered on the toy task by importing this module (as a plug-in), that writes
the MPS variables its worker process got."""

from __future__ import annotations

import json
import os
from pathlib import Path

from torch import nn

from tasks.common.registry import ModelSpec
from tests.helpers.toy_task import register as register_toy

#: a model's workers append their env here (an ``ATTNBENCH_`` variable: the pool passes it on)
PROBE_ENV = "ATTNBENCH_TOY_MPS_ENV"
WATCHED = ("CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")

FAKE = """#!/bin/sh
# a fake nvidia-cuda-mps-control: one JSON line per call in {log}
pipe="${{CUDA_MPS_PIPE_DIRECTORY:-{default}}}"
if [ "$1" = "-d" ]; then cmd=start; else read -r cmd; fi
printf '{{"cmd": "%s", "gpu": "%s", "pipe": "%s", "log": "%s"}}\\n' "$cmd" "$CUDA_VISIBLE_DEVICES" \\
    "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY" >> "{log}"
case "$cmd" in
  start) [ -n "$FAKE_MPS_FAIL" ] && {{ echo "fake: cannot start" >&2; exit 3; }}
         mkdir -p "$pipe" && : > "$pipe/control" && : > "$pipe/alive" ;;
  quit) rm -f "$pipe/control" "$pipe/alive" ;;
  get_server_list) [ -e "$pipe/alive" ] || exit 1 ;;
esac
exit 0
"""


def serve(pipe: Path) -> None:
    """A live daemon (of someone else) in ``pipe``, as the fake keeps one."""
    pipe.mkdir(parents=True, exist_ok=True)
    (pipe / "control").touch()
    (pipe / "alive").touch()


def install_fake(tmp_path: Path, monkeypatch, default_pipe: Path | None = None) -> Path:
    """The fake on PATH (before the rest), no MPS variables set, ``/tmp/nvidia-mps`` replaced by
    ``default_pipe`` (a folder of the test's own); returns the log of its calls."""
    from benchmarks.run.launchers import mps

    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "mps_calls.jsonl"
    default = default_pipe or tmp_path / "default-mps"
    script = bin_dir / mps.MPS_CONTROL
    script.write_text(FAKE.format(log=log, default=default))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in (mps.PIPE_ENV, mps.LOG_ENV, "FAKE_MPS_FAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(mps, "DEFAULT_PIPE", str(default))
    return log


def calls(log: Path) -> list[dict[str, str]]:
    """The fake's calls so far, in order."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _probe(info: dict, hidden: int = 0) -> nn.Module:
    path = os.environ.get(PROBE_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({k: os.environ.get(k) for k in WATCHED}) + "\n")
    return nn.Linear(info["dim"], 2)


def register() -> None:
    """The toy task with the ``mps_probe`` model."""
    task = register_toy()
    if "mps_probe" not in task.models:
        task.models.register("mps_probe", ModelSpec("mps_probe", "other", _probe, {"hidden": 0}))


register()
