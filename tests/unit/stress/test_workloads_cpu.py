"""Real workloads on the CPU (torch's CPU kernels) in a real child process, through the runner."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from desktop.stress.devices import GpuTarget
from desktop.stress.records import exit_code, judge_run
from desktop.stress.run_model import Progress, StressConfig
from desktop.stress.runner import StressRunner

# Never import torch here: it must stay out of the test process (as out of the GUI), and a
# torch import leaves deprecated objects that make the UI tests' gc scan warn.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")

SMALL = {"gemm": 256, "bandwidth": 1 << 20, "train": 64, "infer": 64}


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie waiting for init to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize("workload", ["gemm", "bandwidth", "train", "infer"])
def test_each_workload_runs_and_verifies_on_the_cpu(workload: str) -> None:
    runner = StressRunner(StressConfig(workload=workload, target=GpuTarget("cpu"), duration_s=1.5, size=SMALL[workload],
                                       threads=1))
    result = runner.run()
    assert result.status == "completed", result.message
    assert result.throughput.size >= 1 and (result.throughput > 0).all()
    assert result.checks >= 1 and result.errors == 0
    assert result.unit == {"gemm": "TFLOP/s", "bandwidth": "GB/s"}.get(workload, "steps/s")
    if workload == "infer":
        assert 0 < result.extra["p50_ms"] <= result.extra["p95_ms"] <= result.extra["p99_ms"]
    assert runner.child_pid is not None and _gone(runner.child_pid)


def test_a_corrupted_result_is_counted_as_an_error() -> None:
    result = StressRunner(StressConfig(workload="gemm", target=GpuTarget("cpu"), duration_s=1.5, size=128, threads=1,
                                       inject_faults=True)).run()
    assert result.status == "completed"
    assert result.errors >= 1 and result.checks >= 1
    # Which elements: one per check, in one 128 x 128 tile of the 128 x 128 C.
    assert result.extra["mismatch"] == {"elements": 1, "checked": 128 * 128, "tile_size": 128, "tile_count": 1,
                                        "tiles": [[0, 0]]}
    verdict = judge_run(result)
    assert verdict.status == "errors" and "result error" in verdict.sentence
    assert exit_code(result, verdict) == 3


def test_cancel_stops_the_child_within_a_second() -> None:
    running = threading.Event()

    def on_progress(p: Progress) -> None:
        if p.phase == "running":
            running.set()

    runner = StressRunner(StressConfig(workload="gemm", target=GpuTarget("cpu"), duration_s=120.0, size=256, threads=1),
                          on_progress=on_progress)
    stamps: list[float] = []

    def cancel_when_running() -> None:
        running.wait(60.0)
        stamps.append(time.monotonic())
        runner.cancel()

    canceller = threading.Thread(target=cancel_when_running)
    canceller.start()
    result = runner.run()
    returned = time.monotonic()
    canceller.join()
    assert result.status == "cancelled"
    assert returned - stamps[0] < 1.0
    assert runner.child_pid is not None and _gone(runner.child_pid)


def test_the_child_dies_when_the_parent_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        from desktop.stress.devices import GpuTarget
        from desktop.stress.run_model import StressConfig
        from desktop.stress.runner import StressRunner
        config = StressConfig(workload="gemm", target=GpuTarget("cpu"), duration_s=300.0, size=128, threads=1)
        StressRunner(config, on_child_started=lambda pid: print(pid, flush=True)).run()
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[3])
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert not _gone(child_pid)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + 60.0  # bounds a failure only (tests/waits.py DEADLINE_S): a busy machine reaps late
    while not _gone(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child_pid)


def test_a_workload_that_cannot_start_is_reported_as_crashed() -> None:
    result = StressRunner(StressConfig(workload="gemm", target=GpuTarget("cpu"), dtype="tf32", duration_s=30.0)).run()
    assert result.status == "crashed" and "tf32" in result.message
    verdict = judge_run(result)
    assert verdict.status == "aborted" and exit_code(result, verdict) == 4


def test_cli_cpu_run_saves_and_says_it_is_too_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.cli import main

    code = main(["stress", "--device", "cpu", "--workload", "bandwidth", "--minutes", "0.02", "--json",
                 "--db", str(tmp_path / "h.sqlite")])
    report = json.loads(capsys.readouterr().out)
    assert code == report["exit_code"] == 7, report["message"]  # 1.2 s: saved, but too short to judge
    assert report["gpu"]["uuid"] == "cpu" and report["verdict"]["unit"] == "GB/s"
    assert report["checks"] >= 1 and report["errors"] == 0 and report["run_id"] is not None
