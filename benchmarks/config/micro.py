"""The micro-benchmarks ``attnbench bench NAME`` can run (and a suite's ``micro_benchmarks`` may
name): each names its module and shipped configs. Kept import-light: a module is imported only
when its benchmark runs. Their code lives in :mod:`benchmarks.micro`."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["MicroBenchmark", "MICRO_BENCHMARKS"]


@dataclass(frozen=True)
class MicroBenchmark:
    """One ``attnbench bench NAME``: ``module`` has ``main(config=, out=, device=, dtype=, sets=) -> int``;
    ``configs`` are its shipped configs, the first one its default."""

    name: str
    module: str
    summary: str
    configs: tuple[str, ...]

    @property
    def default_config(self) -> str:
        return self.configs[0]

    def run(self, **kwargs) -> int:
        return importlib.import_module(self.module).main(**kwargs)


_ALL = (
    MicroBenchmark("attention", "benchmarks.micro.attention",
                   "attention scaling: fwd+bwd time and peak memory vs sequence length and graph size "
                   "(and every registered attention pattern vs full SDPA: bench_attention_variants.yaml)",
                   ("bench_attention.yaml", "bench_attention_full.yaml", "bench_attention_variants.yaml")),
    MicroBenchmark("complexity", "benchmarks.micro.complexity",
                   "'Why Self-Attention' (Transformer paper, Table 1) measured: time/memory exponents in n and d, "
                   "sequential operations and maximum path length per layer type", ("bench_complexity.yaml",)),
    MicroBenchmark("decode", "benchmarks.micro.decode",
                   "decoding one token after a prefix of L: time and self-attention cache of every decoding "
                   "pattern (key/value cache or recurrent state) vs torch.nn.TransformerDecoder recomputing",
                   ("bench_decode.yaml",)),
    MicroBenchmark("recurrence", "benchmarks.micro.recurrence",
                   "recurrences: training-step time and peak memory vs L of the scan (odd/even doubling vs the "
                   "sequential loop) and of every registered recurrence vs torch.nn.GRU/LSTM, SDPA and truncated "
                   "attention: exponents, crossovers, depth, path length, float32 error", ("bench_recurrence.yaml",)),
    MicroBenchmark("train", "benchmarks.micro.train",
                   "what the cell machinery costs: steps/s of each domain's attention model and best baseline through "
                   "the real cell path (Lightning Trainer + task module + callbacks) vs a bare PyTorch loop, syncs per "
                   "step, GPU busy fraction", ("bench_train.yaml",)),
    MicroBenchmark("speech", "benchmarks.micro.speech",
                   "speech models: train-step time and peak memory per sequence vs length (500-4000 frames), "
                   "full vs truncated attention vs LSTM vs CNN", ("bench_speech.yaml",)),
)

#: ``attnbench bench NAME``: the registry of micro-benchmarks.
MICRO_BENCHMARKS: dict[str, MicroBenchmark] = {b.name: b for b in _ALL}
