"""The thermal guard's controller: pause at T, resume at T - offset, minimum pause and run durations."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from advisor.guard import GuardRefused, GuardSettings, ThermalGuard, check_guard_c
from desktop.telemetry.model import GpuInfo


def _drive(guard: ThermalGuard, temps: Sequence[float | None], step_s: float = 1.0) -> list[tuple[float, str]]:
    actions: list[tuple[float, str]] = []
    for i, temp in enumerate(temps):
        action = guard.update(temp, i * step_s)
        if action:
            actions.append((i * step_s, action))
    return actions


def test_pauses_at_the_limit_at_once_and_resumes_at_limit_minus_offset() -> None:
    guard = ThermalGuard(GuardSettings(80.0, resume_offset_c=5.0, min_pause_s=0.0, min_run_s=0.0), 0.0)
    assert _drive(guard, [70, 79.9, 80, 79, 76, 75.1, 75, 74]) == [(2.0, "pause"), (6.0, "resume")]


def test_the_minimum_pause_holds_the_job_even_when_already_cool() -> None:
    guard = ThermalGuard(GuardSettings(80.0, min_pause_s=10.0, min_run_s=0.0), 0.0)
    temps: list[float | None] = [81.0, *[60.0] * 15]
    assert _drive(guard, temps) == [(0.0, "pause"), (10.0, "resume")]


def test_the_minimum_run_after_a_resume_keeps_it_from_flapping() -> None:
    settings = GuardSettings(80.0, resume_offset_c=5.0, min_pause_s=20.0, min_run_s=20.0)
    guard = ThermalGuard(settings, 0.0)
    # The temperature swings across the whole band every 2 s for ten minutes (within the 3 °C overshoot).
    temps: list[float | None] = [82.0 if (i // 2) % 2 == 0 else 70.0 for i in range(600)]
    actions = _drive(guard, temps)
    pauses = [t for t, a in actions if a == "pause"]
    resumes = [t for t, a in actions if a == "resume"]
    assert pauses[0] == 0.0
    assert all(b - a >= 20.0 for a, b in zip(pauses, resumes, strict=False))  # each pause held >= 20 s
    assert all(b - a >= 20.0 for a, b in zip(resumes, pauses[1:], strict=False))  # each run held >= 20 s
    assert len(pauses) <= 600 / 40 + 1  # at most 1.5 stops a minute


def test_the_minimum_run_never_lets_the_gpu_run_past_the_overshoot() -> None:
    settings = GuardSettings(80.0, resume_offset_c=5.0, min_pause_s=20.0, min_run_s=20.0, max_overshoot_c=3.0)
    guard = ThermalGuard(settings, 0.0)
    # Paused at 80, cooled to 75 by 20 s, resumed; then it heats 2 °C a second: 81 and 82 are within the
    # overshoot (the minimum run holds), 83 is not: stopped at once, 4 s into the 20 s minimum run.
    temps: list[float | None] = [80.0, *[75.0] * 20, 77.0, 79.0, 81.0, 82.0, 83.0, 85.0]
    assert _drive(guard, temps) == [(0.0, "pause"), (20.0, "resume"), (25.0, "pause")]


def test_a_gpu_that_keeps_overrunning_is_still_stopped_at_most_three_times_a_minute() -> None:
    guard = ThermalGuard(GuardSettings(80.0, min_pause_s=20.0, min_run_s=20.0), 0.0)
    temps: list[float | None] = [90.0 if (i // 2) % 2 == 0 else 70.0 for i in range(600)]
    pauses = [t for t, a in _drive(guard, temps) if a == "pause"]
    assert len(pauses) <= 600 / 20 + 1  # the minimum pause alone bounds it


def test_an_unknown_temperature_changes_nothing() -> None:
    guard = ThermalGuard(GuardSettings(80.0, min_pause_s=0.0), 0.0)
    assert _drive(guard, [None, 90.0, None, None, 60.0]) == [(1.0, "pause"), (4.0, "resume")]


def test_paused_time_is_counted_the_running_pause_included() -> None:
    guard = ThermalGuard(GuardSettings(80.0, min_pause_s=0.0, min_run_s=0.0), 0.0)
    guard.update(85.0, 10.0)
    assert guard.total_paused_s(15.0) == 5.0
    guard.update(70.0, 30.0)
    guard.update(90.0, 40.0)
    assert guard.total_paused_s(41.0) == 21.0


def _gpu(shutdown: float | None) -> GpuInfo:
    return GpuInfo(index=0, uuid="GPU-x", name="Test GPU", temp_shutdown_c=shutdown)


@pytest.mark.parametrize("guard_c", [20.0, float("nan"), 101.0, 95.0])
def test_a_guard_below_room_temperature_or_at_shutdown_is_refused(guard_c: float) -> None:
    with pytest.raises(GuardRefused):
        check_guard_c(guard_c, [_gpu(95.0)])


def test_a_guard_below_shutdown_is_accepted() -> None:
    check_guard_c(85.0, [_gpu(95.0), _gpu(None)])


@pytest.mark.parametrize(("guard_c", "refused"), [(30.0, True), (40.0, True), (40.5, False), (85.0, False)])
def test_a_guard_at_or_below_the_temperature_now_plus_the_resume_offset_is_refused(guard_c: float,
                                                                                   refused: bool) -> None:
    """Issue 21, defect 6: at 35 °C a 30 °C guard paused the job at its first sample and never resumed it."""
    if refused:
        with pytest.raises(GuardRefused, match="resume offset"):
            check_guard_c(guard_c, [_gpu(95.0)], {0: 35.0}, resume_offset_c=5.0)
    else:
        check_guard_c(guard_c, [_gpu(95.0)], {0: 35.0}, resume_offset_c=5.0)


def test_a_gpu_whose_temperature_is_unknown_is_checked_against_its_limits_only() -> None:
    check_guard_c(31.0, [_gpu(95.0)], {}, resume_offset_c=5.0)
