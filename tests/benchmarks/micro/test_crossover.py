"""The shared speed crossover (benchmarks.micro.crossover) on made-up times."""

from __future__ import annotations

import math

import pytest

from benchmarks.micro.crossover import crossover


def test_the_crossing_is_interpolated_in_log_log_between_the_points_around_it():
    c = crossover({256: 4.0, 1024: 2.0, 4096: 0.5}, {256: 1.0, 1024: 1.0, 4096: 1.0})
    # log ratio +log 2 at 1024, -log 2 at 4096: zero half way in log L, sqrt(1024 * 4096)
    assert c["state"] == "crosses" and c["from_L"] == 4096 and c["at_L"] == pytest.approx(2048.0)
    assert c["ratios"] == {256: 4.0, 1024: 2.0, 4096: 0.5} and c["lengths"] == [256, 1024, 4096]
    uneven = crossover({100: 3.0, 1000: 1 / 3}, {100: 1.0, 1000: 1.0})
    assert uneven["at_L"] == pytest.approx(math.sqrt(100 * 1000))
    tie = crossover({8: 2.0, 64: 5.0}, {8: 1.0, 64: 5.0})  # equal counts as fast
    assert tie["from_L"] == 64 and tie["at_L"] == pytest.approx(64.0)


def test_only_a_crossing_that_lasts_counts_and_only_common_lengths():
    dip = crossover({1: 2.0, 2: 0.5, 4: 2.0, 8: 0.5}, {L: 1.0 for L in (1, 2, 4, 8)})
    assert dip["from_L"] == 8 and dip["state"] == "crosses"
    assert dip["at_L"] == pytest.approx(math.sqrt(32))  # between 4 (slower again) and 8
    again = crossover({1: 0.5, 2: 2.0}, {1: 1.0, 2: 1.0})  # faster, then slower at the largest L
    assert again["state"] == "never" and again["from_L"] is None and again["at_L"] is None
    assert crossover({1: 0.5, 2: 0.9, 3: 5.0}, {1: 1.0, 2: 1.0})["state"] == "always"  # L=3 has no peer
    assert crossover({1: 0.5}, {2: 1.0})["state"] == "no_data"
    always = crossover({16: 0.1, 32: 0.2}, {16: 1.0, 32: 1.0})
    assert always["from_L"] == 16 and always["at_L"] is None
