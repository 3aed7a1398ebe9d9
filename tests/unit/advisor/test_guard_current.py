"""A guard at or below the GPU's temperature at the start is refused: the run would stop at its first sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.guard import GuardRefused, check_guard_above_current
from desktop.cli import main
from desktop.errors import UserError
from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner_factory import runner_factory
from desktop.telemetry.model import GpuInfo
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

LAPTOP = GpuInfo(index=0, uuid="GPU-x", name="NVIDIA GeForce RTX 4090 Laptop GPU", temp_slowdown_c=87.0,
                 temp_shutdown_c=99.0, temp_max_operating_c=87.0)


def test_a_guard_at_or_below_the_current_temperature_is_refused_naming_both() -> None:
    for guard_c in (52.0, 50.0):
        with pytest.raises(GuardRefused, match=r"--guard-c .* current temperature of NVIDIA GeForce RTX 4090 "
                                               r"Laptop GPU \(52 °C\).*stop at once"):
            check_guard_above_current(LAPTOP, guard_c, 52.0)
    check_guard_above_current(LAPTOP, 53.0, 52.0)  # above it: the run may go on
    check_guard_above_current(LAPTOP, 40.0, None)  # temperature unknown: nothing to refuse
    check_guard_above_current(LAPTOP, None, 80.0)  # no guard at all


def test_the_message_says_where_the_guard_came_from() -> None:
    with pytest.raises(GuardRefused, match=r"set in Settings .*raise the setting"):
        check_guard_above_current(LAPTOP, 45.0, 60.0, source="setting")
    with pytest.raises(GuardRefused, match=r"GPU's own limits.*cool down"):
        check_guard_above_current(LAPTOP, 45.0, 60.0, source="default")


def _sim() -> SimulatedBackend:
    return SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=5)


def test_the_runner_refuses_before_any_load_and_a_guard_above_runs() -> None:
    make = runner_factory(_sim, clock=SimClock(real_s_per_s=0.0))
    start_c = _sim().sample(0.0)[0].sample.temperature_c  # the simulated laptop at rest
    assert start_c is not None
    runner = make(StressConfig(target=GpuTarget("sim"), duration_s=5.0, guard_c=start_c))
    with pytest.raises(UserError, match="current temperature"):
        runner.run()
    runner = make(StressConfig(target=GpuTarget("sim"), duration_s=5.0, guard_c=start_c + 10.0))
    assert runner.run().status == "completed"
    # A configured absolute guard is checked too (it came from Settings, and says so).
    setting = runner_factory(_sim, guard_absolute_c=start_c, clock=SimClock(real_s_per_s=0.0))
    with pytest.raises(UserError, match="set in Settings"):
        setting(StressConfig(target=GpuTarget("sim"), duration_s=5.0)).run()


def test_cli_refuses_a_guard_below_the_current_temperature_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start_c = _sim().sample(0.0)[0].sample.temperature_c
    assert start_c is not None and start_c >= 30.0  # above the fixed room-temperature floor
    code = main(["stress", "--device", "sim", "--minutes", "0.02", "--guard-c", f"{start_c:g}",
                 "--db", f"{tmp_path}/h.sqlite"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--guard-c {start_c:g} °C is at or below the current temperature" in err
    assert "Traceback" not in err
