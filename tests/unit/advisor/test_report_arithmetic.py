"""Report arithmetic (issue 24): percentage points, a partial week per day, longest <= busy, one name per cause.

Before: "+55.6 %" for a change of a percentage; a one-day previous week compared with a full
one without saying so; "3 min busy ... longest 4 min burst"; "HW slowdown 0 min" beside
"hardware slowdown 19.2 min" (the HW thermal slowdown under another name).
"""

from __future__ import annotations

import numpy as np
import pytest

from advisor.busy import DEFAULT_BUSY_UTIL_PCT as BUSY_PCT
from advisor.profile import gpu_profile
from advisor.rules import run_rules
from advisor.summary import Change, weekly_summary
from tests.unit.advisor.crafted import START_S, STEP_S, N, busy_mask, frame, gpu, processes

BUSY = busy_mask()
MINUTE = np.arange(N)


def test_a_change_of_a_percentage_is_in_percentage_points() -> None:
    change = Change(0, "Mean utilization while busy", 40.0, 45.2, "%")
    assert change.delta_unit == "pp"
    assert change.delta_text() == "+5.2 pp"
    assert Change(0, "Energy", 1.0, 0.5, "kWh").delta_text() == "-0.5 kWh"


def test_a_partial_week_is_labelled_and_its_sums_compared_per_day() -> None:
    # This "week" is the crafted 8 h; the previous one holds only its first 2 h (a partial week).
    before = frame()
    short = gpu()
    keep = slice(0, 120)
    cut = type(short)(meta=short.meta, time_s=short.time_s[keep], duration_s=short.duration_s[keep],
                      **{name: getattr(short, name)[keep] for name in (
                          "utilization_gpu_pct", "utilization_mem_pct", "vram_used_mib", "temperature_c", "power_w",
                          "energy_mj", "sm_clock_mhz", "mem_clock_mhz", "fan_pct", "pcie_gen", "pcie_width",
                          "clock_event_reasons")})
    before = frame(gpus=(cut,))
    s = weekly_summary(frame(), previous=before)
    changes = {c.label: c for c in s.changes}
    # 1 busy hour in 2 recorded hours before, 6 in 8 now: per recorded day 12 h and 18 h
    busy = changes["Busy hours per recorded day"]
    assert (busy.before, busy.after, busy.unit) == (pytest.approx(12.0), pytest.approx(18.0), "h/day")
    assert "Busy hours" not in changes
    assert "Mean utilization while busy" in changes  # a mean needs no per-day scaling
    assert "compared per recorded day" in s.changes_note
    assert "2 hours of history" in s.changes_note and "this week 8 hours" in s.changes_note


def test_full_weeks_compare_totals_without_a_note() -> None:
    s = weekly_summary(frame(), previous=frame())
    assert "Busy hours" in {c.label for c in s.changes} and s.changes_note == ""


def test_the_longest_stretch_is_never_longer_than_the_busy_time() -> None:
    # One 4 min stretch of which 3 min busy (a dip under the busy threshold inside it).
    util = np.zeros(N)
    util[100:104] = [95.0, BUSY_PCT / 2, 95.0, 95.0]
    g = gpu(utilization_gpu_pct=util)
    f = frame(gpus=(g,), processes=processes([(0, 7, "bench.py", 2000.0, util > 0)]))
    profile = gpu_profile(f, g)
    reason = profile.reasons["bursts"]
    assert reason.startswith("1 stretch, 3 min busy"), reason
    assert reason.endswith("longest: a 3 min burst"), reason


def test_the_hw_thermal_slowdown_has_one_name_in_summary_and_advice() -> None:
    hot = BUSY & (MINUTE >= 300)
    reasons = np.where(hot & (MINUTE >= 400), 0x40 | 0x20, np.where(hot, 0x20, np.where(BUSY, 0, 1)))
    g = gpu(clock_event_reasons=reasons.astype(np.int64), temperature_c=np.where(hot, 88.0, 60.0))
    f = frame(gpus=(g,))
    recs = run_rules(f)
    thermal = next(r for r in recs if r.rule_id == "thermal_throttling")
    labels = [e.label for e in thermal.evidence]
    assert "Of it at the HW thermal slowdown" in labels
    assert not any("hardware slowdown" in label for label in labels)
    s = weekly_summary(f, recommendations=recs)
    assert s.gpus[0].hw_thermal_minutes == pytest.approx(thermal.evidence_value("Of it at the HW thermal slowdown"))
    # "Throttled" is the time under any cause, not the sum of overlapping causes
    assert s.gpus[0].throttled_minutes == pytest.approx(120.0)
    assert START_S > 0 and STEP_S == 60.0
