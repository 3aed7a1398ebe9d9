"""A stress run keeps the limit in force at each sample, and its verdict judges each moment at it (issue 32).

The runner judged the whole run at the limit read when it started: on the simulated RTX 4090
Laptop switched from Balanced (150 W) to Extreme Performance (175 W, Dynamic Boost) halfway, the
second half was judged against 150 W.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from advisor.verdict import judge
from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

SWITCH_AFTER_S = 300.0


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class _SwitchingClock(SimClock):
    """Simulated time that switches the laptop to Extreme Performance (turbo) ``SWITCH_AFTER_S`` into the run."""

    def __init__(self, backend: SimulatedBackend) -> None:
        super().__init__()
        self.backend = backend
        self.switch_at_s = self.time_s + SWITCH_AFTER_S

    def sleep(self, seconds: float, cancel: threading.Event) -> None:
        super().sleep(seconds, cancel)
        if self.time_s >= self.switch_at_s > 0:
            self.switch_at_s = -1.0
            self.backend.machine.set_envelope(shift_mode="turbo")


def test_a_mode_switch_during_a_stress_run_is_judged_step_by_step(utc: None) -> None:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=3)
    backend.machine.set_envelope(shift_mode="comfort")
    clock = _SwitchingClock(backend)
    result = StressRunner(StressConfig(target=GpuTarget("sim"), duration_s=600.0), Sampler(backend, clock=clock.now),
                          clock=clock).run()
    limits = result.columns["power_limit_w"]
    assert limits.shape == result.time_s.shape
    known = np.isfinite(limits)
    assert set(limits[known].tolist()) == {150.0, 175.0} and (np.diff(limits[known]) >= 0).all()  # one step up
    step_s = float(result.time_s[known][np.argmax(limits[known] == 175.0)] - result.time_s[0])
    assert abs(step_s - SWITCH_AFTER_S) <= 2.0, step_s
    verdict = judge(result.trace(), min_load_s=30.0, steady_state=True)
    assert [step["limit_w"] for step in verdict.power_limit_steps] == [150.0, 175.0]
    assert verdict.power_limit_w == 175.0  # the limit in force at the end, not the one read at the start
    switch = time.strftime("%H:%M", time.gmtime(float(verdict.power_limit_steps[1]["start_s"])))  # type: ignore[arg-type]
    assert f"of its 150 W power limit until {switch}, then " in verdict.sentence, verdict.sentence
    assert "175 W limit: the limit moved under load" in verdict.sentence
