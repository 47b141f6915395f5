"""Small suite configs shared by tests in several folders, and running one through the CLI."""

from __future__ import annotations

from pathlib import Path


CONFIGS = Path(__file__).resolve().parent / "configs"
#: quick.yaml as it was before the diagnostics (de04abc): tests that pin cell ids read it
QUICK_V1 = CONFIGS / "quick_v1.yaml"


def config_text(name: str) -> str:
    """The text of a suite config fixture in ``tests/helpers/configs/``."""
    return (CONFIGS / name).read_text()


def run_config(tmp: Path, text: str, *args: str) -> tuple[int, Path, Path]:
    """Write suite YAML ``text`` to ``tmp/tiny.yaml`` and ``attnbench run`` it into ``tmp/out``
    (data cache ``tmp/cache``) with extra ``args``: returns (exit code, out folder, config path)."""
    from benchmarks.cli import main

    cfg, out = tmp / "tiny.yaml", tmp / "out"
    cfg.write_text(text)
    code = main(["run", str(cfg), "--out", str(out), "--cache-dir", str(tmp / "cache"), *args])
    return code, out, cfg


#: one pos_tagging MLP cell on ``devices`` CPU ranks (``.format(devices=N)``), weights kept
DDP_SUITE = """
suite: ddp
seeds: 1
keep_checkpoints: true
trainer: {{max_epochs: 2, accelerator: cpu, devices: {devices}}}
cells:
  - task: pos_tagging
    dataset: synthetic
    dataset_params: {{num_train: 200, num_val: 50, num_test: 70, batch_size: 16, eval_batch_size: 16}}
    models: [mlp]
    model_params: {{mlp: {{d_model: 16, word_dim: 16, char_out: 8}}}}
    module_params: {{warmup_steps: 0}}
"""
