"""One simulated machine, several readers: the window's sampler and a stress run see the same GPU.

Also the window's simulated workloads (training, inference, a forgotten notebook) and the
per-process utilization shares the simulated GPU reports, which add up to its utilization.
"""

from __future__ import annotations

import os

import pytest

from desktop.telemetry.model import ClockEventReason
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import (
    WORKLOADS,
    Demand,
    ManualLoad,
    ProcessDetail,
    SimulatedBackend,
    combine,
    parse_profile_list,
)

T0 = 1_790_000_000.0
HELD = ("clock_event_sw_power_cap_s", "clock_event_sw_thermal_s", "clock_event_hw_thermal_s",
        "clock_event_hw_power_brake_s")


def laptop(seed: int = 0) -> SimulatedBackend:
    return SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=seed, user="me")


def test_a_view_reads_the_same_gpu_and_its_load() -> None:
    window = laptop()
    stress = window.view()
    assert stress.machine is window.machine and stress.devices() == window.devices()
    window.sample(T0)
    assert stress.manual is window.manual and stress.manual is not None
    stress.manual.set(0, 1.0, 12_000.0, "rigscope-stress", 4321)
    for t in range(1, 301):  # five minutes of full load, advanced by the stress run's reader only
        stress.sample(T0 + t)
    seen_by_window = window.sample(T0 + 300)[0].sample
    assert seen_by_window is not None and seen_by_window.temperature_c is not None
    assert seen_by_window.temperature_c >= 80.0 and seen_by_window.power_w is not None
    assert seen_by_window.power_w > 100.0 and seen_by_window.utilization_gpu_pct is not None
    assert seen_by_window.utilization_gpu_pct >= 95.0
    assert [(p.pid, p.name) for p in window.processes()] == [(4321, "rigscope-stress")]


def test_an_earlier_time_from_another_clock_never_moves_the_model_back() -> None:
    window = laptop()
    stress = window.view()
    assert window.manual is not None
    window.manual.set(0, 1.0)
    stress.sample(T0)
    for t in range(1, 601):  # the stress run's accelerated clock races ten minutes ahead
        stress.sample(T0 + t)
    hot = stress.sample(T0 + 600)[0].sample
    # The window's clock is still at the start: its reading is the machine as it is now, not a replay.
    late = window.sample(T0 + 5)[0].sample
    assert hot is not None and late is not None and late.temperature_c is not None
    assert hot.temperature_c is not None and abs(late.temperature_c - hot.temperature_c) <= 1.0
    assert late.energy_mj == hot.energy_mj  # no time passed for the model: no energy either


def test_each_reader_gets_its_own_throttle_counter_intervals() -> None:
    """Two readers at different rates each see every second under a cause, as one reader alone would."""
    alone = laptop(seed=1)
    shared = laptop(seed=1)
    other = shared.view()
    for backend in (alone, shared):
        assert backend.manual is not None
        backend.manual.set(0, 1.0)
    totals: dict[str, list[float]] = {"alone": [0.0] * 4, "shared": [0.0] * 4, "other": [0.0] * 4}
    for t in range(0, 601):
        readers = [("alone", alone), ("shared", shared)] + ([("other", other)] if t % 7 == 0 else [])
        for name, backend in readers:
            sample = backend.sample(T0 + t)[0].sample
            assert sample is not None
            for i, field in enumerate(HELD):
                value = getattr(sample, field)
                if value is not None:
                    totals[name][i] += value
    # The laptop at full load throttles thermally within ten minutes: there is something to count.
    assert totals["alone"][1] > 60.0
    assert totals["shared"] == pytest.approx(totals["alone"], abs=1e-6)
    # The slower reader misses at most its last partial interval (under 7 s) and its first one.
    for got, want in zip(totals["other"], totals["alone"], strict=True):
        assert want - 7.0 <= got <= want + 1e-6


def test_training_shows_its_process_command_and_its_share_of_the_gpu() -> None:
    backend = laptop()
    machine = backend.machine
    workload = machine.start_workload("training", 0, now_s=T0)
    assert workload is WORKLOADS["training"]
    # T0 + 200 s is past the 30 s evaluation pause at the start of each 5-minute period.
    assert (T0 + 200.0) % workload.period_s >= workload.quiet_s
    sampler = Sampler(backend, clock=lambda: T0 + 200.0, process_period_s=0.0)
    backend.sample(T0)
    snap = sampler.tick()
    reading = snap.gpus[0].sample
    assert reading is not None and reading.utilization_gpu_pct is not None
    (proc,) = snap.processes
    assert (proc.pid, proc.name, proc.user, proc.container) == (2311, "python", "me", None)
    assert proc.command == "python train.py --cfg llama.yaml" and proc.started_s == T0
    assert proc.vram_mib == round(0.85 * 16376)
    assert proc.sm_util_pct == pytest.approx(reading.utilization_gpu_pct)
    assert proc.mem_util_pct == pytest.approx(reading.utilization_mem_pct)
    assert reading.utilization_gpu_pct >= 90.0 and reading.vram_used_mib is not None
    assert reading.vram_used_mib >= proc.vram_mib
    assert machine.stop_workloads() == 1
    backend.sample(T0 + 201.0)
    assert backend.processes() == []


