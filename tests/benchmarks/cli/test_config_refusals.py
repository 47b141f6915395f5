"""Configs that ``run`` refuses in one line (issue 45): a micro-benchmark config names the
``attnbench bench`` command that runs it; every ``*_gpu`` config asks for a GPU, so without CUDA
it is refused before any cell, with the same message for all."""

from __future__ import annotations

import re
import shutil

import pytest
import torch
import yaml

from benchmarks.cli import main
from benchmarks.config import CONFIG_DIR
from tests.helpers.hostile import one_error_line

GPU_CONFIGS = sorted(p.stem for p in CONFIG_DIR.glob("*_gpu.yaml"))




# ----------------------------------------------------------------------------- micro-benchmark configs
@pytest.mark.parametrize("argv,expected", [
    (["run", "bench_attention"], "attnbench: error: config bench_attention: a micro-benchmark config "
     "(benchmark: attention), not a suite; run it with: attnbench bench attention"),
    (["run", "benchmarks/configs/bench_attention.yaml", "--dry-run"], "attnbench: error: config "
     "benchmarks/configs/bench_attention.yaml: a micro-benchmark config (benchmark: attention), not a suite; "
     "run it with: attnbench bench attention"),
    (["run", "bench_attention_full"], "run it with: attnbench bench attention --config "
     "benchmarks/configs/bench_attention_full.yaml"),
    (["run", "bench_train.yaml"], "run it with: attnbench bench train"),
    (["data", "bench_decode"], "run it with: attnbench bench decode"),
    (["profile", "bench_recurrence", "--cell", "0"], "run it with: attnbench bench recurrence"),
])
def test_a_micro_benchmark_config_names_its_command(argv, expected, capsys, monkeypatch):
    monkeypatch.chdir(CONFIG_DIR.parents[1])
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert expected in line
    assert line.endswith(expected.rsplit("run it with: ", 1)[-1])


def test_a_copied_micro_config_is_recognised_by_its_benchmark_key(tmp_path, capsys):
    mine = tmp_path / "my_sweep.yaml"
    shutil.copy(CONFIG_DIR / "bench_complexity.yaml", mine)
    assert main(["run", str(mine)]) == 2
    assert one_error_line(capsys).endswith(f"run it with: attnbench bench complexity --config {mine}")


def test_a_suite_config_is_not_taken_for_a_micro_config(capsys):
    assert main(["run", "graphs", "--dry-run"]) == 0
    assert "valid; 50 cells" in capsys.readouterr().out


# ----------------------------------------------------------------------------- *_gpu configs
def test_every_gpu_config_asks_for_a_gpu():
    assert len(GPU_CONFIGS) >= 6
    for name in GPU_CONFIGS:
        cfg = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())
        assert cfg["trainer"]["accelerator"] == "gpu", name
        assert all((c.get("trainer") or {}).get("accelerator", "gpu") == "gpu" for c in cfg["cells"]), name


#: the refusal with what differs per config (the cell count, the example cell) left out
REFUSAL = re.compile(r"attnbench: error: trainer\.accelerator='gpu': CUDA is not available on this machine "
                     r"\(torch \S+, CUDA build \S+\), so (\d+) cells \(e\.g\. [^)]+\) cannot run here; valid here: "
                     r"--accelerator cpu or auto \(or --launcher slurm/ray to run them on GPU nodes\)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_every_gpu_config_is_refused_without_cuda_with_the_same_line(dry, tmp_path, capsys, monkeypatch):
    import benchmarks.run.runner as runner

    def no_training(*args, **kwargs):  # a config that is not refused must not train here
        raise AssertionError("a *_gpu config got past the CUDA check and would have started its cells")

    monkeypatch.setattr(runner, "run_suite", no_training)
    monkeypatch.setattr(runner, "run_micro_benchmarks", no_training)
    for name in GPU_CONFIGS:
        out = tmp_path / name
        assert main(["run", name, "--out", str(out)] + (["--dry-run"] if dry else [])) == 2, name
        line = one_error_line(capsys)
        m = REFUSAL.fullmatch(line)
        assert m, line  # one pattern for every config: the same message
        assert int(m.group(1)) > 0
        assert not out.exists(), f"{name}: wrote {out} before refusing"
