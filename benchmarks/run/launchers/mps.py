"""CUDA MPS for the local pool's packed cells (``--cells-per-gpu K``, K > 1): one MPS control
daemon per GPU for the run, so the K cells on a GPU share one context and their kernels overlap
instead of time-slicing the GPU.

:func:`mps_daemons` is a context manager: on entry it starts, for each GPU ``i``,
``nvidia-cuda-mps-control -d`` with ``CUDA_VISIBLE_DEVICES=i`` and its pipe and log folders under
the run's output (``OUT/mps/gpu<i>/pipe``, ``OUT/mps/gpu<i>/log``); it yields ``gpu -> env``, the
variables each worker on that GPU gets; on exit (normal end, an error, Ctrl-C or SIGTERM, which the
CLI turns into ``KeyboardInterrupt``) it stops the daemons it started (``echo quit |
nvidia-cuda-mps-control`` with the same env). Stop the workers first: ``quit`` waits for its clients.

* A daemon someone else runs (``$CUDA_MPS_PIPE_DIRECTORY``, else ``/tmp/nvidia-mps``, with a
  control pipe that answers) is used for every GPU and never stopped; so is a live daemon in
  ``OUT/mps/gpu<i>`` that another run sharing the output folder started. One there that a
  killed run of this machine left behind (its ``driver`` file names a dead process here) is
  adopted: used, and stopped at the end.
* Without ``nvidia-cuda-mps-control`` on PATH the run says so in one line and goes on without MPS
  (the K cells then time-slice the GPU); a daemon that does not start is one line and its GPU
  goes on without it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from benchmarks.run.sockets import SUN_PATH_MAX, short_folder

__all__ = ["MPS_CONTROL", "PIPE_ENV", "LOG_ENV", "DEFAULT_PIPE", "mps_daemons", "served"]

MPS_CONTROL = "nvidia-cuda-mps-control"
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
#: where clients look for a daemon when ``$CUDA_MPS_PIPE_DIRECTORY`` is not set
DEFAULT_PIPE = "/tmp/nvidia-mps"
#: the daemons' UNIX sockets live in the pipe folder: a longer path than this goes to a short
#: temporary folder instead (a socket path is limited to 107 bytes)
MAX_PIPE_CHARS = 80
TIMEOUT_S = 30.0


def _control(binary: str, env: dict[str, str], command: str | None, timeout_s: float,
             stderr_to: Path | None = None) -> tuple[int, str]:
    """Run ``nvidia-cuda-mps-control`` (``-d`` when ``command`` is None, else ``command`` on its
    stdin) with ``env`` added; returns ``(exit code, the tail of what it said)``, -1 when it could
    not run or did not answer in ``timeout_s``. Its output goes to a file, not a pipe: a daemon
    that keeps the pipe open would hold ``run`` until the timeout."""
    full = {**os.environ, **env}
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(open(stderr_to, "a+b")) if stderr_to else stack.enter_context(tempfile.TemporaryFile())
        try:
            res = subprocess.run([binary, "-d"] if command is None else [binary], input=None if command is None
                                 else (command + "\n").encode(), stdout=err, stderr=err, env=full, timeout=timeout_s)
            code = res.returncode
        except subprocess.TimeoutExpired:
            code = -1
        except OSError as exc:
            return -1, str(exc)
        err.flush()
        err.seek(0)
        tail = err.read()[-300:].decode(errors="replace").strip().splitlines()
    return code, (tail[-1] if tail else "")


def served(binary: str, pipe: Path | str, timeout_s: float = 10.0) -> bool:
    """Whether a control daemon serves ``pipe``: its control pipe is there and it answers."""
    if not (Path(pipe) / "control").exists():
        return False
    return _control(binary, {PIPE_ENV: str(pipe)}, "get_server_list", timeout_s)[0] == 0


def _orphan(folder: Path) -> bool:
    """Whether the daemon in ``folder`` was started by a run of this machine that is gone."""
    try:
        host, pid = (folder / "driver").read_text(encoding="utf-8").strip().rsplit(":", 1)
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return host == socket.gethostname()
    except (OSError, ValueError):
        return False
    return False


def _pipe_folder(folder: Path, gpu: str, log: Callable[[str], None]) -> Path:
    """``folder/pipe``, or a short temporary folder where that path is too long for a socket."""
    pipe = folder / "pipe"
    if len(str(pipe.resolve())) <= MAX_PIPE_CHARS:
        return pipe
    # TMPDIR itself may be too long (per-job scratch): then /tmp, /var/tmp or /dev/shm
    short = Path(short_folder(f"attnbench-mps{gpu}-", SUN_PATH_MAX - 1 - MAX_PIPE_CHARS, f"the MPS daemon of GPU {gpu}"))
    (folder / "pipe.path").write_text(str(short) + "\n", encoding="utf-8")
    log(f"MPS: the pipe folder under {folder} is too long for its sockets; GPU {gpu} uses {short}")
    return short


@contextlib.contextmanager
def mps_daemons(gpus: list[str], out: Path | str, log: Callable[[str], None] = print, *,
                timeout_s: float = TIMEOUT_S) -> Iterator[dict[str, dict[str, str]]]:
    """MPS for the run on ``gpus`` (indices as strings): yields ``gpu -> env`` for the workers of
    each GPU that has a daemon (empty where MPS is missing); stops on exit the daemons it
    started, whatever ends the run."""
    binary = shutil.which(MPS_CONTROL)
    if binary is None:
        log(f"MPS: {MPS_CONTROL} not found on PATH: the cells packed on each GPU time-slice it without "
            "MPS (records say mps: false)")
        yield {}
        return
    theirs = os.environ.get(PIPE_ENV) or DEFAULT_PIPE
    if served(binary, theirs):
        env = {PIPE_ENV: theirs, **({LOG_ENV: os.environ[LOG_ENV]} if os.environ.get(LOG_ENV) else {})}
        log(f"MPS: using the daemon already serving {theirs} for GPU(s) {','.join(gpus)} (not started or "
            "stopped by this run)")
        yield {g: dict(env) for g in gpus}
        return
    envs: dict[str, dict[str, str]] = {}
    ours: list[tuple[str, dict[str, str], Path]] = []  # (gpu, env, folder): stopped at the end
    try:
        for gpu in gpus:
            folder = Path(out) / "mps" / f"gpu{gpu}"
            (folder / "log").mkdir(parents=True, exist_ok=True)
            recorded = folder / "pipe.path"
            pipe = Path(recorded.read_text(encoding="utf-8").strip()) if recorded.exists() else folder / "pipe"
            env = {PIPE_ENV: str(pipe), LOG_ENV: str(folder / "log")}
            if served(binary, pipe):
                if _orphan(folder):
                    log(f"MPS: GPU {gpu}: adopted the daemon a killed run left in {folder} (stopped at the end)")
                    ours.append((gpu, env, folder))
                else:
                    log(f"MPS: GPU {gpu}: using the daemon another run started in {folder} (not stopped by this run)")
                envs[gpu] = env
                continue
            pipe = _pipe_folder(folder, gpu, log)
            pipe.mkdir(parents=True, exist_ok=True)
            env[PIPE_ENV] = str(pipe)
            code, said = _control(binary, {**env, "CUDA_VISIBLE_DEVICES": gpu}, None, timeout_s,
                                  stderr_to=folder / "log" / "start.txt")
            if code != 0:
                log(f"MPS: the daemon for GPU {gpu} did not start (exit code {code}{': ' + said if said else ''}): "
                    "its cells share the GPU without MPS")
                continue
            (folder / "driver").write_text(f"{socket.gethostname()}:{os.getpid()}\n", encoding="utf-8")
            ours.append((gpu, env, folder))
            envs[gpu] = env
        if ours:
            log(f"MPS: a daemon per GPU ({','.join(g for g, _, _ in ours)}), pipes and logs under {Path(out) / 'mps'}")
        yield envs
    finally:
        _stop(binary, ours, log, timeout_s)


def _stop(binary: str, ours: list[tuple[str, dict[str, str], Path]], log: Callable[[str], None],
          timeout_s: float) -> None:
    """``quit`` to every daemon this run started; a Ctrl-C meanwhile is raised after the last."""
    interrupted: BaseException | None = None
    for gpu, env, folder in ours:
        try:
            code, said = _control(binary, {**env, "CUDA_VISIBLE_DEVICES": gpu}, "quit", timeout_s)
            if code != 0:
                log(f"MPS: stopping the daemon of GPU {gpu} failed (exit code {code}{': ' + said if said else ''}); "
                    f"stop it with: echo quit | {PIPE_ENV}={env[PIPE_ENV]} {MPS_CONTROL}")
            with contextlib.suppress(OSError):
                (folder / "driver").unlink()
            pipe = Path(env[PIPE_ENV])
            if not pipe.is_relative_to(folder):  # a short temporary folder: ours to remove
                shutil.rmtree(pipe, ignore_errors=True)
                with contextlib.suppress(OSError):
                    (folder / "pipe.path").unlink()
        except KeyboardInterrupt as err:
            interrupted = err
    if interrupted is not None:
        raise interrupted
