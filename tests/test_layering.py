"""Layering: the report and the domains never reach up into the command line, and the attention
core stays free of Lightning. Checked twice: in the source (an import inside a function counts
too) and in a fresh interpreter (what importing a module really pulls in)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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
