"""Layering: packages import only downwards (attn_core < tasks < benchmarks.config < run < report,
micro < cli), the report and the domains never reach up into the command line, and the attention
core stays free of Lightning. Checked in the source (an import inside a function counts too) and
in a fresh interpreter (what importing a module really pulls in)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
#: an import statement of benchmarks.cli (not a mention in a docstring)
CLI_IMPORT = re.compile(r"^\s*(?:import\s+benchmarks\.cli\b|from\s+benchmarks\.cli\s+import\b"
                        r"|from\s+benchmarks\s+import\s+[^#\n]*\bcli\b)", re.MULTILINE)


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _report_modules() -> list[str]:
    """Every module of benchmarks/report/, the domains' report sections and micro-benchmarks."""
    paths = sorted((ROOT / "benchmarks" / "report").glob("*.py"))
    paths += sorted(ROOT.glob("tasks/*/report.py")) + sorted(ROOT.glob("tasks/*/bench.py"))
    return [_module(p) for p in paths]


def _fresh(code: str) -> Any:
    """Run ``code`` in a fresh interpreter at the repository root; it prints one JSON object."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_no_source_under_report_or_tasks_imports_the_cli():
    sources = sorted((ROOT / "benchmarks" / "report").rglob("*.py")) + sorted((ROOT / "tasks").rglob("*.py"))
    offenders = [str(p.relative_to(ROOT)) for p in sources if CLI_IMPORT.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_cli_import_pattern_matches_imports_only():
    assert CLI_IMPORT.search("    from benchmarks.cli import CliError\n")
    assert CLI_IMPORT.search("from benchmarks import cli, report\n")
    assert not CLI_IMPORT.search('"""This package never imports :mod:`benchmarks.cli`."""\n')


def test_report_and_domain_modules_do_not_import_the_cli():
    """Each module imported in turn in one fresh interpreter: the first one after which
    ``benchmarks.cli`` is loaded is named."""
    modules = _report_modules()
    assert "benchmarks.report.build" in modules and "tasks.speech.report" in modules
    found = _fresh(
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    if 'benchmarks.cli' in sys.modules:\n"
        "        print(json.dumps({'culprit': name})); break\n"
        "else:\n"
        "    print(json.dumps({'culprit': None}))\n")
    assert found["culprit"] is None


def test_the_report_package_alone_imports_neither_torch_nor_lightning():
    found = _fresh("import json, sys, benchmarks.report\n"
                   "print(json.dumps(sorted(m for m in ('torch', 'lightning', 'benchmarks.cli') if m in sys.modules)))")
    assert found == []


def test_attn_core_imports_no_lightning():
    found = _fresh(
        "import importlib, json, pkgutil, sys, attn_core\n"
        "for info in pkgutil.walk_packages(attn_core.__path__, 'attn_core.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('lightning', 'pytorch_lightning', 'lightning_fabric'))))\n")
    assert found == []


# ----------------------------------------------------------------------------- package layers
#: package -> the packages it must never import (directly or inside a function). A domain's
#: ``report.py``/``bench.py`` plug into the report and the micro-benchmarks, so they are their own unit.
FORBIDDEN = {
    "attn_core": {"tasks", "tasks:ext", "benchmarks.config", "benchmarks.run", "benchmarks.report", "benchmarks.micro",
                  "benchmarks.cli"},
    "tasks": {"benchmarks.config", "benchmarks.run", "benchmarks.report", "benchmarks.micro", "benchmarks.cli"},
    "benchmarks.config": {"benchmarks.run", "benchmarks.report", "benchmarks.micro", "benchmarks.cli"},
    "benchmarks.run": {"benchmarks.report", "benchmarks.micro", "benchmarks.cli"},
    "benchmarks.report": {"benchmarks.micro", "benchmarks.cli"},
    "benchmarks.micro": {"benchmarks.cli"},
    "tasks:ext": {"benchmarks.cli"},
}


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "benchmarks":
        return "benchmarks." + parts[1] if len(parts) > 1 and parts[1] in ("cli", "config", "run", "report", "micro") \
            else "benchmarks"
    if parts[0] == "tasks":
        return "tasks:ext" if len(parts) > 2 and parts[2] in ("report", "bench") else "tasks"
    return "attn_core" if parts[0] == "attn_core" else None


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def _bad_imports(root: Path, tops: tuple[str, ...], bad: Callable[[str, str], str | None]) -> list[str]:
    """``"<file> imports <name><why>"`` for every import under ``root/<top>`` that ``bad(module, name)``
    objects to (it returns the reason suffix, or ``None``)."""
    found = []
    for path in sorted(p for top in tops for p in (root / top).rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        found += [f"{path.relative_to(root)} imports {name}{why}" for name in _imports(path)
                  if (why := bad(module, name)) is not None]
    return sorted(set(found))


def _upward(module: str, name: str) -> str | None:
    here, there = _unit(module), _unit(name)
    return f" ({here} -> {there})" if there in FORBIDDEN.get(here, ()) else None


def _layer_violations(root: Path) -> list[str]:
    return _bad_imports(root, ("attn_core", "tasks", "benchmarks"), _upward)


def test_packages_import_only_downwards():
    assert _layer_violations(ROOT) == []


def test_the_layer_check_finds_an_upward_import(tmp_path):
    """The check can fail: config reaching up into the runner, inside a function."""
    (tmp_path / "benchmarks" / "config").mkdir(parents=True)
    (tmp_path / "benchmarks" / "config" / "x.py").write_text("def f():\n    from benchmarks.run import runner\n")
    (tmp_path / "attn_core").mkdir()
    (tmp_path / "attn_core" / "y.py").write_text("import tasks.common.registry\n")
    (tmp_path / "tasks" / "speech").mkdir(parents=True)
    (tmp_path / "tasks" / "speech" / "report.py").write_text("from benchmarks.report import Table\n")
    assert _layer_violations(tmp_path) == [
        "attn_core/y.py imports tasks.common.registry (attn_core -> tasks)",
        "benchmarks/config/x.py imports benchmarks.run (benchmarks.config -> benchmarks.run)",
        "benchmarks/config/x.py imports benchmarks.run.runner (benchmarks.config -> benchmarks.run)",
    ]


def _test_file_imports(root: Path) -> list[str]:
    """Imports of one test module by another (shared fixtures belong in tests/helpers/)."""
    def a_test_module(module: str, name: str) -> str | None:
        parts = name.split(".")
        return "" if parts[0] == "tests" and any(p.startswith("test_") for p in parts[1:]) else None

    return _bad_imports(root, ("tests",), a_test_module)


def test_no_test_module_imports_another():
    assert _test_file_imports(ROOT) == []


def test_the_test_import_check_can_fail(tmp_path):
    (tmp_path / "tests" / "a").mkdir(parents=True)
    (tmp_path / "tests" / "a" / "test_x.py").write_text("from tests.b.test_y import SMALL\nfrom tests.helpers import z\n")
    assert _test_file_imports(tmp_path) == ["tests/a/test_x.py imports tests.b.test_y",
                                            "tests/a/test_x.py imports tests.b.test_y.SMALL"]
