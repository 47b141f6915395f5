"""The results page, ``results/README.md``: generated from committed reference records, never by
hand (``attnbench page``; a test regenerates it and fails when the committed page differs).

What goes on it is data, in ``results/page.yaml``: one **headline** run per domain (its folder of
records, the task form, its protocol, config and command, and published figures for the same
protocol where one exists), and labelled **sections** for every other run (diagnostics, modern
recurrences, variants, other machines). Headline numbers come from exactly one run each; a
section never feeds the headline.

Per headline group: the best attention model, the best RNN, CNN and modern recurrence, and the
no-context floor (family ``other``), each with mean, 95% CI and seeds; attention minus the best
baseline with its CI and verdict (the report's rule, :func:`~benchmarks.report.analysis.compare_models`);
parameters, FLOPs per sample and train time; hardware and commits from the records. Accuracy
is shown in percent, BLEU on 0-100.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from benchmarks.report import stats
from benchmarks.report.analysis import analyse, best_of, compare_models
from benchmarks.report.diagnostics import as_json, evaluate
from benchmarks.report.document import Block, BulletList, Heading, Paragraph, Table, render_markdown
from benchmarks.report.format import fmt_seconds, fmt_si
from benchmarks.report.results import CONFIDENCE, MODERN_RNN, Group, ModelResult

__all__ = ["PAGE_SPEC", "build_page", "write_page", "headline_table", "patched_readme", "stale", "PageError"]

RESULTS = Path(__file__).resolve().parents[2] / "results"
PAGE_SPEC = RESULTS / "page.yaml"
ROLES = (("best attention", "attention"), ("best RNN", "rnn"), ("best CNN", "cnn"),
         ("best modern recurrence", MODERN_RNN), ("no-context floor", "other"))
#: metric -> (scale to the shown unit, unit name)
UNITS = {"acc": (100.0, "accuracy %"), "bleu": (1.0, "BLEU"), "f1": (100.0, "F1 %"), "chrf": (1.0, "chrF")}
VERDICT_WORD = {stats.BETTER: "wins", stats.WORSE: "loses", stats.NO_DIFFERENCE: "level", stats.TOO_FEW: "too few seeds"}


class PageError(ValueError):
    """``results/page.yaml`` names something that is not there (one line)."""


@dataclass
class _Run:
    spec: dict[str, Any]
    group: Group
    folder: str
    records: list[dict[str, Any]]


def _unit(metric: str) -> tuple[float, str]:
    return UNITS.get(metric, (1.0, metric))


def _num(x: float | None, metric: str, signed: bool = False) -> str:
    if x is None:
        return "–"
    v = x * _unit(metric)[0]
    return f"{v:+.2f}" if signed else f"{v:.2f}"


def _ci(lo: float | None, hi: float | None, metric: str) -> str:
    return "–" if lo is None or hi is None else f"[{_num(lo, metric)}, {_num(hi, metric)}]"


def _load(spec: dict[str, Any], root: Path) -> _Run:
    folders = spec["folder"] if isinstance(spec["folder"], list) else [spec["folder"]]
    paths = [root / f for f in folders]
    for p in paths:
        if not p.is_dir():
            raise PageError(f"page.yaml: folder {p.relative_to(root.parent) if root.parent in p.parents else p} "
                            f"does not exist")
    an = analyse(paths if len(paths) > 1 else paths[0], merge=spec.get("merge"))
    want = (spec["task"], spec["dataset"])
    g = next((g for g in an.groups if (g.task, g.base_dataset or g.dataset) == want), None)
    if g is None:
        have = ", ".join(f"{g.task}/{g.dataset}" for g in an.groups)
        raise PageError(f"page.yaml: no {want[0]}/{want[1]} results in {', '.join(folders)} (it has: {have})")
    recs = [r for r in an.records if r.get("task") == g.task and r.get("dataset") == g.base_dataset]
    return _Run(spec, g, folders[0], recs)


def _verdict(g: Group, a: ModelResult | None, b: ModelResult | None) -> tuple[stats.Difference | None, str | None]:
    if a is None or b is None:
        return None, None
    return compare_models(g, a, b, CONFIDENCE)


def _vs(g: Group, fam: str) -> str:
    att, base = best_of(g, "attention"), best_of(g, fam)
    d, v = _verdict(g, att, base)
    if d is None:
        return "–"
    return (f"{VERDICT_WORD[v]}: {_num(d.diff, g.metric, True)} {_ci(d.ci_low, d.ci_high, g.metric)} "
            f"vs {base.model}")


def _best_baseline(g: Group) -> ModelResult | None:
    cands = [m for m in (best_of(g, "rnn"), best_of(g, "cnn"), best_of(g, MODERN_RNN)) if m is not None]
    sign = 1 if g.mode == "max" else -1
    return max(cands, key=lambda m: sign * m.mean) if cands else None


def _cost(g: Group) -> str:
    att, base = best_of(g, "attention"), _best_baseline(g)
    if att is None or base is None:
        return "–"
    parts = []
    for key, what in (("train_time_s_mean", "train time"), ("params", "params")):
        a, b = att.cost.get(key), base.cost.get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
            parts.append(f"{what} {a / b:.2g}x")
    return ", ".join(parts) or "–"


def _hardware(records: list[dict[str, Any]]) -> str:
    envs = [r.get("env") or {} for r in records]
    cpus = sorted({str(e.get("cpu_model") or e.get("device_name") or "?") for e in envs})
    devs = sorted({str(e.get("device_name") or "?") for e in envs if e.get("device") == "cuda"})
    threads = sorted({e.get("torch_threads") for e in envs if e.get("torch_threads")})
    commits = sorted({str(e.get("git_commit") or "")[:7] for e in envs if e.get("git_commit")})
    where = ", ".join(devs) if devs else f"{' / '.join(cpus)} (CPU, {'/'.join(map(str, threads)) or '?'} threads)"
    return f"{where}; commit{'s' if len(commits) > 1 else ''} {', '.join(commits) or 'unknown'}"


def _role_rows(g: Group) -> list[list[str]]:
    rows = []
    for role, fam in ROLES:
        m = best_of(g, fam)
        if m is None:
            rows.append([role, "not in this run", "–", "–", "–", "–", "–", "–"])
            continue
        s = m.summary
        rows.append([role, m.model, _num(s.mean, g.metric), _ci(s.ci_low, s.ci_high, g.metric), str(s.n),
                     fmt_si(m.cost.get("params")), fmt_si(m.cost.get("flops_per_sample")),
                     fmt_seconds(m.cost.get("train_time_s_mean"))])
    return rows


def _link(folder: str) -> str:
    return f"[full report]({folder}/REPORT.md)"


def _summary_blocks(runs: list[_Run]) -> list[Block]:
    rows, tally = [], {w: 0 for w in VERDICT_WORD.values()}
    for run in runs:
        g = run.group
        for fam in ("rnn", "cnn"):
            _, v = _verdict(g, best_of(g, "attention"), best_of(g, fam))
            if v:
                tally[VERDICT_WORD[v]] += 1
        att = best_of(g, "attention")
        rows.append([run.spec["title"], _unit(g.metric)[1], f"{att.model} {_num(att.mean, g.metric)}" if att else "–",
                     _vs(g, "rnn"), _vs(g, "cnn"), _cost(g), _link(run.folder)])
    n = sum(tally.values())
    said = ", ".join(f"{k} {v}" for k, v in tally.items() if v)
    return [
        Heading(2, "Where attention wins, ties and loses"),
        Paragraph(f"The best attention model of each headline run against the best RNN and the best CNN of the "
                  f"same run ({n} comparisons: {said}). Difference = attention − baseline with its 95% "
                  f"t-interval over seeds (paired where the seeds match); 'level' = the interval holds 0. Cost: "
                  f"the best attention model's mean train time and parameters over the best baseline's (RNN, "
                  f"CNN or modern recurrence, by mean)."),
        Table(["domain / task", "metric", "best attention", "vs best RNN", "vs best CNN",
               "attention's cost vs best baseline", "run"], rows),
    ]


def _domain_blocks(run: _Run) -> list[Block]:
    g, spec = run.group, run.spec
    blocks: list[Block] = [Heading(2, spec["title"])]
    blocks.append(Paragraph(f"Protocol: {spec['protocol']} Command: `{spec['command']}` (config `{spec['config']}`). "
                            f"Hardware: {_hardware(run.records)}. {_link(run.folder)}."))
    blocks.append(Table(["role", "model", _unit(g.metric)[1], "95% CI", "seeds", "params", "FLOPs/sample",
                         "train time"], _role_rows(g)))
    att, base = best_of(g, "attention"), _best_baseline(g)
    d, v = _verdict(g, att, base)
    if d is not None:
        blocks.append(Paragraph(f"Attention − best baseline ({att.model} − {base.model}): "
                                f"{_num(d.diff, g.metric, True)} {_ci(d.ci_low, d.ci_high, g.metric)}, "
                                f"{v} (n={d.n}, {d.method})."))
    pub = spec.get("published") or []
    if pub:
        blocks.append(BulletList([f"Published: {p['model']} {p['value']} ({p['source']}); how the protocols differ: "
                                  f"{p['differs']}" for p in pub]))
    else:
        blocks.append(Paragraph("Published figure for this protocol: none cited (no paper reports these models "
                                "under this budget and split)."))
    return blocks


def _section_blocks(spec: dict[str, Any], root: Path) -> list[Block]:
    blocks: list[Block] = [Heading(3, spec["title"]), Paragraph(spec["note"].strip())]
    folders = spec["folder"] if isinstance(spec["folder"], list) else [spec["folder"]]
    paths = [root / f for f in folders]
    an = analyse(paths if len(paths) > 1 else paths[0], merge=spec.get("merge"))
    diag = as_json(evaluate(an))
    if diag:  # a suite with diagnostics: what each expected and what the run found
        blocks.append(Table(["diagnostic", "expected", "found", "outcome"],
                            [[r["diagnostic"], r["expect"], r["found"], r["outcome"]] for r in diag]))
    rows = []
    for g in an.groups:
        for role, fam in ROLES:
            m = best_of(g, fam)
            if m is not None:
                s = m.summary
                rows.append([f"{g.task} / {g.dataset}", role, m.model, _num(s.mean, g.metric),
                             _ci(s.ci_low, s.ci_high, g.metric), str(s.n), _unit(g.metric)[1]])
    blocks.append(Table(["task / dataset", "role", "model", "mean", "95% CI", "seeds", "unit"], rows))
    blocks.append(Paragraph(f"Records: {', '.join(f'`{f}`' for f in folders)}; "
                            f"{_link(spec.get('report', folders[0]))}."))
    return blocks


def build_page(spec_path: str | Path = PAGE_SPEC) -> str:
    """The page's Markdown from ``spec_path`` (folders are relative to its folder)."""
    spec_path = Path(spec_path)
    spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    root = spec_path.parent
    runs = [_load(h, root) for h in spec["headline"]]
    blocks: list[Block] = [
        Heading(1, "attnbench results"),
        Paragraph(f"Generated by `attnbench page` from `results/page.yaml` and the reference records it names: do "
                  f"not edit by hand. {spec['intro'].strip()}"),
    ]
    blocks += _summary_blocks(runs)
    for run in runs:
        blocks += _domain_blocks(run)
    blocks.append(Heading(2, "Other runs (labelled; never part of the headline)"))
    for sec in spec.get("sections") or []:
        blocks += _section_blocks(sec, root)
    return render_markdown(blocks)


