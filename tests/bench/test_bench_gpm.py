"""What measured SM activity (GPM) costs per tick: NVML calls of Rigscope's sampler on a GeForce and on a Hopper.

Same set-up as test_bench_sampler.py (the fake pynvml, one process per GPU, processes every 5 ticks):
a GPU with GPM adds two calls per tick (one sample, one metrics computation), one without adds none.
The counts are deterministic and asserted; CPU time is printed only.
"""

from __future__ import annotations

import os
import time

from desktop.telemetry.nvml import NvmlBackend
from desktop.telemetry.sampler import Sampler
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, FakeProcess, hopper_gpu

LATENCY_S = 10e-6
PROCESS_PERIOD = 5
TICKS = 200


def _calls_per_tick(gpu: FakeGpu) -> tuple[float, float, float]:
    """(NVML calls per tick, of which GPM, CPU µs per tick) over TICKS ticks after a warm-up."""
    fake = FakeNvml([gpu], latency_s=LATENCY_S)
    backend = NvmlBackend.open(fake.module)
    clock = [0.0]
    sampler = Sampler(backend, None, process_period_s=float(PROCESS_PERIOD), clock=lambda: 1e9 + clock[0],
                      monotonic=lambda: clock[0])

    def tick() -> None:
        clock[0] += 1.0
        fake.advance(1.0)
        sampler.tick()

    try:
        for _ in range(PROCESS_PERIOD):
            tick()
        fake.reset_counts()
        cpu0 = time.process_time()
        for _ in range(TICKS):
            tick()
        cpu_us = (time.process_time() - cpu0) / TICKS * 1e6
        gpm = sum(n for name, n in fake.calls.items() if name.startswith("nvmlGpm"))
        return fake.total_calls() / TICKS, gpm / TICKS, cpu_us
    finally:
        sampler.close()


def test_bench_gpm_calls_per_tick() -> None:
    pid = os.getpid()
    geforce = _calls_per_tick(FakeGpu(processes=[FakeProcess(pid)]))
    hopper = _calls_per_tick(hopper_gpu(processes=[FakeProcess(pid)]))
    print(f"\nGPM cost: fake NVML, {LATENCY_S * 1e6:.0f} µs busy-wait per call, processes every {PROCESS_PERIOD} ticks")
    for name, (calls, gpm, cpu_us) in (("GeForce (no GPM)", geforce), ("Hopper (GPM)", hopper)):
        print(f"  {name:<18}{calls:>6.1f} NVML calls/tick (GPM {gpm:.1f}){cpu_us:>8.0f} CPU µs/tick")
    assert geforce[1] == 0.0
    assert hopper[1] == 2.0
    assert hopper[0] == geforce[0] + 2.0
