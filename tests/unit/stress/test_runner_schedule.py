"""The simulated run ticks through the one fixed-interval loop (telemetry.loop.run_every): on schedule, not drifting.

Its samples fall on ``started + n * interval_s``: the time a tick itself takes (a slow driver read) does not push
the later ones back, and the last one still lands on the duration. All on an injected clock.
"""

from __future__ import annotations

import numpy as np

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
    result = StressRunner(StressConfig(device="sim", duration_s=10.0, interval_s=1.0), _SlowSampler(backend, clock),
                          clock=clock).run()
    assert result.status == "completed"
    offsets_s = result.time_s - result.started_s
    # One a second on the schedule (each read a quarter second after its slot), then the last on the duration.
    np.testing.assert_array_equal(offsets_s[:-1], np.arange(10.0) + TICK_COST_S)
    assert offsets_s[-1] == 10.0 and result.ended_s - result.started_s == 10.0
