"""A load just under the minimum never reads "Load of 30 s: too short ... (needs 30 s)" (issue 26)."""

from __future__ import annotations

import numpy as np

from advisor.verdict_model import RunTrace, Verdict
from advisor.verdict_text import sentence_for


def _verdict(load_s: float) -> Verdict:
    return Verdict(status="too_short", throttled=False, onset_s=None, peak=10.0, sustained=10.0,
                   sustained_ratio=1.0, unit="GFLOP/s", basis="throughput", clock_ratio=None, cause=None,
                   cause_family=None, onset_temperature_c=None, load_s=load_s)


def test_a_load_that_rounds_to_the_minimum_is_shown_with_its_tenths() -> None:
    trace = RunTrace(time_s=np.arange(3.0))
    text = sentence_for(_verdict(29.6), trace, min_load_s=30.0)
    assert text.startswith("Load of 29.6 s: too short for a sustained verdict (needs 30 s)"), text
    assert sentence_for(_verdict(12.0), trace, min_load_s=30.0).startswith("Load of 12 s: too short")


def test_a_throttled_sentence_names_every_cause_above_the_threshold_once_and_the_start_temperature() -> None:
    """The Quick verdict named SW thermal twice and left out HW thermal at 6.6 % of the load (above the 2 % rule),
    and did not say the test started from 63 °C (issue 26)."""
    verdict = Verdict(status="throttled", throttled=True, onset_s=40.0, peak=100.0, sustained=80.0,
                      sustained_ratio=0.8, unit="TFLOP/s", basis="throughput", clock_ratio=None, cause="sw_thermal",
                      cause_family="thermal", onset_temperature_c=87.0, load_s=120.0,
                      cause_shares={"sw_thermal": 0.68, "hw_thermal": 0.066, "power_brake": 0.01})
    trace = RunTrace(time_s=np.arange(3.0), temperature_c=np.array([np.nan, 63.2, 80.0]))
    text = sentence_for(verdict, trace)
    assert text.count("SW thermal") == 1, text
    assert "SW thermal slowdown at 87 °C (68 % of the time under load)" in text, text
    assert "also HW thermal slowdown 6.6 %" in text, text
    assert "power brake" not in text.lower()  # 1 %: under the threshold
    assert "the test started from 63 °C" in text
