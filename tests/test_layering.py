"""Layering (issue 32): imports flow one way, benchmarks -> tasks -> attn_core, with no import
circle and no private name reaching across modules. Checked in the source by walking the AST of
every module of attn_core/, tasks/ and benchmarks/ (no exemptions), and in fresh interpreters
(what importing or running something really pulls in).

The rules (:mod:`tests.helpers.imports` reads the graph):

* **What counts as an import**: every ``import``/``from ... import`` statement, at module level and
  inside functions, classes and ``if TYPE_CHECKING:`` alike; relative imports resolved. Imports by
  string (``importlib.import_module``, ``"module:function"`` targets) are not statements and do not
  count: they are how the registries and the micro-benchmarks name what they load lazily.
* **(a) Direction**: attn_core imports neither tasks, benchmarks nor Lightning; tasks never imports
  benchmarks; inside benchmarks: config < run < report, micro < cli (:data:`FORBIDDEN`).
* **(b) No circle**: the module graph (an edge per import, to the ONE module it names: ``import
  a.b.c`` and ``from a.b.c import x`` name ``a.b.c``; ``from a.b import c`` names ``a.b.c`` when ``c``
  is a submodule) has no strongly connected component of more than one module. The parent packages
  Python runs on the way are not edges, so a package ``__init__`` re-exporting its submodules is no
  circle with them; a submodule that imports a name from its own package's ``__init__`` while that
  ``__init__`` imports it back is one.
* **(c) No private name across modules**, in attn_core/, tasks/ and benchmarks/ (tests/ may reach
  into privates to test them): no ``from x import _y`` where ``x`` is another module of the tree, and
  no private module (``a._b``) imported from outside its package ``a``. Names of libraries outside
  the tree (torch's private modules) are not checked here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.helpers.imports import circles, import_graph, imports_of, private_imports, source_modules

ROOT = Path(__file__).resolve().parents[1]
#: an import statement of benchmarks.cli (not a mention in a docstring)
CLI_IMPORT = re.compile(r"^\s*(?:import\s+benchmarks\.cli\b|from\s+benchmarks\.cli\s+import\b"
                        r"|from\s+benchmarks\s+import\s+[^#\n]*\bcli\b)", re.MULTILINE)


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _report_modules() -> list[str]:
    """Every module of benchmarks/report/ (the domains' sections included) and the speech micro-benchmark."""
    return [_module(p) for p in sorted((ROOT / "benchmarks" / "report").rglob("*.py"))] + ["benchmarks.micro.speech"]


def _fresh(code: str, timeout: float = 300) -> Any:
    """Run ``code`` in a fresh interpreter at the repository root; it prints one JSON object."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
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


#: what the import checks below read, gathered in ONE fresh interpreter (one start instead of four),
#: in an order where each stage only adds what the previous ones showed absent: (1) the report
#: package alone (neither torch, Lightning nor the CLI may come in); (2) every attn_core module
#: (Lightning was absent after (1), so any Lightning now came from attn_core); (3) every report and
#: domain-section module in turn (the first after which benchmarks.cli is loaded is named; absent
#: after (1) and (2), which import no benchmarks.cli); (4) the one-list check (any state).
IMPORT_FACTS = """\
import importlib, json, pkgutil, sys
LIGHTNING = ('lightning', 'pytorch_lightning', 'lightning_fabric')
facts = {}
import benchmarks.report
facts['report_alone'] = sorted(m for m in ('torch', 'lightning', 'benchmarks.cli') if m in sys.modules)
import attn_core
for info in pkgutil.walk_packages(attn_core.__path__, 'attn_core.'):
    importlib.import_module(info.name)
facts['attn_core_lightning'] = sorted(m for m in sys.modules if m.split('.')[0] in LIGHTNING)
facts['cli_before_report_modules'] = 'benchmarks.cli' in sys.modules
facts['cli_culprit'] = None
for name in MODULES:
    importlib.import_module(name)
    if 'benchmarks.cli' in sys.modules:
        facts['cli_culprit'] = name
        break
from tasks.common import registry
from benchmarks.report import results
from benchmarks.run.launchers import local
facts['one_list'] = [results.FAMILIES is registry.FAMILIES,
                     [p for p in registry.TASK_PACKAGES.values() if p not in local.PRELOAD]]
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def import_facts() -> dict[str, Any]:
    modules = _report_modules()
    assert "benchmarks.report.build" in modules and "benchmarks.report.domains.speech" in modules
    return _fresh(f"MODULES = {modules!r}\n" + IMPORT_FACTS)


def test_report_and_domain_modules_do_not_import_the_cli(import_facts):
    """Each module imported in turn in one fresh interpreter: the first one after which
    ``benchmarks.cli`` is loaded is named."""
    assert not import_facts["cli_before_report_modules"] and import_facts["cli_culprit"] is None


def test_the_report_package_alone_imports_neither_torch_nor_lightning(import_facts):
    assert import_facts["report_alone"] == []


def test_attn_core_imports_no_lightning(import_facts):
    assert import_facts["attn_core_lightning"] == []


# ----------------------------------------------------------------------------- (a) direction
#: unit -> the units it must never import (directly or inside a function).
FORBIDDEN = {
    "attn_core": {"tasks", "benchmarks", "benchmarks.config", "benchmarks.run", "benchmarks.report",
                  "benchmarks.micro", "benchmarks.cli", "lightning"},
    "tasks": {"benchmarks", "benchmarks.config", "benchmarks.run", "benchmarks.report", "benchmarks.micro",
              "benchmarks.cli"},
    "benchmarks.config": {"benchmarks.run", "benchmarks.report", "benchmarks.micro", "benchmarks.cli"},
    "benchmarks.run": {"benchmarks.report", "benchmarks.micro", "benchmarks.cli"},
    "benchmarks.report": {"benchmarks.micro", "benchmarks.cli"},
    "benchmarks.micro": {"benchmarks.cli"},
}
TOPS = ("attn_core", "tasks", "benchmarks")


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "benchmarks":
        return "benchmarks." + parts[1] if len(parts) > 1 and parts[1] in ("cli", "config", "run", "report", "micro") \
            else "benchmarks"
    if parts[0] in ("lightning", "pytorch_lightning", "lightning_fabric"):
        return "lightning"
    return parts[0] if parts[0] in ("attn_core", "tasks") else None


def _imports(path: Path, module: str = "") -> Iterator[str]:
    """Every module an import statement of ``path`` names, and ``module.name`` for each ``from`` name."""
    for imp in imports_of(module, path):
        yield imp.module
        yield from (f"{imp.module}.{n}" for n in imp.names)


def _bad_imports(root: Path, tops: tuple[str, ...], bad: Callable[[str, str], str | None]) -> list[str]:
    """``"<file> imports <name><why>"`` for every import under ``root/<top>`` that ``bad(module, name)``
    objects to (it returns the reason suffix, or ``None``)."""
    found = []
    for module, path in source_modules(root, tops).items():
        found += [f"{path.relative_to(root)} imports {name}{why}" for name in _imports(path, module)
                  if (why := bad(module, name)) is not None]
    return sorted(set(found))


def _upward(module: str, name: str) -> str | None:
    here, there = _unit(module), _unit(name)
    return f" ({here} -> {there})" if there in FORBIDDEN.get(here, ()) else None


def _layer_violations(root: Path) -> list[str]:
    return _bad_imports(root, TOPS, _upward)


def test_packages_import_only_downwards():
    assert _layer_violations(ROOT) == []


def test_the_layer_check_finds_an_upward_import(tmp_path):
    """The check can fail: config reaching up into the runner inside a function, attn_core into
    tasks and Lightning, a domain into the report (relative import resolved: no exemption)."""
    (tmp_path / "benchmarks" / "config").mkdir(parents=True)
    (tmp_path / "benchmarks" / "config" / "x.py").write_text("def f():\n    from benchmarks.run import runner\n")
    (tmp_path / "attn_core").mkdir()
    (tmp_path / "attn_core" / "y.py").write_text("import tasks.common.registry\nimport lightning\n")
    (tmp_path / "tasks" / "speech").mkdir(parents=True)
    (tmp_path / "tasks" / "speech" / "report.py").write_text("from benchmarks.report import Table\n")
    (tmp_path / "tasks" / "speech" / "bench.py").write_text("def g():\n    import benchmarks\n")
    assert _layer_violations(tmp_path) == [
        "attn_core/y.py imports lightning (attn_core -> lightning)",
        "attn_core/y.py imports tasks.common.registry (attn_core -> tasks)",
        "benchmarks/config/x.py imports benchmarks.run (benchmarks.config -> benchmarks.run)",
        "benchmarks/config/x.py imports benchmarks.run.runner (benchmarks.config -> benchmarks.run)",
        "tasks/speech/bench.py imports benchmarks (tasks -> benchmarks)",
        "tasks/speech/report.py imports benchmarks.report (tasks -> benchmarks.report)",
        "tasks/speech/report.py imports benchmarks.report.Table (tasks -> benchmarks.report)",
    ]


# ----------------------------------------------------------------------------- (b) circles
def _circles(root: Path) -> list[list[str]]:
    return circles(import_graph(source_modules(root, TOPS)))


def test_no_import_circle():
    assert _circles(ROOT) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_circle_check_finds_circles(tmp_path):
    """The check can fail: a circle through a function-level import, a relative one, and a
    submodule importing a name of its own package's __init__ that imports it back; a package
    __init__ that only re-exports its submodules is none."""
    _tree(tmp_path, {
        "tasks/__init__.py": "",
        "tasks/a.py": "def f():\n    from tasks import b\n",  # names the submodule tasks.b
        "tasks/b.py": "from tasks.c import x\n",
        "tasks/c.py": "import tasks.a\nx = 1\n",
        "benchmarks/__init__.py": "",
        "benchmarks/report/__init__.py": "from benchmarks.report.doc import Table\nfrom .hooks import HOOKS\n",
        "benchmarks/report/doc.py": "Table = object\n",
        "benchmarks/report/hooks.py": "from . import doc\nfrom benchmarks.report.doc import Table\nHOOKS = {}\n",
        "benchmarks/run/__init__.py": "from benchmarks.run.worker import go\n",
        "benchmarks/run/worker.py": "def go():\n    from ..run import STATE\n",  # the package's own name
        "attn_core/__init__.py": "",
    })
    assert _circles(tmp_path) == [["benchmarks.run", "benchmarks.run.worker"], ["tasks.a", "tasks.b", "tasks.c"]]


def test_import_edges_name_one_module(tmp_path):
    _tree(tmp_path, {"tasks/__init__.py": "", "tasks/common/__init__.py": "", "tasks/common/io.py": "",
                     "tasks/x.py": "import tasks.common.io.deep\nfrom tasks.common import io, nothing\n"
                                   "from os import path\n"})
    graph = import_graph(source_modules(tmp_path, ("tasks",)))
    assert graph["tasks.x"] == {"tasks.common.io", "tasks.common"}


# ----------------------------------------------------------------------------- (c) private names
def test_no_private_name_is_imported_across_modules():
    assert private_imports(source_modules(ROOT, TOPS), ROOT) == []


def test_the_private_check_can_fail(tmp_path):
    """The check can fail: a private function from another module (inside a function too), a
    private module from outside its package; a private module inside its package, a dunder, an
    underscore-named library module and a module's own private names are fine."""
    _tree(tmp_path, {
        "attn_core/__init__.py": "from attn_core import _validate\n",
        "attn_core/_validate.py": "def check(): pass\n",
        "attn_core/functional.py": "from attn_core._validate import check\nfrom . import _validate\n"
                                   "def _inner(): pass\n",
        "attn_core/variants/__init__.py": "from attn_core.functional import _inner\n",
        "tasks/__init__.py": "from __future__ import annotations\nfrom attn_core import _validate\n"
                             "from torch.utils import _pytree\n",
        "benchmarks/run.py": "def f():\n    from benchmarks.run import _self\n    from attn_core.functional import _inner\n"
                             "def _self(): pass\n",
    })
    assert private_imports(source_modules(tmp_path, TOPS), tmp_path) == [
        "attn_core/variants/__init__.py:1 imports _inner from attn_core.functional",
        "benchmarks/run.py:3 imports _inner from attn_core.functional",
        "tasks/__init__.py:2 imports private module attn_core._validate",
    ]


# ----------------------------------------------------------------------------- one list
def test_one_list_of_domains_and_families(import_facts):
    """The registry owns the domains and the families: the launchers' preload and the report read them."""
    assert import_facts["one_list"] == [True, []]


# ----------------------------------------------------------------------------- training imports no report
@pytest.mark.slow
def test_training_a_cell_of_every_domain_imports_no_report_code(tmp_path):
    """One tiny cell of each domain (quick.yaml's first attention model of each task, one epoch, one
    seed) through the worker's path (:func:`benchmarks.run.worker.execute_cell`), all in one fresh
    interpreter: each cell is ok (its record keys written) and no ``benchmarks.report`` module was
    imported. The report used to come in with every domain's module (for its record key)."""
    found = _fresh(
        "import json, sys\n"
        "from pathlib import Path\n"
        "from benchmarks.config.suite import expand, load_suite\n"
        "from benchmarks.run.runner import RunOptions\n"
        "from benchmarks.run.worker import execute_cell\n"
        "cfg = load_suite('benchmarks/configs/quick.yaml', ['seeds=1', 'cells.*.trainer.max_epochs=1'])\n"
        "cells = {}\n"
        "for c in expand(cfg):\n"
        "    if c.family == 'attention':\n"
        "        cells.setdefault(c.task, c)\n"
        f"out = Path({str(tmp_path)!r})\n"
        "opts = RunOptions(out=out / 'out', cache_dir=out / 'cache', log=lambda *a: None)\n"
        "done = {}\n"
        "for task, c in sorted(cells.items()):\n"
        "    status, rec, _ = execute_cell(c, 'quick', opts)\n"
        "    done[task] = [status, sorted((rec or {}).get('extras') or {})]\n"
        "print(json.dumps({'cells': done, 'report': sorted(m for m in sys.modules if m.startswith('benchmarks.report'))}))\n",
        timeout=900)
    assert found["report"] == []
    assert found["cells"] == {"graphs": ["ok", []], "pos_tagging": ["ok", ["pos_confusion"]],
                              "speech": ["ok", ["speech_confusion"]], "translation": ["ok", ["translation_alignments"]],
                              "vision": ["ok", ["rollout"]]}  # each domain wrote its record keys


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
