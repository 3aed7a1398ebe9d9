"""The guard beside the GPU temperature: unknown temperature, HBM temperature, other processes on the GPU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.guard import TEMP_UNKNOWN_LIMIT_S, RunWatch, memory_guard_temperature
from desktop.stress.devices import GpuTarget
from desktop.stress.records import judge_run
from desktop.stress.run_model import RunResult, SimClock, StressConfig
from desktop.stress.runner_factory import runner_factory
from desktop.telemetry.model import GpuInfo, GpuProcess, GpuReading
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

TRAINER = GpuProcess(pid=4242, gpu_index=0, name="python", user="alice", vram_mib=30_000.0,
                     command="python train.py --cfg \x1b[31ma.yaml")


class _Sim(SimulatedBackend):
    """The simulated laptop GPU with a temperature sensor that fails from ``fail_from_s``, an HBM sensor
    reading ``hbm_c`` and extra processes on the GPU."""

    def __init__(self, *, fail_from_s: float | None = None, hbm_c: float | None = None,
                 others: tuple[GpuProcess, ...] = ()) -> None:
        super().__init__(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=5)
        self.fail_from_s, self.hbm_c, self.others = fail_from_s, hbm_c, others
        self.t0: float | None = None

    def sample(self, now_s: float) -> list[GpuReading]:
        self.t0 = now_s if self.t0 is None else self.t0
        out = []
        for read in super().sample(now_s):
            reading = read
            if read.sample is not None and self.fail_from_s is not None and now_s - self.t0 >= self.fail_from_s:
                reading = replace(read, sample=replace(read.sample, temperature_c=None))
            out.append(replace(reading, memory_temperature_c=self.hbm_c))
        return out

    def processes(self) -> list[GpuProcess]:
        return [*super().processes(), *self.others]


def _run(backend: _Sim, seconds: float = 60.0) -> tuple[RunResult, list[str]]:
    make = runner_factory(lambda: backend, clock=SimClock(real_s_per_s=0.0))
    runner = make(StressConfig(target=GpuTarget("sim"), duration_s=seconds))
    warnings: list[str] = []
    runner.on_warning = warnings.append
    result = runner.run()
    return result, warnings


def test_an_unknown_temperature_stops_the_run_within_seconds_and_the_verdict_says_so() -> None:
    result, _ = _run(_Sim(fail_from_s=20.0))
    assert result.status == "guard"
    assert "temperature unknown" in result.message
    stopped_after_s = result.ended_s - result.started_s
    assert 20.0 + TEMP_UNKNOWN_LIMIT_S <= stopped_after_s <= 20.0 + TEMP_UNKNOWN_LIMIT_S + 2.0
    verdict = judge_run(result)
    assert verdict.status == "aborted" and "temperature unknown" in verdict.sentence


def test_a_temperature_that_comes_back_keeps_the_run_going() -> None:
    watch = RunWatch()
    assert watch.unknown_temperature(None, 0.0) is None
    assert watch.unknown_temperature(None, 4.0) is None
    assert watch.unknown_temperature(60.0, 4.5) is None  # read again: the count starts over
    assert watch.unknown_temperature(None, 5.0) is None
    assert watch.unknown_temperature(None, 9.0) is None
    assert "temperature unknown for 5 s" in (watch.unknown_temperature(None, 10.0) or "")


def test_hot_hbm_stops_the_run() -> None:
    result, _ = _run(_Sim(hbm_c=96.0))
    assert result.status == "guard" and "memory (HBM) at 96 °C >= 95 °C" in result.message
    result, _ = _run(_Sim(hbm_c=80.0), seconds=10.0)
    assert result.status == "completed"


def test_the_hbm_guard_follows_the_gpus_memory_threshold() -> None:
    a100 = GpuInfo(index=0, uuid="GPU-a", name="NVIDIA A100-SXM4-80GB", temp_memory_max_c=95.0)
    assert memory_guard_temperature(a100) == 98.0  # max operating + 3 °C, as for the core
    assert memory_guard_temperature(replace(a100, temp_memory_max_c=None)) == 95.0
    assert RunWatch.memory_too_hot(None, a100) is None  # no HBM sensor: nothing to guard


def test_a_foreign_process_is_named_at_the_start_and_the_verdict_says_the_run_was_shared() -> None:
    result, warnings = _run(_Sim(others=(TRAINER,)), seconds=30.0)
    assert result.status == "completed"
    assert len(warnings) == 1 and "pid 4242 python train.py" in warnings[0]
    assert "\x1b" not in warnings[0] and "\\x1b" in warnings[0]  # a hostile command is shown escaped
    extra = result.extra
    assert extra["foreign_processes_at_start"] == extra["shared_with"]
    verdict = judge_run(result)
    assert "Shared run" in verdict.sentence and "pid 4242" in verdict.sentence


def test_a_process_that_arrives_during_the_run_makes_it_shared_without_a_start_warning() -> None:
    watch = RunWatch(own_pids={100})
    own = GpuProcess(pid=100, gpu_index=0, name="python")
    assert watch.note_processes([own], 0) == []
    assert watch.note_processes([own, TRAINER, replace(TRAINER, pid=7, gpu_index=1),
                                 replace(TRAINER, pid=8, kind="graphics")], 0) == []
    assert list(watch.shared_with) == [4242]  # not the other GPU's, not a display process
    assert watch.extra() == {"shared_with": [watch.shared_with[4242]]}


def test_an_unshared_run_says_nothing_about_sharing() -> None:
    result, warnings = _run(_Sim(), seconds=10.0)
    assert warnings == [] and "shared_with" not in result.extra
    assert "Shared" not in judge_run(result).sentence


@pytest.mark.parametrize("hbm_c", [None, 50.0])
def test_hbm_reading_reaches_the_reading(hbm_c: float | None) -> None:
    backend = _Sim(hbm_c=hbm_c)
    assert backend.sample(0.0)[0].memory_temperature_c == hbm_c