def test_sm_shares_of_several_processes_add_up_to_the_utilization() -> None:
    backend = laptop()
    machine = backend.machine
    machine.start_workload("notebook", 0, now_s=T0)
    machine.start_workload("inference", 0, now_s=T0)
    assert backend.manual is not None
    backend.manual.set(0, 0.3, 500.0, "rigscope-stress", os.getpid(), command="rigscope stress")
    busy = WORKLOADS["inference"]
    t = T0 + busy.quiet_s + 1.0  # inside the inference server's busy part of its period
    assert T0 % busy.period_s == 0
    backend.sample(T0)
    reading = backend.sample(t)[0].sample
    assert reading is not None and reading.utilization_gpu_pct is not None
    procs = {p.pid: p for p in backend.processes()}
    assert set(procs) == {os.getpid(), 7300, 5120}
    assert sum(p.sm_util_pct or 0.0 for p in procs.values()) == pytest.approx(reading.utilization_gpu_pct)
    assert procs[5120].sm_util_pct == 0.0 and procs[5120].vram_mib == 6141  # held, idle
    inference, stress = procs[7300].sm_util_pct, procs[os.getpid()].sm_util_pct
    assert inference is not None and stress is not None
    assert inference / stress == pytest.approx(busy.load / 0.3)  # in proportion to what each asks
    assert reading.vram_used_mib == 320 + 500 + 6141 + round(0.55 * 16376)


def test_the_inference_server_comes_in_bursts() -> None:
    manual = ManualLoad()
    manual.start(0, "inference", 16376.0)
    loads = {manual.demand(0, T0 + s).load for s in range(0, 80)}
    assert loads == {WORKLOADS["inference"].load, WORKLOADS["inference"].quiet_load}


def test_ending_a_simulated_process_stops_its_workload_never_a_real_process() -> None:
    backend = laptop()
    machine = backend.machine
    machine.start_workload("notebook", 0)
    assert backend.manual is not None
    backend.manual.set(0, 1.0, 1000.0, "rigscope-stress", os.getpid())
    assert machine.end_process(5120) is None and [w.key for w in machine.workloads()] == []
    refusal = machine.end_process(os.getpid())
    assert refusal is not None and "Cancel on the Stress test page" in refusal
    assert backend.manual.demand(0, T0).load == 1.0  # the test goes on
    assert "not a simulated workload" in (machine.end_process(1) or "")


def test_an_unknown_workload_or_gpu_is_refused_with_the_known_names() -> None:
    machine = laptop().machine
    with pytest.raises(ValueError, match="known: training, inference, notebook"):
        machine.start_workload("mining")
    with pytest.raises(ValueError, match="no simulated GPU 3"):
        machine.start_workload("training", 3)


def test_combined_demands_add_loads_and_memory_and_mix_intensity_by_load() -> None:
    a = Demand(load=0.6, vram_mib=1000, mem_util=0.2, processes=((1, "a", 1000.0),), intensity=1.0)
    b = Demand(load=0.6, vram_mib=500, mem_util=0.8, processes=((2, "b", 500.0),), intensity=0.5,
               details=(ProcessDetail(0.6, "b --serve"),))
    both = combine([a, b])
    assert both.load == 1.0 and both.vram_mib == 1500
    assert both.mem_util == pytest.approx(0.5) and both.intensity == pytest.approx(0.75)
    assert both.details == (ProcessDetail(0.6), ProcessDetail(0.6, "b --serve"))


def test_thermal_throttling_reaches_every_reader() -> None:
    backend = laptop()
    stress = backend.view()
    assert stress.manual is not None
    stress.manual.set(0, 1.0)
    for t in range(0, 600):
        stress.sample(T0 + t)
    reading = backend.sample(T0 + 600)[0].sample
    assert reading is not None and reading.clock_event_reasons is not None
    assert reading.clock_event_reasons & int(ClockEventReason.SW_THERMAL_SLOWDOWN)
