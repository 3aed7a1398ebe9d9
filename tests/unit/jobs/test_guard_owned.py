"""What the guard and the watchdog signal (issue 21): the job's session as /proc shows it when they act, its state
read back rather than assumed, and what left the session named instead of counted as paused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from advisor.guard import GuardSettings
from desktop.jobs.job import JobRun
from desktop.jobs.wrap import WATCHDOG
from desktop.telemetry import owned
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from tests.waits import DEADLINE_S, WRITE_ATOMIC, read_when, until

pytestmark = pytest.mark.skipif(not owned.supported(), reason="/proc and sessions (Linux)")


class FastClock:
    def __init__(self, start_s: float = 1_800_000_000.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s


def _until(condition: Callable[[], bool], timeout_s: float = DEADLINE_S) -> None:
    until(condition, timeout_s)


def _state(pid: int) -> str:
    member = owned.read_stat(pid)
    return member.state if member is not None else "gone"


def _run(code: str, tmp_path: Path, clock: FastClock, said: list[str], **kwargs: object) -> JobRun:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    sampler = Sampler(backend, clock=clock, monotonic=clock, process_period_s=0.0)
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    # The simulated GPU idles at 35 °C: a 30 °C guard pauses at the first sample and never resumes.
    run = JobRun([sys.executable, "-c", code], sampler, guard=GuardSettings(30.0), clock=clock, say=said.append,
                 stdout_fd=out, stderr_fd=out, watchdog=False, interval_s=0.05, **kwargs)  # type: ignore[arg-type]
    os.close(out)  # the job holds its own copy through the relay's pipe
    return run


def _end(run: JobRun) -> None:
    if run.job is not None and run.job.poll() is None:
        os.killpg(run.job.pgid, signal.SIGKILL)
        run.job.wait(10)


def test_a_forwarded_signal_the_paused_job_ignores_does_not_switch_the_guard_off(tmp_path: Path) -> None:
    """Defect 5: the guard thought the job paused while it ran, and never paused it again."""
    ready = tmp_path / "ready"
    code = (f"import pathlib, signal, time\n"
            f"signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            f"pathlib.Path({str(ready)!r}).touch()\n"
            f"while True: time.sleep(0.01)\n")
    clock, said = FastClock(), list[str]()
    run = _run(code, tmp_path, clock, said)
    try:
        run.start()
        assert run.job is not None and run.guard is not None
        _until(ready.exists)
        run.step()
        assert run.guard.paused
        _until(lambda: _state(run.job.pid) == "T")  # type: ignore[union-attr]
        run.forward(signal.SIGINT)  # Ctrl+C: the job must be able to act on it, so it is continued
        _until(lambda: _state(run.job.pid) != "T")  # type: ignore[union-attr]
        clock.now_s += 1.0
        run.step()  # still hot: read back, the job runs, so the guard pauses it again (past the overshoot)
        _until(lambda: _state(run.job.pid) == "T")  # type: ignore[union-attr]
        assert run.guard.paused
        assert [e.kind for e in run.events] == ["pause", "resume", "pause"]
        assert any("continued from outside the guard" in line for line in said)
        assert run.guard.paused_s == pytest.approx(1.0)  # the time it really ran is not counted as paused
    finally:
        _end(run)


def test_a_sigcont_from_elsewhere_ends_the_pause_in_the_guards_books(tmp_path: Path) -> None:
    clock, said = FastClock(), list[str]()
    run = _run("import time\nwhile True: time.sleep(0.01)", tmp_path, clock, said)
    try:
        run.start()
        assert run.job is not None and run.guard is not None
        run.step()
        _until(lambda: _state(run.job.pid) == "T")  # type: ignore[union-attr]
        os.killpg(run.job.pgid, signal.SIGCONT)  # someone else
        _until(lambda: _state(run.job.pid) != "T")  # type: ignore[union-attr]
        clock.now_s += 5.0
        run.step()
        _until(lambda: _state(run.job.pid) == "T")  # type: ignore[union-attr]
        assert [e.kind for e in run.events] == ["pause", "resume", "pause"]
        assert run.guard.paused_s == pytest.approx(5.0)
    finally:
        _end(run)


DAEMON = r"""
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        while True:
            time.sleep(0.01)
    os._exit(0)
os.waitpid(pid, 0)
while True:
    time.sleep(0.01)
