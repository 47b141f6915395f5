"""Diagnostics: named experiments of a suite with the verdicts they are expected to give.

A suite config may define ``diagnostics:`` (name -> what it tests, why the expected order
follows, and the expected comparisons) and tag cell entries with ``diagnostic: NAME``::

    diagnostics:
      far_dependency:
        title: "A tag decided by a word 12+ tokens back"
        tests: "..."            # what the data is built to show
        why: "..."              # why the expected order follows
        expect: ["rnn > cnn", "attention > cnn", "attention ~ rnn"]
        margin: 0.01            # '~': level within +-0.01 accuracy (TOST)
    cells:
      - {task: pos_tagging, dataset: synthetic_far, diagnostic: far_dependency, models: [...]}

An expectation is ``LEFT REL RIGHT`` with ``REL`` one of :data:`RELATIONS` (``>``: LEFT is
better, ``<``: worse, ``~``: level within the diagnostic's ``margin``, by two one-sided tests) and
each side a model family (its best model by validation mean) or a model name that the diagnostic's cells run. Everything is checked before
any cell runs (:func:`check_diagnostics`); the report reads the definitions back from the
suite manifest and the tag from each record's config
(:mod:`benchmarks.report.diagnostics`). Pure Python: no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from benchmarks.config.schema import ConfigError, Field, Problems, validate

__all__ = ["RELATIONS", "Expectation", "parse_expectation", "check_diagnostics", "DIAGNOSTIC_SCHEMA", "FAMILY_NAMES"]

#: relation -> the verdict of ``LEFT - RIGHT`` it expects (in the metric's direction)
RELATIONS = {">": "better", "<": "worse", "~": "no significant difference"}
#: the families an expectation may name (the registry's families)
FAMILY_NAMES = ("attention", "rnn", "cnn", "other")
NAME = r"[A-Za-z0-9_.-]+"
_EXPECT = re.compile(rf"^\s*({NAME})\s*(>|<|~)\s*({NAME})\s*$")

DIAGNOSTIC_SCHEMA = {
    "title": Field("str", "", doc="a short title (default: the name)"),
    "tests": Field("str", doc="what the data is built to show"),
    "why": Field("str", doc="why the expected order follows"),
    "expect": Field("list[str]", [], doc="expected comparisons 'LEFT REL RIGHT', REL in > < ~, each side a family "
                    "or a model of the diagnostic's cells"),
    "max_seeds": Field("int", None, nullable=True, minimum=3,
                       doc="run more seeds (3 a round) for the two models of each expectation still undecided "
                           "after the run, until it is decided or they have this many (null: the config's seeds only)"),
    "sweep": Field("str", None, nullable=True,
                   doc="the dataset parameter its cells sweep (a list in dataset_params), or train_fraction (a list "
                       "in the suite): its expectations are tested at each value and the report says where along it "
                       "each verdict flips"),
    "margin": Field("float", None, nullable=True, minimum=0, min_open=True,
                    doc="what 'level' means for its '~' expectations: the largest difference, in the metric's units "
                        "(accuracy 0-1, BLEU 0-100), that counts as level; tested by two one-sided tests (TOST)"),
}


@dataclass(frozen=True)
class Expectation:
    """``left rel right``: ``left`` is expected better (``>``), worse (``<``) or level (``~``)."""

    left: str
    rel: str
    right: str

    @property
    def text(self) -> str:
        return f"{self.left} {self.rel} {self.right}"

    @property
    def expected_verdict(self) -> str:
        return RELATIONS[self.rel]


def parse_expectation(text: Any, where: str, source: str) -> Expectation:
    """One expectation string; a :class:`ConfigError` naming ``where`` and the valid forms."""
    m = _EXPECT.match(text) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(f"{source}: {where}={text!r} is invalid: expected 'LEFT REL RIGHT' with REL one of "
                          f"{', '.join(RELATIONS)} (e.g. 'attention > cnn')")
    left, rel, right = m.groups()
    if left == right:
        raise ConfigError(f"{source}: {where}={text!r} compares {left!r} with itself")
    return Expectation(left, rel, right)


def check_diagnostics(cfg: dict[str, Any], cells: Iterable[Any], source: str, problems: Problems) -> None:
    """Validate ``cfg['diagnostics']`` in place (defaults filled in) against the expanded
    ``cells`` (each with ``config['diagnostic']`` when tagged): every tag names a defined
    diagnostic, every diagnostic has cells, every expectation parses and names a family or a
    model those cells run. Problems are added to ``problems``."""
    cells = list(cells)
    earlier = len(problems) > 0  # cells left out by an earlier problem (bad seeds, model, ...)
    raw = cfg.get("diagnostics") or {}
    entries = cfg.get("cells") if isinstance(cfg.get("cells"), list) else []
    if not isinstance(raw, Mapping):
        problems.add(f"{source}: diagnostics={raw!r} is invalid: expected a mapping of names to "
                     f"{{{', '.join(DIAGNOSTIC_SCHEMA)}}}")
        raw = {}
    defined: dict[str, dict[str, Any]] = {}
    for name, body in raw.items():
        where = f"diagnostics.{name}"
        if not isinstance(name, str) or not re.fullmatch(NAME, name):
            problems.add(f"{source}: {where} is invalid: a diagnostic's name must match {NAME}")
            continue
        with problems.collect():
            defined[name] = validate(body, DIAGNOSTIC_SCHEMA, source=source, path=where)
    if isinstance(cfg.get("diagnostics"), Mapping):
        cfg["diagnostics"] = {**cfg["diagnostics"], **defined}
    choices = ", ".join(defined) or "none defined (add a top-level diagnostics: mapping)"
    named = set(raw) if isinstance(raw, Mapping) else set()  # defined, even where its body has a problem (said above)
    for i, entry in enumerate(entries):
        tag = entry.get("diagnostic") if isinstance(entry, dict) else None
        if tag is not None and tag not in defined and tag not in named:
            earlier = True  # its cells are untagged now: "no cell runs it" would only echo this
            problems.add(f"{source}: cells[{i}].diagnostic={tag!r} is invalid: expected one of {choices}")
    runs: dict[str, dict[str, str]] = {name: {} for name in defined}  # diagnostic -> model -> family
    for c in cells:
        tag = c.config.get("diagnostic")
        if tag in runs:
            runs[tag][c.model] = c.family
    for name, body in defined.items():
        models = runs[name]
        if not models and earlier:
            continue  # that problem is the one to fix; its cells are not expanded
        if not models:
            problems.add(f"{source}: diagnostics.{name}: no cell runs it (tag cells with diagnostic: {name})")
            continue
        if body.get("sweep"):
            _check_sweep(name, body["sweep"], [c for c in cells if c.config.get("diagnostic") == name], source, problems)
        families = sorted(set(models.values()), key=FAMILY_NAMES.index)
        valid = f"families {', '.join(families)}; models {', '.join(models)}"
        for j, text in enumerate(body.get("expect") or []):
            where = f"diagnostics.{name}.expect[{j}]"
            try:
                exp = parse_expectation(text, where, source)
            except ConfigError as err:
                problems.add(str(err))
                continue
            if exp.rel == "~" and body.get("margin") is None:
                problems.add(f"{source}: {where}={text!r} needs diagnostics.{name}.margin: the largest difference, "
                             "in the metric's units (accuracy 0-1, BLEU 0-100), that counts as level (e.g. margin: 0.02)")
            for side in (exp.left, exp.right):
                if side not in models and side not in families:
                    problems.add(f"{source}: {where}={text!r}: {side!r} is neither a family nor a model this "
                                 f"diagnostic's cells run; valid: {valid}")


def _check_sweep(name: str, axis: str, cells: list[Any], source: str, problems: Problems) -> None:
    """A diagnostic's ``sweep`` names a dataset parameter its cells run at two or more values, or
    ``train_fraction`` when the suite's ``train_fraction`` is a list of two or more."""
    if axis == "train_fraction":
        values = {repr(getattr(c, "train_fraction", None)) for c in cells}
    else:
        values = {repr((c.config.get("dataset_params") or {}).get(axis)) for c in cells}
    if len(values) < 2 or "None" in values:
        swept = sorted({k for c in cells for k in (c.config.get("dataset_params") or {})})
        problems.add(f"{source}: diagnostics.{name}.sweep={axis!r}: its cells do not run {axis!r} at two or more values "
                     f"(give it as a list in the cells' dataset_params, e.g. {axis}: [1, 2, 4]); their dataset "
                     f"parameters: {', '.join(swept) or 'none'}")
