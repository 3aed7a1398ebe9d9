"""A stress run keeps the laptop's power envelope and the one line on its GPU's limit."""

from __future__ import annotations

from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list


def _run(backend: SimulatedBackend) -> dict[str, object]:
    clock = SimClock()
    runner = StressRunner(StressConfig(target=GpuTarget("sim"), duration_s=120.0), Sampler(backend, clock=clock.now),
                          clock=clock)
    return runner.run().extra


def test_run_on_battery_says_so() -> None:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=3)
    backend.machine.set_envelope(on_ac=False, battery_pct=71.0)
    extra = _run(backend)
    assert extra["power_limit_line"] == "capped at 56 W of 175 W: on battery"
    assert extra["power_limit_cause"] == "on_battery" and extra["on_ac"] is False and extra["battery_pct"] == 71.0


def test_run_in_turbo_is_at_rated_power() -> None:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=3)
    backend.machine.set_envelope(shift_mode="turbo")
    extra = _run(backend)
    assert extra["power_limit_line"] == "at its rated power (175 W)" and extra["firmware_mode"] == "turbo"


def test_desktop_card_has_no_laptop_cause() -> None:
    extra = _run(SimulatedBackend(parse_profile_list("rtx4090"), ManualLoad(), seed=3))
    assert extra["power_limit_cause"] == "rated" and extra["on_ac"] is None
