"""``attnbench --version``: the installed package's version, else pyproject's (issue 45)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from benchmarks.cli import main, version

REPO = Path(__file__).resolve().parents[3]


def _pyproject_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)["project"]["version"]


def test_version_prints_the_installed_version_and_exits_0(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out == f"attnbench {importlib.metadata.version('attnbench')}\n"
    assert re.fullmatch(r"attnbench \d+\.\d+\.\d+\S*\n", out)


def test_version_without_package_metadata_reads_pyproject(monkeypatch):
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert version() == _pyproject_version()
