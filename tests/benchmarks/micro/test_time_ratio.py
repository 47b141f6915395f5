"""A time ratio check decides on each side's best run (``min_ms``), keeps the ratio of medians
beside it, and falls back to the medians where a point has no minimum."""

from benchmarks.micro.checks import format_checks, ratio_check


def _pt(**kw):
    return {"status": "ok", "method": "m", **kw}


def test_time_ratio_uses_the_best_runs_and_keeps_the_median_ratio():
    # the medians say 1.2 (a noisy baseline-free run of ours), the best runs say 0.9
    c = ratio_check("t", _pt(time_ms=12.0, min_ms=9.0), _pt(time_ms=10.0, min_ms=10.0), "<= 1.0", lambda v: v <= 1.0)
    assert c["pass"] is True and c["value"] == 0.9 and c["value_median"] == 1.2 and c["statistic"] == "min"
    assert (c["ours"], c["baseline"]) == (9.0, 10.0)
    assert "of medians 1.200" in format_checks([c])
    # a point without min_ms (an older record): the medians decide, as before
    c = ratio_check("t", _pt(time_ms=12.0), _pt(time_ms=10.0, min_ms=10.0), "<= 1.0", lambda v: v <= 1.0)
    assert c["pass"] is False and c["value"] == 1.2 and "value_median" not in c
    # memory ratios are untouched
    c = ratio_check("m", _pt(peak_mem_bytes=5, min_ms=1.0, time_ms=3.0), _pt(peak_mem_bytes=10, min_ms=2.0, time_ms=1.0),
                    "<= 0.6", lambda v: v <= 0.6, key="peak_mem_bytes")
    assert c["value"] == 0.5 and "value_median" not in c
