"""`rigscope run`'s loop on the simulated GPU with a fast clock: the job is the load, the guard really stops and
continues its process tree, with the hysteresis and minimum durations; PIDs and GPUs come from the process lists."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from advisor.guard import GuardSettings
from desktop.history.store import HistoryStore
from desktop.jobs.job import JobRun
from desktop.jobs.job_history import JobHistory
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGSTOP/SIGCONT")


class FastClock:
    """Simulated seconds that pass one per loop step, whatever the real time."""

    def __init__(self, start_s: float = 1_800_000_000.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s


def _stopped(pid: int) -> bool:
    return bool(psutil.Process(pid).status() == psutil.STATUS_STOPPED)


def _until(condition: object, timeout_s: float = 30.0) -> bool:  # bounds a failure only: generous under load
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_the_guard_pauses_and_resumes_the_simulated_gpu_with_hysteresis(tmp_path: Path) -> None:
    clock = FastClock()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    sampler = Sampler(backend, clock=clock, monotonic=clock, process_period_s=5.0)
    history = JobHistory(tmp_path / "h.db")
    history.open()
    settings = GuardSettings(70.0, resume_offset_c=5.0, min_pause_s=20.0, min_run_s=30.0)
    said: list[str] = []
    checks: list[tuple[bool, bool]] = []  # (guard says paused, process stopped) after each step
    out = (tmp_path / "out").open("wb")
    run = JobRun([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"], sampler, name="spin",
                 history=history, guard=settings, clock=clock, say=said.append, stdout_fd=out.fileno(),
                 stderr_fd=out.fileno(), watchdog=False)

    def wait(_seconds: float) -> None:
        assert run.guard is not None and run.job is not None
        paused = run.guard.paused
        job = run.job
        checks.append((paused, _until(lambda: _stopped(job.pid) == paused)))
        clock.now_s += 1.0
        if len(run.events) >= 4 or clock.now_s - run.record.started_s > 3600:
            run.forward(signal.SIGTERM)
            run.job.wait(10)

    run._wait = wait
    try:
        code = run.run()
        run.store_end(run.series()[0])
    finally:
        history.close()
        sampler.close()
        out.close()
    assert code == 128 + signal.SIGTERM
    assert all(ok for _, ok in checks), "the process was not stopped exactly while the guard held it"
    kinds = [e.kind for e in run.events]
    assert kinds == ["pause", "resume", "pause", "resume"]
    for event in run.events:
        assert event.temperature_c is not None
        if event.kind == "pause":
            assert event.temperature_c >= 70.0
        else:
            assert event.temperature_c <= 65.0
    times = [e.time_s for e in run.events]
    assert times[1] - times[0] >= 20.0 and times[3] - times[2] >= 20.0  # minimum pause
    assert times[2] - times[1] >= 30.0  # minimum run after a resume
    assert any("paused the job" in line for line in said)
    # The job's PID and the GPU it used came from the (simulated) process list; it is all in the history.
    assert run.record.pids[0] == run.job.pid if run.job else False
    assert run.record.gpu_indices == (0,)
    with HistoryStore.open(tmp_path / "h.db", readonly=True) as store:
        stored = store.job(run.record.job_id)
        timeline = store.events(0, clock.now_s + 1, kinds=["job_pause", "job_resume"])
        gpu_samples = store.conn.execute("SELECT COUNT(*) FROM gpu_samples").fetchone()[0]
    assert stored is not None and stored.exit_code == 143
    assert [e.kind for e in stored.events] == kinds
    assert len(timeline) == 4
    assert stored.paused_s == pytest.approx((times[1] - times[0]) + (times[3] - times[2]))
    assert gpu_samples > 60  # it held the writer lock, so it wrote the samples itself
