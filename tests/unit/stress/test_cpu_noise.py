"""A CPU stress run is judged against the noise band of its own warm-up (issue 26): a busy
2-core machine's ±5 % wander is not "Throttled: unexplained slowdown"; a real drop still is."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest

from advisor.verdict import judge
from desktop.stress.cpu_noise import warmup_noise_pct
from desktop.stress.devices import GpuTarget
from desktop.stress.records import exit_code, judge_run
from desktop.stress.run_model import RunResult, StressConfig
from desktop.stress.runner import StressRunner
from desktop.stress.trace import SAMPLE_FIELDS

N = 30  # `stress --device cpu --minutes 0.5`: 30 one-second samples


def wandering(seed: int = 50) -> np.ndarray:
    """A CPU rate of 100 wandering with the machine's other work: AR(1) (phi 0.8), ±5 % or so."""
    rng = np.random.default_rng(seed)
    e = np.zeros(N)
    for i in range(1, N):
        e[i] = 0.8 * e[i - 1] + rng.normal(0.0, 0.02)
    return 100.0 * (1.0 + e)


def cpu_result(throughput: np.ndarray, *, with_noise: bool = True) -> RunResult:
    t = np.arange(float(N))
    extra = {"warmup_noise_pct": warmup_noise_pct(t, throughput)} if with_noise else {}
    return RunResult("completed", "finished", StressConfig(target=GpuTarget("cpu"), duration_s=float(N)), 0.0, float(N),
                     "GFLOP/s", "fp32", t, throughput, {name: np.full(N, np.nan) for name in SAMPLE_FIELDS},
                     extra=extra)


def test_a_wander_within_the_warmup_noise_held_its_speed() -> None:
    rate = wandering()
    assert 4.0 < float(np.ptp(rate) / 100.0 * 100) / 2 < 8.0  # about ±5 %
    plain = judge(cpu_result(rate).trace(), min_load_s=30.0, steady_state=True)
    assert plain.throttled and plain.cause == "unexplained"  # the fixed 95 % line alone: the verdict
    verdict = judge_run(cpu_result(rate))
    assert not verdict.throttled and verdict.status == "passed", verdict.sentence
    assert verdict.sentence.startswith("Held its speed") and "wandered ±" in verdict.sentence
    assert exit_code(cpu_result(rate), verdict) == 0
    assert judge_run(cpu_result(rate, with_noise=False)).throttled  # no band measured: the fixed line


@pytest.mark.parametrize("seed", [7, 11, 50, 105])
def test_a_real_drop_beyond_the_band_stays_throttled(seed: int) -> None:
    rate = wandering(seed) * np.where(np.arange(N) >= 15, 0.75, 1.0)  # a quarter lost halfway
    verdict = judge_run(cpu_result(rate))
    assert verdict.throttled and verdict.status == "throttled", verdict.sentence


def test_a_steady_run_has_a_small_band_and_too_few_samples_none() -> None:
    t = np.arange(float(N))
    steady = 100.0 + 0.2 * np.sin(t)
    noise = warmup_noise_pct(t, steady)
    assert noise is not None and noise < 0.5
    assert warmup_noise_pct(t[:4], steady[:4]) is None


CHILD = """
import json, sys
rates = json.loads(sys.argv[1])
def emit(record):
    sys.stdout.write(json.dumps(record) + "\\n"); sys.stdout.flush()
emit({"type": "start", "unit": "GFLOP/s", "dtype": "fp32"})
for i, rate in enumerate(rates):
    emit({"type": "progress", "t": float(i), "throughput": rate, "errors": 0, "checks": 1})
emit({"type": "done", "errors": 0, "checks": 1})
"""


class _CpuRunner(StressRunner):
    def child_command(self) -> list[str]:
        return [sys.executable, "-c", CHILD, json.dumps(wandering().tolist())]


