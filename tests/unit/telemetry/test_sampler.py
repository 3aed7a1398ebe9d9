"""The sampler reads every backend once per tick and polls processes on their own period."""

from __future__ import annotations

from collections.abc import Sequence

from desktop.telemetry.model import DeviceState, GpuProcess, HostSample
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def wall(self) -> float:
        return self.now

    def mono(self) -> float:
        return self.now - 1_700_000_000.0


class FakeHost:
    def __init__(self) -> None:
        self.described = 0

    def sample(self) -> HostSample:
        return HostSample(cpu_pct=12.5, ram_used_mib=1000.0, ram_total_mib=4000.0)

    def describe(self, processes: Sequence[GpuProcess]) -> list[GpuProcess]:
        self.described += 1
        return list(processes)


class CountingBackend(SimulatedBackend):
    def __init__(self) -> None:
        super().__init__(parse_profile_list("rtx4090-laptop,rtx4090"))
        self.process_calls = 0
        self.reinit_calls = 0

    def processes(self) -> list[GpuProcess]:
        self.process_calls += 1
        return super().processes()

    def reinit(self) -> None:
        self.reinit_calls += 1
        super().reinit()


def test_tick_returns_a_snapshot_of_every_gpu_and_the_host() -> None:
    clock = Clock()
    backend = CountingBackend()
    assert backend.manual is not None
    backend.manual.set(0, 1.0, 3000, name="train.py", pid=42)
    sampler = Sampler(backend, FakeHost(), clock=clock.wall, monotonic=clock.mono)
    snap = sampler.tick()
    assert snap.time_s == clock.now
    assert [g.info.index for g in snap.gpus] == [0, 1]
    assert snap.source.simulated
    assert snap.host is not None and snap.host.cpu_pct == 12.5
    assert [(p.pid, p.name, p.gpu_index) for p in snap.processes] == [(42, "train.py", 0)]
    assert snap.processes_fresh
    reading = snap.reading(0)
    assert reading is not None and reading.sample is not None and reading.sample.utilization_gpu_pct


def test_processes_are_polled_on_their_own_period() -> None:
    clock = Clock()
    backend = CountingBackend()
    sampler = Sampler(backend, FakeHost(), process_period_s=5.0, clock=clock.wall, monotonic=clock.mono)
    fresh = []
    for _ in range(12):
        fresh.append(sampler.tick().processes_fresh)
        clock.now += 1.0
    assert backend.process_calls == 3  # ticks 0, 5 and 10
    assert fresh == [True, False, False, False, False, True, False, False, False, False, True, False]


def test_simulated_processes_are_not_looked_up_on_the_host() -> None:
    clock = Clock()
    host = FakeHost()
    Sampler(CountingBackend(), host, clock=clock.wall, monotonic=clock.mono).tick()
    assert host.described == 0  # simulated pids do not exist on this machine


def test_lost_gpu_is_retried_on_the_reinit_period_and_comes_back() -> None:
    clock = Clock()
    backend = CountingBackend()
    sampler = Sampler(backend, None, reinit_period_s=10.0, clock=clock.wall, monotonic=clock.mono)
    backend.model.set_lost(1, True)
    states = []
    for _ in range(12):
        snap = sampler.tick()
        states.append(snap.gpus[1].state)
        assert snap.gpus[0].state is DeviceState.OK  # the other GPU keeps sampling
        clock.now += 1.0
    assert backend.reinit_calls == 1
    assert states[:11] == [DeviceState.LOST] * 11
    assert states[11] is DeviceState.OK


def test_forced_simulation_uses_the_requested_profiles() -> None:
    backend = open_gpu_backend("rtx4090,h100")
    assert backend.source.simulated and backend.source.fallback_reason is None
    assert [d.name for d in backend.devices()] == [
        "NVIDIA GeForce RTX 4090 (simulated)",
        "NVIDIA H100 80GB HBM3 (simulated)",
    ]
