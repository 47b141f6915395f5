"""``cheap_cuda_probe``: without a GPU, Lightning's NVML-based CUDA check (uncached, a dlopen of
NVML per call, asked by Adam at every step) is switched off; with a GPU it stays."""

import os

import lightning  # noqa: F401 - sets PYTORCH_NVML_BASED_CUDA_CHECK=1, as in every cell
import torch

from benchmarks.run.cell import cheap_cuda_probe

VAR = "PYTORCH_NVML_BASED_CUDA_CHECK"


def test_without_a_gpu_the_nvml_check_goes(monkeypatch):
    monkeypatch.setenv(VAR, "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cheap_cuda_probe()
    assert VAR not in os.environ


def test_with_a_gpu_it_stays(monkeypatch):
    monkeypatch.setenv(VAR, "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cheap_cuda_probe()
    assert os.environ.get(VAR) == "1"
