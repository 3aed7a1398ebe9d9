"""A load just under the minimum never reads "Load of 30 s: too short ... (needs 30 s)" (issue 26)."""

from __future__ import annotations

import numpy as np

from desktop.stress.verdict_model import RunTrace, Verdict
from desktop.stress.verdict_text import sentence_for


def _verdict(load_s: float) -> Verdict:
    return Verdict(status="too_short", throttled=False, onset_s=None, peak=10.0, sustained=10.0,
                   sustained_ratio=1.0, unit="GFLOP/s", basis="throughput", clock_ratio=None, cause=None,
                   cause_family=None, onset_temperature_c=None, load_s=load_s)


def test_a_load_that_rounds_to_the_minimum_is_shown_with_its_tenths() -> None:
    trace = RunTrace(time_s=np.arange(3.0))
    text = sentence_for(_verdict(29.6), trace, min_load_s=30.0)
    assert text.startswith("Load of 29.6 s: too short for a sustained verdict (needs 30 s)"), text
    assert sentence_for(_verdict(12.0), trace, min_load_s=30.0).startswith("Load of 12 s: too short")
