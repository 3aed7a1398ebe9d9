"""The simulated run ticks through the one fixed-interval loop (telemetry.loop.run_every): on schedule, not drifting.

Its samples fall on ``started + n * interval_s``: the time a tick itself takes (a slow driver read) does not
push the later ones back, and the last one still lands on the duration. A wait is never longer than one
interval, so a wall clock stepped back does not silence the samples (and the guard). All on injected clocks.
"""

from __future__ import annotations

import threading

import numpy as np

from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.model import Snapshot
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

TICK_COST_S = 0.25


class _SlowSampler(Sampler):
    """A sampler whose read takes a quarter of a second of the run's clock."""

    def __init__(self, backend: SimulatedBackend, clock: SimClock) -> None:
        super().__init__(backend, clock=clock.now)
        self.run_clock = clock

    def tick(self) -> Snapshot:
        snapshot = super().tick()
        self.run_clock.time_s += TICK_COST_S
        return snapshot


def test_a_slow_read_does_not_push_the_later_samples_back() -> None:
    clock = SimClock()
    backend = SimulatedBackend(parse_profile_list("rtx4090"), ManualLoad(), seed=3)
    result = StressRunner(StressConfig(target=GpuTarget("sim"), duration_s=10.0, interval_s=1.0),
                          _SlowSampler(backend, clock), clock=clock).run()
    assert result.status == "completed"
    offsets_s = result.time_s - result.started_s
    # One a second on the schedule (each read a quarter second after its slot), then the last on the duration.
    np.testing.assert_array_equal(offsets_s[:-1], np.arange(10.0) + TICK_COST_S)
    assert offsets_s[-1] == 10.0 and result.ended_s - result.started_s == 10.0


class _SteppedBackClock(SimClock):
    """The wall clock stepped back a minute (NTP) once, five seconds into the run."""

    def __init__(self) -> None:
        super().__init__()
        self.step_at_s = self.time_s + 5.0

    def sleep(self, seconds: float, cancel: threading.Event) -> None:
        super().sleep(seconds, cancel)
        if self.time_s >= self.step_at_s > 0:
            self.step_at_s = -1.0
            self.time_s -= 60.0


def test_a_wall_clock_stepped_back_does_not_stop_the_samples_or_the_guard() -> None:
    clock = _SteppedBackClock()
    backend = SimulatedBackend(parse_profile_list("rtx4090"), ManualLoad(), seed=3)
    config = StressConfig(target=GpuTarget("sim"), duration_s=20.0, interval_s=1.0)
    result = StressRunner(config, Sampler(backend, clock=clock.now), clock=clock).run()
    assert result.status == "completed"
    gaps_s = np.diff(result.time_s)
    # One step back of a minute, and every other sample a second after the one before (never a minute's silence).
    assert (gaps_s < 0).sum() == 1 and gaps_s[gaps_s > 0].max() == 1.0


def test_a_run_whose_last_wait_is_below_the_clocks_resolution_still_ends() -> None:
    # 10.05 s in steps of 0.7 s from an epoch time: the last wait comes to ~7e-13 s, which adding to 12,355 s
    # leaves unchanged; the run used to wait for it for ever.
    clock = SimClock(time_s=12345.678)
    backend = SimulatedBackend(parse_profile_list("rtx4090"), ManualLoad(), seed=3)
    runner = StressRunner(StressConfig(target=GpuTarget("sim"), duration_s=10.05, interval_s=0.7),
                          Sampler(backend, clock=clock.now), clock=clock)
    done: list[str] = []
    thread = threading.Thread(target=lambda: done.append(runner.run().status), daemon=True)
    thread.start()
    thread.join(60)  # a bound on a hang, not a timing: the run itself takes milliseconds
    runner.cancel()
    assert done == ["completed"]
    assert abs(clock.time_s - 12345.678 - 10.05) < 1e-3
