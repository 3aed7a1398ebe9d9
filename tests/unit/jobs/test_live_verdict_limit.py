"""`rigscope run`'s own verdict weighs the job against the limit in force while it ran (issue 32).

The simulated RTX 4090 Laptop runs the job in Eco (80 W) and is switched to Extreme Performance just before the
job ends; the NVML info then reads 175 W. Before, the live verdict took that last info's limit for the whole job:
"power cap active … of its 175 W power limit: another limit than the board power".
"""

from __future__ import annotations

import sys

from desktop.jobs.job import JobRun
from desktop.jobs.trace_frame import trace_series
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

T0 = 1_790_000_000.0


def test_the_live_verdict_reads_the_limit_of_the_job_s_own_samples() -> None:
    clock = [T0]
    load = ManualLoad()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), load, seed=1)
    sampler = Sampler(backend, clock=lambda: clock[0], monotonic=lambda: clock[0])
    backend.machine.set_envelope(shift_mode="eco")
    load.set(0, 1.0, 8000.0, "train.py", 4242)
    run = JobRun([sys.executable, "-c", "pass"], sampler, name="train.py", clock=lambda: clock[0], watchdog=False)
    try:
        for step in range(300):
            if step == 290:
                backend.machine.set_envelope(shift_mode="turbo")
            snapshot = sampler.tick()
            run.trace.add(snapshot)
            run.infos.update({r.info.index: r.info for r in snapshot.gpus})
            clock[0] += 1
    finally:
        sampler.close()
    assert run.infos[0].power_limit_enforced_w == 175.0  # the info read last
    verdict = run.verdict()
    assert verdict is not None
    assert verdict["power_limit_w"] == 80.0, verdict["sentence"]
    # Judged at the limit in force: 80 W for most of the job, the last 10 s at 175 W said as its own step.
    assert "at its 80 W power limit" in verdict["sentence"] and "another limit" not in verdict["sentence"]
    # The job's own samples as a frame (where the history has none) carry it per row too.
    time_s, columns = run.trace.arrays(0)
    series = trace_series(run.infos[0], time_s, columns)
    assert series is not None and series.limit_in_force() == 80.0
    assert series.power_limit_w is not None and series.power_limit_w[-1] == 175.0