#: the README's generated headline sits between these lines
README_START = "<!-- headline: generated by attnbench page from results/page.yaml; do not edit -->"
README_END = "<!-- /headline -->"


def headline_table(spec_path: str | Path = PAGE_SPEC) -> str:
    """The summary table alone (what the README shows), links made relative to the repository."""
    spec_path = Path(spec_path)
    spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    blocks = _summary_blocks([_load(h, spec_path.parent) for h in spec["headline"]])[1:]
    rel = spec_path.parent.name
    return render_markdown(blocks).replace("](reference/", f"]({rel}/reference/").strip()


def patched_readme(readme: str, table: str) -> str:
    """``readme`` with the text between :data:`README_START` and :data:`README_END` replaced."""
    if README_START not in readme or README_END not in readme:
        raise PageError(f"README.md has no generated headline block ({README_START} ... {README_END})")
    head, rest = readme.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    return f"{head}{README_START}\n{table}\n{README_END}{tail}"


def write_page(spec_path: str | Path = PAGE_SPEC, out: str | Path | None = None,
               readme: str | Path | None = None) -> list[Path]:
    """Write :func:`build_page` to ``out`` (default: ``README.md`` beside the spec) and the
    headline table into ``readme`` (default: the repository's README.md, when it exists)."""
    from benchmarks.report.document import write_text_atomic

    spec_path = Path(spec_path)
    written = [write_text_atomic(Path(out) if out else spec_path.parent / "README.md", build_page(spec_path))]
    readme = Path(readme) if readme else spec_path.parent.parent / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        new = patched_readme(text, headline_table(spec_path))
        if new != text:
            written.append(write_text_atomic(readme, new))
    return written


def stale(spec_path: str | Path = PAGE_SPEC) -> list[str]:
    """The generated files that differ from a fresh build (empty: both current)."""
    spec_path = Path(spec_path)
    out = []
    if (spec_path.parent / "README.md").read_text(encoding="utf-8") != build_page(spec_path):
        out.append(str(spec_path.parent / "README.md"))
    readme = spec_path.parent.parent / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        if patched_readme(text, headline_table(spec_path)) != text:
            out.append(str(readme))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.report.page [SPEC] [--check]``: write the page, or with ``--check``
    exit 1 when the committed page differs from a fresh build."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    spec = Path(args[0]) if args else PAGE_SPEC
    try:
        if check:
            old = stale(spec)
            print(f"out of date: {', '.join(old)} (run attnbench page)" if old else "results page and README headline are current")
            return 1 if old else 0
        for path in write_page(spec):
            print(f"wrote {path}")
    except OSError as err:
        print(f"attnbench page: error: {err.filename or spec}: {err.strerror or err}", file=sys.stderr)
        return 2
    except (PageError, KeyError, yaml.YAMLError) as err:
        print(f"attnbench page: error: {spec}: {' '.join(str(err).split())}" if not isinstance(err, PageError)
              else f"attnbench page: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