def test_the_runner_measures_the_band_of_a_cpu_run() -> None:
    runner = _CpuRunner(StressConfig(target=GpuTarget("cpu"), duration_s=float(N), interval_s=0.05))
    result = runner.run()
    assert result.status == "completed", result.message
    expected = warmup_noise_pct(np.arange(float(N)), wandering())
    assert result.extra["warmup_noise_pct"] == pytest.approx(expected)
    assert not judge_run(result).throttled


#: `rigscope stress --device cpu --minutes 1` on this project's shared 2-core machine while four other
#: engineers ran tests (GFLOP/s, 1 Hz): the rate wandered between 4.4 and 13.1.
SHARED_2_CORE_GFLOPS = [
    6.47, 6.61, 6.58, 7.53, 6.48, 5.84, 6.43, 7.69, 9.71, 7.67, 6.89, 7.43, 7.19, 9.58, 10.48, 8.33, 9.13, 7.13, 8.47,
    11.12, 11.85, 13.11, 6.63, 7.49, 8.19, 7.4, 9.09, 8.36, 8.72, 7.99, 7.67, 8.55, 7.75, 9.77, 8.79, 9.77, 11.24,
    12.5, 8.48, 10.22, 7.65, 6.44, 9.43, 12.66, 10.35, 6.78, 5.03, 6.12, 5.92, 5.08, 5.47, 4.47, 4.53, 4.41, 4.85,
    4.66, 5.1]


def test_a_machine_too_busy_to_tell_is_inconclusive_not_throttled_nor_held() -> None:
    rate = np.asarray(SHARED_2_CORE_GFLOPS)
    n = rate.size
    t = np.arange(float(n))
    result = RunResult("completed", "finished", StressConfig(target=GpuTarget("cpu"), duration_s=float(n)), 0.0,
                       float(n), "GFLOP/s", "fp32", t, rate, {name: np.full(n, np.nan) for name in SAMPLE_FIELDS},
                       extra={"warmup_noise_pct": warmup_noise_pct(t, rate)})
    assert judge(result.trace(), min_load_s=30.0, steady_state=True).throttled  # the fixed line: "Throttled"
    verdict = judge_run(result)
    assert verdict.status == "inconclusive" and not verdict.throttled, verdict.sentence
    assert verdict.sentence.startswith("Inconclusive: the CPU's rate wandered ±")
    assert "Held its speed" not in verdict.sentence and exit_code(result, verdict) == 7


@pytest.mark.parametrize("seed", [7, 50])
def test_a_drop_while_other_work_took_the_cores_names_that_work(seed: int) -> None:
    """Issue 37: a drop beyond the band on a machine whose other work used the cores read "Throttled:
    unexplained slowdown"; it names the other load (measured by the runner) and is inconclusive (7)."""
    rate = wandering(seed) * np.where(np.arange(N) >= 15, 0.75, 1.0)
    result = cpu_result(rate)
    busy = dataclasses.replace(result, extra={**result.extra, "other_cpu_cores": 1.4, "cpu_cores": 2})
    verdict = judge_run(busy)
    assert verdict.status == "inconclusive" and not verdict.throttled, verdict.sentence
    assert verdict.sentence.startswith("Inconclusive: other work used 1.4 of the 2 cores during the run")
    assert "unexplained" not in verdict.sentence and exit_code(busy, verdict) == 7
    quiet = dataclasses.replace(result, extra={**result.extra, "other_cpu_cores": 0.1, "cpu_cores": 2})
    assert judge_run(quiet).throttled  # an idle machine: the drop is the CPU's


def test_the_runner_measures_the_other_load_on_the_cores() -> None:
    """The CPU run carries how many cores' worth of CPU the rest of the machine used (>= 0, at most all)."""
    runner = _CpuRunner(StressConfig(target=GpuTarget("cpu"), duration_s=float(N), interval_s=0.05))
    result = runner.run()
    other, cores = result.extra["other_cpu_cores"], result.extra["cpu_cores"]
    assert isinstance(cores, int) and cores >= 1
    assert other is not None and 0.0 <= other <= cores + 0.5
