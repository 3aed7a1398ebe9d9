"""What `rigscope run` costs a job: output passed through (MB/s, against `cat` alone) and CPU while it watches.

Figures are printed (``make bench`` runs with -s), never asserted:
- pass-through: ``cat`` of a 256 MB file through ``WrappedJob`` (the relay `rigscope run` uses, with the
  tqdm parser reading every chunk) into /dev/null, against ``cat`` writing to /dev/null itself, and the
  wrapper's CPU seconds (``resource.getrusage``: its relay threads) per GB;
- watching: ``JobRun`` sampling the simulated GPU every second for a 10 s job that sleeps: the wrapper's
  CPU seconds over the job's wall time, the share of one core the wrapper takes from the job's machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

from advisor.progress import OutputProgress
from desktop.jobs.job import JobRun
from desktop.jobs.wrap import WrappedJob
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

pytestmark = pytest.mark.skipif(os.name != "posix", reason="cat and /dev/null")
SIZE_MB = 256
WATCH_S = 10.0


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run-bench") / "data.bin"
    block = os.urandom(1 << 20)  # random bytes: "/s" and "s/" turn up as in any binary stream
    with path.open("wb") as handle:
        for _ in range(SIZE_MB):
            handle.write(block)
    return path


def test_bench_pass_through_against_cat(big_file: Path) -> None:
    with open(os.devnull, "wb") as null:
        start = time.perf_counter()
        subprocess.run(["cat", str(big_file)], stdout=null, check=True)
        plain_s = time.perf_counter() - start

        parsers = {1: OutputProgress(), 2: OutputProgress()}
        cpu0 = _self_cpu_s()
        start = time.perf_counter()
        job = WrappedJob(["cat", str(big_file)], stdout_fd=null.fileno(), stderr_fd=null.fileno(),
                         on_output=lambda stream, chunk, t: parsers[stream].feed(chunk, t))
        assert job.wait(600) == 0
        assert job.finish_output(60)
        wrapped_s = time.perf_counter() - start
        wrapper_cpu_s = _self_cpu_s() - cpu0
    print(f"\n[run-wrapper] {SIZE_MB} MB: cat alone {SIZE_MB / plain_s:,.0f} MB/s; through rigscope run's relay "
          f"{SIZE_MB / wrapped_s:,.0f} MB/s; wrapper CPU {wrapper_cpu_s:.2f} s "
          f"({wrapper_cpu_s / (SIZE_MB / 1024):.2f} s per GB)")


def test_bench_cpu_while_watching_a_job(tmp_path: Path) -> None:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    sampler = Sampler(backend, process_period_s=5.0)
    with (tmp_path / "out").open("wb") as out:
        run = JobRun(["sleep", f"{WATCH_S:g}"], sampler, interval_s=1.0, stdout_fd=out.fileno(),
                     stderr_fd=out.fileno())
        cpu0 = _self_cpu_s()
        start = time.perf_counter()
        assert run.run() == 0
        wall_s = time.perf_counter() - start
        cpu_s = _self_cpu_s() - cpu0
    sampler.close()
    print(f"\n[run-wrapper] watching a {WATCH_S:g} s job at 1 Hz (simulated GPU, watchdog included): wrapper CPU "
          f"{cpu_s * 1000:.0f} ms over {wall_s:.1f} s = {100 * cpu_s / wall_s:.2f} % of one core")
