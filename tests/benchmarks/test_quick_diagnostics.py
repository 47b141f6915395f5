"""The main job doubles as a regression test of the models: quick.yaml's diagnostics, cut to the
models of the expectations that are robust at a tiny size and to smaller budgets, are run end to
end (cells, report) and each of those expectations must come out matched (3 seeds)."""

from __future__ import annotations

import json

import pytest
import yaml

from benchmarks.cli import main
from benchmarks.config import CONFIG_DIR

#: diagnostic -> (the expectations asserted, trainer overrides of its cells). Translation's
#: reordering needs its 6 epochs (~7 s a cell) before any model translates: left to the main job.
ROBUST = {
    # gaps of ~0.5 accuracy by epoch 5 (images) and 20 (graphs): the budgets leave room over that
    "neighbours": (["cnn > other"], {"max_epochs": 30, "early_stopping_patience": 10}),
    "small_images": (["cnn > attention"], {"max_epochs": 5, "early_stopping_patience": 3}),
    "far_dependency": (["rnn > cnn"], {"max_epochs": 20}),  # epochs, not time: the same on a slower CPU
}
FAMILIES = {"attention", "rnn", "cnn", "other"}


def _tiny_quick() -> dict:
    cfg = yaml.safe_load((CONFIG_DIR / "quick.yaml").read_text(encoding="utf-8"))
    cfg["suite"], cfg["micro_benchmarks"] = "quick_tiny", []
    cfg["tuning"] = None  # its rates were tuned at the main job's budgets, not these: the hand-set ones
    cfg["diagnostics"] = {n: {**d, "expect": ROBUST[n][0]} for n, d in cfg["diagnostics"].items() if n in ROBUST}
    cells = []
    for cell in cfg["cells"]:
        name = cell.get("diagnostic")
        if name not in ROBUST:
            continue
        sides = {s for e in ROBUST[name][0] for s in e.split(" ") if s not in "<>~"}
        from tasks.common.registry import get_task

        models = get_task(cell["task"]).models
        keep = [m for m in cell["models"] if m in sides or models.get(m).family in sides & FAMILIES]
        if keep:
            cell = {**cell, "models": keep, "trainer": {**(cell.get("trainer") or {}), **ROBUST[name][1]}}
            cell["model_params"] = {m: p for m, p in (cell.get("model_params") or {}).items() if m in keep}
            cells.append(cell)
    cfg["cells"] = cells
    return cfg


@pytest.mark.slow
def test_robust_verdicts_of_the_diagnostics(tmp_path, capsys):
    cfg = tmp_path / "quick_tiny.yaml"
    cfg.write_text(yaml.safe_dump(_tiny_quick(), sort_keys=False), encoding="utf-8")
    out = tmp_path / "out"
    # in this process: the verdicts are the models', not the launcher's (a pool costs a fresh interpreter)
    assert main(["run", str(cfg), "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--launcher", "inline"]) == 0
    rows = json.loads((out / "diagnostics.json").read_text(encoding="utf-8"))
    got = {(r["diagnostic"], r["expect"]): (r["outcome"], r["found"]) for r in rows}
    want = {(n, e) for n, (exps, _) in ROBUST.items() for e in exps}
    assert set(got) == want
    assert all(o == "matched" for o, _ in got.values()), got
