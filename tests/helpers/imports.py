"""The import graph of a source tree, read from the AST (no module is imported): what
``tests/test_layering.py`` checks, on the repository and on small synthetic trees.

Rules (the test's docstring repeats them):

* Every ``import`` and ``from ... import`` statement counts, at module level and inside functions,
  classes and ``if TYPE_CHECKING:`` blocks alike. Imports by string (``importlib.import_module``,
  a ``"module:function"`` target) are not statements and do not count.
* Relative imports are resolved against the importing module's package.
* An import names ONE module: ``import a.b.c`` and ``from a.b.c import x`` name ``a.b.c`` (or, when
  ``a.b.c`` is not a module of the tree, the deepest prefix that is); ``from a.b import c`` where
  ``c`` is a submodule names ``a.b.c``, not ``a.b``. The parent packages Python runs on the way
  (``a/__init__.py``, ``a/b/__init__.py``) are not edges: so a package ``__init__`` that re-exports
  its submodules is no circle with them, while a submodule that imports a name from its own
  package's ``__init__`` (which imports that submodule back) is one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["Import", "source_modules", "imports_of", "import_graph", "circles", "private_imports"]


@dataclass(frozen=True)
class Import:
    """One imported thing: ``module`` (absolute, as written or resolved), ``names`` (the ``from``
    names, empty for ``import x``) and the statement's line."""

    module: str
    names: tuple[str, ...]
    line: int


def source_modules(root: Path, tops: Iterable[str]) -> dict[str, Path]:
    """Module name -> file, for every ``*.py`` under ``root/<top>`` (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _base(module: str, path: Path, level: int) -> str:
    """The package a relative import of ``level`` dots resolves against."""
    parts = module.split(".")
    if path.name != "__init__.py":
        parts = parts[:-1]  # a plain module's package
    return ".".join(parts[: len(parts) - (level - 1)] if level > 1 else parts)


def imports_of(module: str, path: Path) -> Iterator[Import]:
    """Every import statement of a file (any depth), with relative imports made absolute."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (Import(a.name, (), node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = _base(module, path, node.level)
                target = f"{base}.{target}" if target and base else (target or base)
            yield Import(target, tuple(a.name for a in node.names), node.lineno)


def _named(name: str, known: dict[str, Path]) -> str | None:
    """``name`` or its deepest prefix that is a module of the tree (None: outside the tree)."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in known:
            return ".".join(parts[:k])
    return None


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports (edges as the module docstring defines)."""
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for imp in imports_of(module, path):
            if not imp.names:
                targets = [_named(imp.module, known)]
            else:
                subs = [f"{imp.module}.{n}" for n in imp.names if f"{imp.module}.{n}" in known]
                plain = len(subs) < len(imp.names)  # some name is not a submodule: it is the module's
                targets = subs + ([_named(imp.module, known)] if plain else [])
            graph[module] |= {t for t in targets if t is not None and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative), each
    sorted; sorted by their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return sorted(found)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(known: dict[str, Path], root: Path) -> list[str]:
    """``"<file>:<line> imports <name> from <module>"`` for every ``from x import _y`` (a private
    name: one leading underscore, dunders excepted) where ``x`` is another module of the tree, and
    ``"<file>:<line> imports private module <a._b>"`` for a private module (``import a._b``,
    ``from a import _b``, ``from a._b import y``) imported from outside its package ``a``.
    Modules outside the tree (torch, ...) are not checked."""
    found = []
    for module, path in known.items():
        where = path.relative_to(root).as_posix()
        for imp in imports_of(module, path):
            if _named(imp.module, known) is None:
                continue
            subs = [f"{imp.module}.{n}" for n in imp.names if f"{imp.module}.{n}" in known]
            for target in [imp.module, *subs]:
                parts = target.split(".")
                hidden = next((i for i, p in enumerate(parts) if _private(p)), None)
                package = ".".join(parts[:hidden])
                if hidden is not None and module != package and not module.startswith(package + "."):
                    found.append(f"{where}:{imp.line} imports private module {target}")
            if imp.module != module:
                found += [f"{where}:{imp.line} imports {n} from {imp.module}" for n in imp.names
                          if _private(n) and f"{imp.module}.{n}" not in known]
    return sorted(set(found))
