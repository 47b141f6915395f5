"""More seeds where a diagnostic's verdict is still undecided (issue 51 item 1).

Three seeds are the floor, not the target. A diagnostic may state ``max_seeds: N``. After the run,
every expectation of that diagnostic that came out **not significant** (the interval, or the
equivalence test, undecided) gets :data:`STEP` more seeds for the two models that decide it, and
the run goes on until each such expectation is decided (matched or contradicted) or its models have
``N`` seeds. The new seeds follow the largest seed either model has, the same for both, so the
comparison stays paired. They are ordinary cells: each is its own record, a re-run skips them, and
every launcher carries them.

It works on the config: an extra cell entry per (entry, model) that needs seeds, the entry as
written with ``models: [model]`` and the new seeds, validated and run like the rest
(:func:`benchmarks.run.runner.run_suite`). The original cells' ids do not change.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["STEP", "Need", "undecided", "extended_config"]

#: seeds added per round to each model of an undecided expectation
STEP = 3


@dataclass(frozen=True)
class Need:
    """The models of one undecided expectation and the seeds they get next."""

    diagnostic: str
    expectation: str
    models: tuple[str, str]
    task: str
    dataset: str
    seeds: tuple[int, ...]


def undecided(cfg: dict[str, Any], out: Path) -> list[Need]:
    """The undecided expectations of ``cfg``'s diagnostics with a ``max_seeds`` not reached yet,
    from the records in ``out`` (raw outcomes: the decision each test makes at its own level)."""
    from benchmarks.report.analysis import analyse
    from benchmarks.report.diagnostics import NOT_SIGNIFICANT, evaluate

    caps = {name: body.get("max_seeds") for name, body in (cfg.get("diagnostics") or {}).items()
            if isinstance(body, dict) and body.get("max_seeds")}
    if not caps:
        return []
    an = analyse(out)
    needs: list[Need] = []
    for res in evaluate(an):
        cap = caps.get(res.name)
        if cap is None or res.suite != cfg["suite"]:
            continue
        for row in res.rows:
            if row.outcome != NOT_SIGNIFICANT or row.left is None or row.right is None:
                continue
            have = set(row.left.seeds) | set(row.right.seeds)
            if min(len(row.left.seeds), len(row.right.seeds)) >= cap:
                continue
            ints = [s for s in have if isinstance(s, int)]
            start = max(ints) + 1 if ints else 0
            room = cap - min(len(row.left.seeds), len(row.right.seeds))
            seeds = tuple(range(start, start + min(STEP, room)))
            needs.append(Need(res.name, row.expectation.text, (row.left.model, row.right.model),
                              row.left.task, row.left.dataset, seeds))
    return needs


def extended_config(cfg: dict[str, Any], needs: list[Need]) -> dict[str, Any]:
    """``cfg`` with one extra cell entry per (tagged entry, model) that ``needs`` names, for the
    new seeds (each model once per diagnostic, with the union of the seeds it needs)."""
    wanted: dict[tuple[str, str], set[int]] = {}
    for need in needs:
        for model in need.models:
            wanted.setdefault((need.diagnostic, model), set()).update(need.seeds)
    out = copy.deepcopy(cfg)
    extra = []
    for entry in cfg.get("cells") or []:
        tag = entry.get("diagnostic")
        models = entry.get("models")
        names = [models] if isinstance(models, str) else list(models or [])
        for model in names:
            seeds = wanted.get((tag, model))
            if not seeds:
                continue
            new = copy.deepcopy(entry)
            new["models"] = [model]
            new["seeds"] = sorted(seeds)
            if isinstance(new.get("model_params"), dict):
                new["model_params"] = {k: v for k, v in new["model_params"].items() if k == model}
            extra.append(new)
    out["cells"] = list(out.get("cells") or []) + extra
    return out


def top_up(cfg: dict[str, Any], out: Path, run: Callable[[dict[str, Any]], Any], log: Callable[[str], None],
           rounds: int = 10) -> list[Any]:
    """Run more seeds until every capped diagnostic's expectations are decided or at their cap;
    ``run(cfg)`` runs a validated config's unfinished cells and returns its summary."""
    from benchmarks.config.suite import validate_suite

    summaries = []
    asked: list[Need] = []
    for _ in range(rounds):
        needs = undecided(cfg, out)
        if not needs:
            break
        if needs == asked:  # the seeds asked for last round did not finish (failed cells): stop, said once
            log(f"undecided: the added seeds did not finish ({len(needs)} expectation(s)); failed cells stand, "
                "--retry-failed reruns them")
            break
        asked = needs
        for need in needs:
            log(f"undecided: {need.diagnostic}: {need.expectation} ({' vs '.join(need.models)}): "
                f"seeds {', '.join(map(str, need.seeds))} more (max_seeds "
                f"{cfg['diagnostics'][need.diagnostic]['max_seeds']})")
        cfg = validate_suite(extended_config(cfg, needs), source=f"{cfg['suite']} (more seeds)")
        summaries.append(run(cfg))
    return summaries
