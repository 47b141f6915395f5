"""End to end (issue 34.1): a real run of a windowed model whose window covers every sentence
stores the data's longest input as ``data.max_len`` (not in ``data.info``, which `attnbench eval`
compares), and its REPORT.md shows the pattern as full attention beside the configured one."""

from __future__ import annotations

import json

from tasks.common.registry import get_task
from tests.helpers.suites import run_config

DATA = {"num_train": 120, "num_val": 30, "num_test": 30, "batch_size": 16}
SUITE = """
suite: window
seeds: 1
trainer: {{max_epochs: 1, accelerator: cpu}}
cells:
  - task: pos_tagging
    dataset: synthetic
    dataset_params: {data}
    models: [transformer_truncated]
    model_params: {{transformer_truncated: {{word_dim: 16, char_dim: 8, char_out: 16, d_model: 16, num_heads: 2,
                                            num_layers: 1, dim_feedforward: 32, window: {window}}}}}
    module_params: {{warmup_steps: 0}}
"""


def _records(out):
    recs = [json.loads(p.read_text()) for p in out.rglob("*.json")]
    return [r for r in recs if isinstance(r, dict) and r.get("model") == "transformer_truncated"]


def test_a_covering_window_is_reported_as_full_attention_end_to_end(tmp_path):
    spec = get_task("pos_tagging").datasets.get("synthetic")
    dm = spec.build(None, str(tmp_path / "cache"), 0, **{**spec.params, **DATA})
    dm.setup("fit")
    longest = max(int(ds[i][0].shape[0]) for ds in (dm.splits["train"], dm.splits["val"]) for i in range(len(ds)))
    assert isinstance(longest, int) and longest > 2
    code, out, _ = run_config(tmp_path, SUITE.format(data=json.dumps(DATA), window=longest - 1), "--launcher", "inline")
    assert code == 0
    (rec,) = _records(out)
    assert rec["status"] == "ok" and rec["data"]["max_len"] == longest
    assert "max_len" not in rec["data"]["info"]  # the same-training-data check is unchanged
    report = next(out.rglob("REPORT.md")).read_text()
    assert f"truncated (w={longest - 1}) = full: inputs <= {longest}" in report
