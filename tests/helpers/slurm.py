"""A real single-node Slurm for tests: ``local_slurm.sh`` (beside this file) starts munged,
slurmctld and slurmd on localhost in a fresh state folder, on free ports, and stops them at the
end of the session. It apt-installs ``slurm-wlm`` and ``munge`` when they are missing (root and
Debian/Ubuntu). Tests that use :func:`local_slurm` skip, with the reason, where that cannot work.

By hand: ``tests/helpers/local_slurm.sh start`` (then ``eval "$(tests/helpers/local_slurm.sh env)"``
in each shell that submits jobs) and ``tests/helpers/local_slurm.sh stop``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

SCRIPT = Path(__file__).resolve().parent / "local_slurm.sh"
#: apt-get install on a fresh CI machine takes ~10 s; starting the daemons under a second
START_TIMEOUT_S = 300
FAKE_GPUS = 1


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _why_not() -> str | None:
    """Why a local Slurm cannot be started here, or ``None``."""
    if os.name != "posix" or not Path("/proc").is_dir():
        return "local Slurm needs Linux"
    if os.geteuid() != 0:
        return f"local Slurm needs root (slurmd); as root: {SCRIPT} start"
    have = all(shutil.which(b) for b in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo"))
    if not have and not shutil.which("apt-get"):
        return "slurm-wlm and munge are not installed and apt-get is not available to install them"
    return None


def _run(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[dict[str, str]]:
    """Start a throw-away Slurm; yields the environment its clients need (``SLURM_CONF`` and the
    ``sacct`` stand-in first on ``PATH``), which is also set in ``os.environ`` meanwhile (jobs
    inherit it from the submitting process)."""
    pytest.importorskip("submitit", reason="the slurm launcher needs submitit: pip install 'attnbench[slurm]'")
    why = _why_not()
    if why:
        pytest.skip(why)
    state = Path(tempfile.mkdtemp(prefix="attnbench-slurm-", dir="/tmp"))
    ctld, slurmd = _free_ports(2)
    # one fake GPU (gres/gpu on /dev/null): GPU requests are accepted and set CUDA_VISIBLE_DEVICES;
    # CPUs advertised: at least 4, so that a tiny suite's cells start together (mostly waiting on imports)
    env = {**os.environ, "LOCAL_SLURM_CTLD_PORT": str(ctld), "LOCAL_SLURM_SLURMD_PORT": str(slurmd),
           "LOCAL_SLURM_GPUS": str(FAKE_GPUS), "LOCAL_SLURM_CPUS": str(max(4, os.cpu_count() or 1))}
    try:
        started = _run("start", str(state), env=env, timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _run("stop", str(state), env=env, timeout=60)
        pytest.skip(f"local Slurm did not start within {START_TIMEOUT_S} s (state dir {state})")
    if started.returncode != 0:
        line = (started.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(f"local Slurm could not be started: {line}")
    client = {"SLURM_CONF": str(state / "slurm.conf"), "PATH": f"{state / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    saved = {k: os.environ.get(k) for k in client}
    os.environ.update(client)
    try:
        yield {**client, "state_dir": str(state)}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _run("stop", str(state), env=env, timeout=120)
        shutil.rmtree(state, ignore_errors=True)