"""


def test_a_daemonised_worker_is_named_not_under_the_guard_instead_of_counted_as_paused(tmp_path: Path) -> None:
    """Defect 7: a double-forked, setsid worker is never stopped, yet the card said "paused"."""
    pid_file = tmp_path / "daemon.pid"
    clock, said = FastClock(), list[str]()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    sampler = Sampler(backend, clock=clock, monotonic=clock, process_period_s=0.0)
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    run = JobRun([sys.executable, "-c", DAEMON, str(pid_file)], sampler, guard=GuardSettings(30.0), clock=clock,
                 say=said.append, stdout_fd=out, stderr_fd=out, watchdog=False,
                 progress_path=tmp_path / "progress.jsonl")
    os.close(out)
    daemon = 0
    try:
        run.start()
        assert run.job is not None
        daemon = read_when(pid_file, int)
        run.step()
        _until(lambda: _state(run.job.pid) == "T")  # type: ignore[union-attr]
        # Out of the session: the guard cannot stop it. Its signals were sent within step(): a SIGSTOP for the
        # daemon would show now, taken or pending (``owned.is_stopped``), with no wait for it to land.
        member = owned.read_stat(daemon)
        assert member is not None and not owned.is_stopped(member)
        assert daemon in {pid for pid, _ in run.processes.escaped}
        note = run.guard_note()
        assert note is not None and note.startswith("not under the guard") and f"pid {daemon} " in note
        assert any(f"pid {daemon} " in line and "left the job's session" in line for line in said)
    finally:
        _end(run)
        if daemon:
            os.kill(daemon, signal.SIGKILL)


def _watchdog(*args: str) -> None:
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(WATCHDOG), *args], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.close()  # rigscope "died" without saying done
    assert proc.wait(10) == 0


def test_the_watchdog_continues_only_the_session_whose_leader_is_the_job_it_was_told() -> None:
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # stands in for a PID taken over
    try:
        os.kill(other.pid, signal.SIGSTOP)
        _until(lambda: _state(other.pid) == "T")
        leader = owned.read_stat(other.pid)
        assert leader is not None
        # The job it was told of started at another time: that session id is someone else's now.
        _watchdog("--pgid", str(other.pid), "--leader", f"{other.pid}:{leader.start_ticks + 1}")
        # The watchdog has exited: a SIGCONT it sent is delivered already (SIGCONT resumes as it is sent).
        assert _state(other.pid) == "T"
        _watchdog("--pgid", str(other.pid), "--leader", f"{other.pid}:{leader.start_ticks}")
        _until(lambda: _state(other.pid) != "T")
    finally:
        other.kill()
        other.wait(10)


def test_parse_stat_takes_a_name_with_spaces_and_parentheses() -> None:
    line = b"42 (a) b (c)) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0"
    member = owned.parse_stat(42, line)
    assert member is not None
    assert (member.name, member.state, member.ppid, member.pgid, member.sid, member.start_ticks) == \
        ("a) b (c)", "S", 1, 42, 42, 12345)
    assert owned.parse_stat(42, b"garbage") is None


def test_a_member_the_guard_could_not_stop_does_not_read_as_continued_from_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A setuid helper in the job (EPERM for SIGSTOP) kept running: without this the guard would take the job
    for continued from outside at every look, and re-pause it every second."""
    from desktop.jobs.wrap import WrappedJob

    pid_file = tmp_path / "child.pid"
    code = (f"import os, subprocess, sys, time\n{WRITE_ATOMIC}"
            f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"_write({str(pid_file)!r}, str(child.pid))\n"
            f"time.sleep(60)\n")
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    job = WrappedJob([sys.executable, "-c", code], stdout_fd=out, stderr_fd=out, use_pty=False)
    os.close(out)
    try:
        child = read_when(pid_file, int)  # its content, not its existence: open(..., "w") makes it empty first
        real_send = owned.send
        monkeypatch.setattr(owned, "send", lambda m, sig, check=None, proc=owned.PROC:
                            False if m.pid == child else real_send(m, sig, check, proc))
        assert job.stop() == [job.pid]
        _until(lambda: _state(job.pid) == "T")
        assert _state(child) != "T"
        assert job.stopped() is True
        job.cont()
        _until(lambda: _state(job.pid) != "T")
        assert job.stopped() is False
    finally:
        os.killpg(job.pgid, signal.SIGKILL)
        job.wait(10)
        job.finish_output()


def test_the_watchdog_passes_a_gone_reader_on_as_a_broken_pipe_instead_of_draining_for_ever() -> None:
    job_r, job_w = os.pipe()  # the job's output, as the watchdog inherits it
    out_r, out_w = os.pipe()  # where rigscope's output went
    os.close(out_r)  # its reader went away (`| head -1`)
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(WATCHDOG), "--relay", f"{job_r}:{out_w}"],
                            stdin=subprocess.PIPE, pass_fds=(job_r, out_w))
    os.close(job_r)
    os.close(out_w)
    assert proc.stdin is not None
    proc.stdin.close()  # rigscope died: the watchdog relays from here
    try:
        os.write(job_w, b"y\n")
        assert proc.wait(10) == 0  # it closed its copy and ended, not drained on
        with pytest.raises(BrokenPipeError):
            os.write(job_w, b"y\n")  # the job sees what it would see without rigscope
    finally:
        os.close(job_w)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
