"""The limit in force at each moment (issue 32, "judging with a limit that moves").

A laptop's enforced power limit moves under load (Dynamic Boost: 80 -> 175 W on an RTX 40 Laptop
GPU). Judged against one static limit, a run held at its then-enforced 80 W read "46 % of its 175 W
power limit: another limit than the board power"; a run that spans a change must be judged step by
step, and its sentence must say when the limit moved.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest

from advisor.frame import held_most
from advisor.limit_series import limit_in_force, limit_steps
from advisor.verdict import RunTrace, judge

#: 2026-03-02 10:00:00 UTC; the sentences are read with TZ=UTC.
T0 = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")  # the sentence says local times
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _gemm(limits_w: list[tuple[int, float]], *, clock_per_w: float = 19.5, seed: int = 3) -> RunTrace:
    """A 1 Hz GEMM held at each limit in turn ((seconds, limit W) pairs), with the SW power cap bit set."""
    rng = np.random.default_rng(seed)
    limit = np.concatenate([np.full(seconds, watts) for seconds, watts in limits_w])
    n = limit.shape[0]
    power = limit - np.abs(rng.normal(0.0, 0.01, n)) * limit
    clock = limit * clock_per_w + rng.normal(0.0, 15.0, n)
    return RunTrace(time_s=T0 + np.arange(n, dtype=np.float64), sm_clock_mhz=clock, power_w=power,
                    utilization_gpu_pct=np.full(n, 100.0), clock_event_reasons=np.full(n, 4.0),
                    temperature_c=np.full(n, 70.0), sm_clock_max_mhz=3105.0, power_limit_w=175.0,
                    power_limit_source="log", power_limit_series_w=limit)


def test_a_run_at_its_then_enforced_limit_is_judged_at_that_limit_not_the_last_one() -> None:
    """The issue's case: the static limit (the log's last, 175 W) made an 80 W run '46 % of its 175 W limit'."""
    verdict = judge(_gemm([(180, 80.0)]), min_load_s=60.0)
    assert verdict.power_cap == "at_limit" and verdict.power_limit_w == 80.0
    assert "at its 80 W power limit the whole run" in verdict.sentence
    assert "175 W" not in verdict.sentence and "another limit" not in verdict.sentence
    assert verdict.power_limit_steps == []  # one limit held: nothing moved


def test_a_run_that_spans_a_limit_change_is_judged_piecewise_and_says_when(utc: None) -> None:
    verdict = judge(_gemm([(240, 80.0), (240, 175.0)]), min_load_s=60.0)
    assert "at its 80 W power limit until 10:04, then at its 175 W limit" in verdict.sentence, verdict.sentence
    assert "each step judged at its own limit" in verdict.sentence
    assert [(s["limit_w"], s["power_cap"]) for s in verdict.power_limit_steps] == [(80.0, "at_limit"),
                                                                                   (175.0, "at_limit")]
    assert [s["start_s"] for s in verdict.power_limit_steps] == [T0, T0 + 240.0]
    assert verdict.power_cap == "at_limit" and verdict.power_at_limit_share == pytest.approx(1.0)
    assert "another limit" not in verdict.sentence and "%" not in verdict.sentence.split(";")[0]


def test_a_step_below_its_own_limit_is_said_with_its_share_of_that_limit(utc: None) -> None:
    """Each step against its own limit: 80 W drawn under a 105 W limit is 76 % of 105 W, not of the last 175 W."""
    trace = _gemm([(120, 80.0), (120, 80.0), (120, 175.0)])
    series = np.concatenate([np.full(120, 80.0), np.full(120, 105.0), np.full(120, 175.0)])
    verdict = judge(RunTrace(**{**trace.__dict__, "power_limit_series_w": series,
                                "clock_event_reasons": None}), min_load_s=60.0)
    assert [s["limit_w"] for s in verdict.power_limit_steps] == [80.0, 105.0, 175.0]
    assert "then at 79 W, 76 % of its 105 W limit until 10:04, then at its 175 W limit" in verdict.sentence, \
        verdict.sentence


def test_a_throttled_run_whose_limit_fell_says_the_steps(utc: None) -> None:
    """Dynamic Boost withdrawn under load (175 -> 80 W): the clock falls with the limit, and the sentence says why."""
    verdict = judge(_gemm([(240, 175.0), (240, 80.0)]), min_load_s=60.0)
    assert verdict.throttled and verdict.cause == "power_cap"
    assert "at its 175 W power limit until 10:04, then at its 80 W limit" in verdict.sentence, verdict.sentence


def test_the_limit_in_force_fills_gaps_from_the_last_known_value_and_falls_back_to_the_scalar() -> None:
    nan = np.nan
    filled = limit_in_force(np.array([nan, 80.0, nan, nan, 175.0, nan]), 150.0, 6)
    assert filled is not None and filled.tolist() == [80.0, 80.0, 80.0, 80.0, 175.0, 175.0]
    unknown = limit_in_force(np.full(3, nan), 150.0, 3)
    assert unknown is not None and unknown.tolist() == [150.0] * 3
    assert limit_in_force(None, None, 3) is None and limit_in_force(np.full(3, nan), None, 3) is None


def test_a_blip_or_a_wobble_of_the_limit_is_no_step() -> None:
    time_s = np.arange(100, dtype=np.float64)
    limit = np.full(100, 80.0)
    limit[50:52] = 175.0  # two samples at another limit: a blip
    limit[70:] = 80.6  # a re-read that wobbles by a fraction of a watt
    assert [(s.start, s.stop, s.limit_w) for s in limit_steps(time_s, limit)] == [(0, 100, 80.0)]
    limit[60:] = 105.0
    assert [(s.start, s.stop, s.limit_w) for s in limit_steps(time_s, limit)] == [(0, 60, 80.0), (60, 100, 105.0)]


def test_the_trace_reads_the_series_from_a_power_limit_column() -> None:
    """The agreed interface with the history (w32lim): a ``power_limit_w`` column is the series."""
    columns = {"power_w": np.array([70.0, 79.0, 79.0]), "power_limit_w": np.array([80.0, 80.0, 175.0])}
    trace = RunTrace.from_columns(np.arange(3.0), columns, power_limit_w=150.0)
    assert trace.power_limit_series_w is not None and trace.power_limit_series_w.tolist() == [80.0, 80.0, 175.0]
    assert trace.power_limit_w == 150.0
    assert RunTrace.from_columns(np.arange(3.0), {"power_w": columns["power_w"]}).power_limit_series_w is None


def test_effective_load_reads_the_limit_in_force_at_each_sample() -> None:
    """78 W is at the 80 W limit in force (the cap binds: the reading is the utilization), not at 175 W."""
    from advisor.effective_load import Calibration, estimate_array

    cal = Calibration(5.0, 150.0, 2200.0, "datasheet")
    power = np.full(20, 78.0)
    limit = np.concatenate([np.full(10, 80.0), np.full(10, 175.0)])
    limit[3] = np.nan  # unknown in one sample: no cap from the limit there (the bit or the hold still can)
    pct = estimate_array(cal, power, np.full(20, 2200.0), np.full(20, 100.0), power_limit_w=limit, hold_samples=1)
    assert pct[:3].tolist() == [100.0] * 3 and pct[4:10].tolist() == [100.0] * 6
    assert pct[3] < 100.0 and (pct[10:] < 100.0).all()
    scalar = estimate_array(cal, power, np.full(20, 2200.0), np.full(20, 100.0), power_limit_w=80.0, hold_samples=1)
    assert scalar.tolist() == [100.0] * 20


def test_a_blip_as_the_run_starts_and_a_limit_on_both_sides_of_an_idle_step_are_one_step() -> None:
    time_s = np.arange(100, dtype=np.float64)
    limit = np.full(100, 80.0)
    limit[:2] = 175.0  # the limit read before nvidia-powerd lowered it, two samples
    assert [(s.start, s.stop, s.limit_w) for s in limit_steps(time_s, limit)] == [(0, 100, 80.0)]
    from advisor.limit_series import loaded_steps

    limit = np.concatenate([np.full(40, 80.0), np.full(20, 175.0), np.full(40, 80.0)])
    loaded = np.ones(100, dtype=bool)
    loaded[40:60] = False  # the 175 W stretch fell in a bridged pause: the run is at 80 W throughout
    assert [(s.start, s.stop, s.limit_w) for s in loaded_steps(time_s, limit, loaded)] == [(0, 100, 80.0)]


def test_a_limit_that_keeps_moving_is_said_as_its_range(utc: None) -> None:
    """nvidia-powerd can move the limit every few seconds: the sentence gives the range, not 12 times 'then'."""
    limits = [(30, 80.0 + 8.0 * (i % 4)) for i in range(12)]
    verdict = judge(_gemm(limits), min_load_s=60.0)
    assert len(verdict.power_limit_steps) == 12
    assert "at its power limit 100 % of the load as the limit moved 11 times between 80 and 104 W" \
        in verdict.sentence, verdict.sentence
    assert "then" not in verdict.sentence


def test_a_run_whose_limit_came_back_is_weighed_against_the_limit_held_most_as_a_job_card_is() -> None:
    """One figure for 'the limit in force over most of the run': 80 W for 60 s, 175 W for 90 s, 80 W again for
    60 s held 80 W for 120 of its 210 s. The verdict took its longest single step (175 W) while the job card
    and a range's figures (``frame.held_most``) said 80 W for the same samples."""
    trace = _gemm([(60, 80.0), (90, 175.0), (60, 80.0)])
    verdict = judge(trace, min_load_s=60.0)
    assert [s["limit_w"] for s in verdict.power_limit_steps] == [80.0, 175.0, 80.0]
    assert trace.power_limit_series_w is not None
    held = held_most(trace.power_limit_series_w, np.ones(trace.time_s.shape[0]))
    assert held == 80.0
    assert verdict.power_limit_w == held
