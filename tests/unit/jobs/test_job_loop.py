"""`rigscope run`'s loop (``JobRun.run``, through ``telemetry.loop.run_every``): one wait after each step, the job's
end wakes the wait at once, and no step follows the end."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from desktop.jobs.job import JobRun
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from tests.waits import DEADLINE_S

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGTERM to the job's process group")

SPIN = "import time\nwhile True: time.sleep(0.01)"
#: Ends once the file named by its argument exists.
UNTIL_FILE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)"


def _sampler() -> Sampler:
    return Sampler(SimulatedBackend(parse_profile_list("rtx4090-laptop")))


def test_the_injected_wait_follows_every_step_and_nothing_follows_the_jobs_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sampler = _sampler()
    calls: list[str] = []
    with (tmp_path / "out").open("wb") as out:
        run = JobRun([sys.executable, "-c", SPIN], sampler, stdout_fd=out.fileno(), stderr_fd=out.fileno(),
                     watchdog=False)
        step = run.step

        def counted_step() -> object:
            calls.append("step")
            return step()

        def wait(_seconds: float) -> None:
            calls.append("wait")
            if calls.count("wait") == 3:  # the job ends during the third wait
                run.forward(signal.SIGTERM)
                assert run.job is not None
                run.job.wait(DEADLINE_S)

        monkeypatch.setattr(run, "step", counted_step)
        run._wait = wait
        try:
            code = run.run()
        finally:
            sampler.close()
    assert code == 128 + signal.SIGTERM
    assert calls == ["step", "wait"] * 3
    assert len(run.trace.time_s) == 3  # one sample per step, none after the end


def test_the_jobs_end_wakes_the_wait_at_once_however_long_the_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With an hour's interval the run still ends with the job: the wait between steps is the job's own."""
    sampler = _sampler()
    release = tmp_path / "release"
    steps: list[float] = []
    codes: list[int] = []
    with (tmp_path / "out").open("wb") as out:
        run = JobRun([sys.executable, "-c", UNTIL_FILE, str(release)], sampler, interval_s=3600.0,
                     stdout_fd=out.fileno(), stderr_fd=out.fileno(), watchdog=False)
        step = run.step

        def releasing_step() -> object:
            snapshot = step()
            steps.append(snapshot.time_s)
            release.touch()  # the job ends now, early in the hour's wait after this step
            return snapshot

        monkeypatch.setattr(run, "step", releasing_step)
        thread = threading.Thread(target=lambda: codes.append(run.run()), daemon=True)
        try:
            thread.start()
            thread.join(DEADLINE_S)  # bounds a failure only: the run ends as soon as the job does
        finally:
            sampler.close()
    assert not thread.is_alive(), "the run waited out its interval after the job had ended"
    assert codes == [0]
    assert len(steps) == 1
