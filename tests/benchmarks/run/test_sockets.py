"""Runs that start in any folder (issue 50): a ``TMPDIR``, ``--out`` or ``--cache-dir`` too long
for a Unix socket's 107 bytes moves only the sockets (forkserver, a cell's listeners, MPS, Ray)
to a short private folder; where none exists, one line names the path and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from benchmarks.run import sockets as S
from benchmarks.run.worker import PLUGINS_ENV

REPO = Path(__file__).resolve().parents[3]


def _long(base: Path, chars: int) -> Path:
    """A folder under ``base`` whose absolute path has at least ``chars`` characters."""
    need = max(1, chars - len(str(base)) - 1)
    parts, left = [], need
    while left > 0:  # each part at most 100 characters (a name's limit is 255)
        parts.append("x" * min(100, left))
        left -= len(parts[-1]) + 1
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    assert len(str(path)) >= chars
    return path


def test_fits_counts_bytes_against_sun_path():
    room = 10
    ok = "/" + "a" * (S.SUN_PATH_MAX - 2 - room)
    assert S.fits(ok, room) and not S.fits(ok + "b", room)


def test_short_base_skips_a_long_tmpdir_and_says_one_line_when_nothing_fits(tmp_path, monkeypatch):
    long = _long(tmp_path, 120)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    base = S.short_base(S.PYMP_ROOM, "x")
    assert base in S._CANDIDATES and S.fits(base, S.PYMP_ROOM)
    monkeypatch.setattr(S, "_CANDIDATES", (str(long),))
    with pytest.raises(S.SocketPathError) as info:
        S.short_base(S.PYMP_ROOM, "the local pool")
    msg = str(info.value)
    assert "\n" not in msg and str(long) in msg and "TMPDIR=/tmp" in msg and "the local pool" in msg


def _in_child(code: str, tmpdir: Path) -> str:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def test_the_pool_tempdir_fits_a_socket_under_a_long_tmpdir_and_stays_under_a_short_one(tmp_path):
    code = ("import tempfile; from multiprocessing import connection; from benchmarks.run import sockets as S; "
            "d = S.pool_tempdir(); a = connection.arbitrary_address('AF_UNIX'); "
            "l = connection.Listener(a); l.close(); print(d); print(tempfile.gettempdir())")
    long = _long(tmp_path, 120)
    folder, gettempdir = _in_child(code, long).splitlines()
    assert gettempdir == str(long)  # only the sockets move: everything else keeps TMPDIR
    assert not folder.startswith(str(long)) and S.fits(folder, S.LISTENER_ROOM)
    short = Path(tempfile.mkdtemp(prefix="s-"))
    try:
        folder, _ = _in_child(code, short).splitlines()
        assert Path(folder).parent == short  # a TMPDIR that fits is used as it is
    finally:
        os.rmdir(short)


def test_ray_gets_a_short_temp_dir_only_where_its_own_is_too_long(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", "/tmp")
    assert S.ray_temp_dir() is None
    monkeypatch.setenv("TMPDIR", str(_long(tmp_path, 80)))
    got = S.ray_temp_dir()
    assert got is not None and S.fits(got, S.RAY_ROOM)


SUITE = """
suite: anywhere
seeds: 2
trainer: {max_epochs: 2, accelerator: cpu, deterministic: true}
cells:
  - task: toy
    dataset: points
    models: [linear]
"""


def test_a_run_with_a_long_tmpdir_out_and_cache_finishes_and_reports(tmp_path):
    """The issue's own check, as a user runs it: its own process, so that the forkserver starts
    under the long TMPDIR (in the test process it may run already)."""
    long_tmp = _long(tmp_path / "t", 120)
    out = _long(tmp_path / "o", 210)
    cache = _long(tmp_path / "c", 210)
    cfg = tmp_path / "suite.yaml"
    cfg.write_text(SUITE)
    env = {**os.environ, "TMPDIR": str(long_tmp), PLUGINS_ENV: "tests.helpers.toy_task"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "run", str(cfg), "--out", str(out), "--cache-dir",
                           str(cache), "--jobs", "2"], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "AF_UNIX" not in proc.stdout + proc.stderr
    recs = [json.loads(p.read_text()) for p in (out / "runs").rglob("*.json")]
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs)
    assert (out / "REPORT.md").exists() and (out / "report.html").exists()


def test_mps_pipes_go_to_a_short_folder_when_tmpdir_and_out_are_both_long(tmp_path, monkeypatch):
    from benchmarks.run.launchers import mps
    from tests.benchmarks.run.mps_fake import install_fake

    short = Path(tempfile.mkdtemp(prefix="mps-"))  # the fake's own files
    try:
        install_fake(short, monkeypatch)
        monkeypatch.setattr(tempfile, "tempdir", str(_long(tmp_path, 120)))
        out = _long(tmp_path / "o", 150)
        with mps.mps_daemons(["0"], out, lambda m: None) as envs:
            pipe = Path(envs["0"][mps.PIPE_ENV])
            assert len(str(pipe)) <= mps.MAX_PIPE_CHARS and (pipe / "control").exists()
        assert not pipe.exists()
    finally:
        import shutil

        shutil.rmtree(short, ignore_errors=True)
