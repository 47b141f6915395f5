"""The speech comparisons of this folder's README: the best modern recurrence (minGRU) against the
peers of peers/, per task form, with the report's own statistics (paired t over the common seeds).
The report groups records by suite, and these are two suites (modern_recurrence, speech).
    python results/reference/cpu-2core-amd-epyc-avx2/modern_recurrence_speech/compare.py"""

import collections
import glob
import json
import statistics
from pathlib import Path

from benchmarks.report import stats

HERE = Path(__file__).resolve().parent
vals: dict = collections.defaultdict(dict)  # (dataset, model) -> {seed: test acc}
for d in (HERE / "runs", HERE / "peers" / "runs"):
    for f in glob.glob(str(d / "**" / "*.json"), recursive=True):
        r = json.loads(Path(f).read_text())
        if r["status"] == "ok":
            vals[(r["dataset"], r["model"])][r["seed"]] = r["test"]["acc"]
for ds in ("fsdd", "fsdd_frames"):
    for (d, m), v in sorted(vals.items(), key=lambda kv: -statistics.mean(kv[1].values())):
        if d == ds:
            print(f"{ds:12} {m:16} {statistics.mean(v.values()):.4f}  {[round(v[s], 4) for s in sorted(v)]}")
    for other in ("lstm", "cnn", "transformer_w16"):
        a, b = vals[(ds, "mingru")], vals[(ds, other)]
        seeds = sorted(set(a) & set(b))
        diff = stats.compare([a[s] for s in seeds], [b[s] for s in seeds], seeds, seeds, confidence=0.95)
        print(f"  mingru - {other}: {diff.diff:+.4f} [{diff.ci_low:+.4f}, {diff.ci_high:+.4f}] ({diff.method}, n={len(seeds)})")
