"""A stress run's clock is said against the GPU's own calibration once the history holds one (issue 32 item 3)."""

from __future__ import annotations

from pathlib import Path

from desktop.sessions.stress import calibration_clock, judge_and_save
from tests.unit.stress.test_runner_sim import sim_runner


def test_the_second_run_is_measured_against_the_first_runs_calibration(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    first = sim_runner(duration_s=120.0)[0].run()
    assert calibration_clock(db, first) is None  # no history yet: the run's own early level serves
    outcome = judge_and_save(db, first)
    assert outcome.run_id is not None and outcome.verdict.clock_reference_basis == "early"
    second = sim_runner(duration_s=120.0)[0].run()
    calibrated = calibration_clock(db, second)
    assert calibrated is not None and 1900.0 <= calibrated <= 1960.0  # the 150 W clock it held, not 3,105 MHz
    verdict = judge_and_save(db, second).verdict
    assert verdict.clock_reference_basis == "calibration" and verdict.clock_reference_mhz == calibrated
    assert f"of its own stress-run calibration ({calibrated:,.0f} MHz)" in verdict.sentence


def test_no_history_or_a_cpu_run_has_no_calibration(tmp_path: Path) -> None:
    result = sim_runner(duration_s=3.0)[0].run()
    assert calibration_clock(None, result) is None
    assert calibration_clock(tmp_path / "missing.sqlite", result) is None
