"""What a report is about: groups (one leaderboard per suite, task and dataset) of model
results, the comparisons of the best attention model against the best baselines, and the
whole analysis of a results folder. Plain data, computed by :mod:`benchmarks.report.analysis`
and read by every section, the domains' sections included."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmarks.report import stats
from benchmarks.config.schema import ConfigError

from tasks.common.registry import FAMILIES  # the one list (the registry checks every model's family)

__all__ = [
    "FAMILIES", "BASELINE_FAMILIES", "MODERN_RNN", "baseline_family", "CONFIDENCE", "METRIC_BOUNDS", "Warn", "ReportError", "ModelResult",
    "Comparison", "Group", "Analysis", "group_title", "dataset_label", "diagnostic_of", "short_commit", "longest_input",
    "record_window", "effective_pattern",
]

BASELINE_FAMILIES = ("rnn", "cnn")
#: Family ``rnn`` with kind ``modern`` (minGRU, S4D, Mamba-2, LRU...): compared as a baseline of its
#: own, so that the classic ``rnn`` comparison (LSTM/GRU) and its verdicts stay what they were.
MODERN_RNN = "modern rnn"
CONFIDENCE = 0.95

#: Range of bounded metrics (as records store them): confidence intervals are clipped to it.
METRIC_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "acc": (0.0, 1.0), "f1": (0.0, 1.0), "bleu": (0.0, 100.0), "chrf": (0.0, 100.0), "per": (0.0, None), "wer": (0.0, None),
}

#: ``warn(kind, message)``: a warning of the report, listed under its kind's title.
Warn = Callable[[str, str], None]


class ReportError(ConfigError):
    """Nothing to report on (no folder, no records and no manifests); the CLI's input error."""


@dataclass
class ModelResult:
    suite: str
    task: str
    dataset: str
    model: str
    family: str
    pattern: str | None
    ok: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)  # manifest cells without a record
    values: list[float] = field(default_factory=list)  # test metric of the ok records, in seed order
    seeds: list[Any] = field(default_factory=list)
    summary: stats.Summary | None = None
    cost: dict[str, Any] = field(default_factory=dict)
    kind: str | None = None  # the family's kind where it has kinds (rnn: classic | modern)

    @property
    def mean(self) -> float | None:
        return None if self.summary is None else self.summary.mean


def baseline_family(m: ModelResult) -> str:
    """The baseline family a model competes in: its family, or :data:`MODERN_RNN` for an rnn of
    kind ``modern``."""
    return MODERN_RNN if m.family == "rnn" and m.kind == "modern" else m.family


@dataclass
class Comparison:
    baseline_family: str
    attention: ModelResult | None
    baseline: ModelResult | None
    difference: stats.Difference | None
    verdict: str | None
    message: str  # the plain sentence


@dataclass
class Group:
    suite: str
    task: str
    dataset: str
    metric: str
    mode: str
    models: list[ModelResult]  # ranked: best mean first, models without a mean last
    comparisons: list[Comparison] = field(default_factory=list)
    base_dataset: str = ""  # the dataset name without the training-set fraction
    train_fraction: float = 1.0
    diagnostic: str | None = None  # the suite diagnostic its cells belong to (config diagnostics:)
    point: dict[str, Any] = field(default_factory=dict)  # a sweep's point: the dataset params that differ

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.task, self.dataset)

    @property
    def ranked(self) -> list[ModelResult]:
        """The models with a mean of the group's metric, best first."""
        return [m for m in self.models if m.mean is not None]


@dataclass
class Analysis:
    results_dir: Path
    records: list[dict[str, Any]]
    manifests: list[dict[str, Any]]
    groups: list[Group]
    warnings: dict[str, list[str]]
    multi_suite: bool
    confidence: float


def dataset_label(dataset: Any, fraction: float, diagnostic: str | None = None,
                  point: dict[str, Any] | None = None) -> str:
    """A group's dataset label: the name, plus the training-set fraction when below 1 (each
    fraction of a data-size sweep is its own group: its leaderboard and comparisons), plus the
    dataset parameters of a sweep's point (``synthetic_far [min_gap=8]``), plus the suite
    diagnostic the cells belong to (``synthetic · far_dependency``: each its own group)."""
    label = str(dataset) if fraction >= 1 else f"{dataset} [train {fraction * 100:.4g}%]"
    if point:
        label += " [" + ", ".join(f"{k}={'default' if v is None else v}" for k, v in point.items()) + "]"
    return f"{label} · {diagnostic}" if diagnostic else label


def diagnostic_of(item: dict[str, Any]) -> str | None:
    """The suite diagnostic a record or manifest cell belongs to (its config's ``diagnostic``)."""
    cfg = item.get("config")
    tag = cfg.get("diagnostic") if isinstance(cfg, dict) else None
    return str(tag) if tag else None


def group_title(g: Group, multi: bool) -> str:
    """``task / dataset``, prefixed by ``[suite]`` in a report of several suites."""
    return f"{'[' + g.suite + '] ' if multi else ''}{g.task} / {g.dataset}"


def short_commit(c: Any) -> str:
    return "unknown" if not c else str(c)[:12]


def longest_input(rec: dict[str, Any]) -> int | None:
    """The longest input of a record's data, in the model's sequence positions: ``data.max_len``
    (what the runner stores), else ``max_len``/``max_frames`` of ``data.info``; None if unknown."""
    d = rec.get("data") if isinstance(rec.get("data"), dict) else {}
    info = d.get("info") if isinstance(d.get("info"), dict) else {}
    for v in (d.get("max_len"), info.get("max_len"), info.get("max_frames")):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return int(v)
    return None


def record_window(rec: dict[str, Any]) -> int | None:
    """The attention window a record's model was built with: ``config.model_params.window``, else
    ``window`` of its ``pattern_params`` (how the ``local_global`` presets and the variants give it)."""
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    mp = cfg.get("model_params") if isinstance(cfg.get("model_params"), dict) else {}
    pp = mp.get("pattern_params") if isinstance(mp.get("pattern_params"), dict) else {}
    for w in (mp.get("window"), pp.get("window")):
        if isinstance(w, (int, float)) and not isinstance(w, bool):
            return int(w)
    return None


#: patterns whose window bounds |i - j| (``local_global`` adds global tokens, which a window
#: covering every position makes redundant)
WINDOWED_PATTERNS = ("truncated", "local_global")


def effective_pattern(pattern: Any, window: int | None, longest: int | None) -> str | None:
    """``"full"`` when a windowed pattern's window covers the whole input: position i sees j with
    |i - j| <= w, so on inputs of at most L positions a window w >= L - 1 attends to everything
    (the pattern is then full attention, at a windowed kernel's cost). None otherwise, or when
    the window or the longest input is unknown."""
    if pattern not in WINDOWED_PATTERNS or window is None or longest is None:
        return None
    return "full" if window >= longest - 1 else None
