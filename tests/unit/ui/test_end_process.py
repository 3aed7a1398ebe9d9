"""End process ends the process the user confirmed, never another that took its PID meanwhile (issue 21, defect 2):
the page hands the ender the confirmed (pid, start), and the ender signals only while the PID is that process, at
SIGTERM and again at the SIGKILL after it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.telemetry.model import GpuProcess
from desktop.telemetry.sampler import end_process
from desktop.ui.pages.processes import ProcessesPage
from desktop.ui.theme import LIGHT
from tests.waits import DEADLINE_S

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")


def _start_of(pid: int) -> float:
    """The start as the Processes page has it (psutil's create time, through the host backend)."""
    from desktop.telemetry.host import PsutilHost

    started = PsutilHost().describe([GpuProcess(pid=pid, gpu_index=0, name="?")])[0].started_s
    assert started is not None
    return started


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                             "print('ready', flush=True)\n"
                             "time.sleep(60)\n"], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    proc.stdout.close()


def test_a_pid_that_now_belongs_to_another_process_is_refused_and_that_process_lives(
        sleeper: subprocess.Popen[bytes]) -> None:
    # The confirmed process started earlier under this PID; the one holding it now is another.
    confirmed_start = _start_of(sleeper.pid) - 30.0
    message = end_process(sleeper.pid, confirmed_start)
    assert message is not None and "no longer the process you confirmed" in message
    time.sleep(0.2)  # a "nothing happens in 0.2 s" check: refused, no signal went (a kill would end it at once)
    assert sleeper.poll() is None


def test_the_confirmed_process_is_ended_and_one_that_ignores_sigterm_is_killed(
        sleeper: subprocess.Popen[bytes]) -> None:
    started = _start_of(sleeper.pid)
    begun = time.monotonic()
    assert sleeper.poll() is None
    from desktop.telemetry.host import end_process as host_end_process

    assert host_end_process(sleeper.pid, started, timeout_s=0.3) is None
    assert sleeper.wait(DEADLINE_S) == -signal.SIGKILL  # SIGTERM ignored: the escalation reached the same process
    assert time.monotonic() - begun < 3.0


def test_a_process_that_already_ended_is_not_an_error() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    started = _start_of(proc.pid)
    proc.wait(10)
    assert end_process(proc.pid, started) is None


def test_an_unknown_start_is_refused(sleeper: subprocess.Popen[bytes]) -> None:
    message = end_process(sleeper.pid, None)
    assert message is not None and "nothing was ended" in message
    assert sleeper.poll() is None


def test_the_page_ends_the_process_as_it_was_confirmed_not_as_a_refresh_shows_it_after(qtbot) -> None:  # type: ignore[no-untyped-def]
    shown = GpuProcess(pid=900, gpu_index=0, name="train.py", user="me", vram_mib=9000.0, started_s=1000.0, own=True)
    other = GpuProcess(pid=900, gpu_index=0, name="other.py", user="me", vram_mib=10.0, started_s=2000.0, own=True)
    calls: list[tuple[int, float | None]] = []

    def confirm(proc: GpuProcess) -> bool:
        page.set_processes([other])  # a refresh while the question is open: PID 900 is another process now
        return True

    page = ProcessesPage(LIGHT, end_process=lambda pid, started_s: calls.append((pid, started_s)) or None,
                         confirm=confirm)
    qtbot.addWidget(page)
    page.set_processes([shown])
    page.table.selectRow(0)
    page.end_selected()
    assert calls == [(900, 1000.0)]


REUSE = r'''
import json, subprocess, sys, time

from desktop.telemetry.host import PsutilHost
from desktop.telemetry.model import GpuProcess
from desktop.telemetry.sampler import end_process

shown = subprocess.Popen(["sleep", "60"])  # the row the user confirms
started = PsutilHost().describe([GpuProcess(pid=shown.pid, gpu_index=0, name="?")])[0].started_s
shown.kill()
shown.wait()  # it ends while the question is open...
time.sleep(0.6)
with open("/proc/sys/kernel/ns_last_pid", "w") as handle:
    handle.write(str(shown.pid - 1))
other = subprocess.Popen(["sleep", "60"])  # ...and another process of the user's takes its PID
try:
    if other.pid != shown.pid:
        print(json.dumps({"skip": f"the new process got PID {other.pid}, not {shown.pid}"}))
        raise SystemExit(0)
    message = end_process(shown.pid, started)  # the user clicks Yes
    time.sleep(0.2)  # a "nothing happens in 0.2 s" check: a signal sent would have ended it by now
    print(json.dumps({"message": message, "alive": other.poll() is None}))
finally:
    other.kill()
    other.wait()
'''


def test_a_pid_handed_to_another_process_while_the_question_is_open_is_not_ended(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 21, defect 2, reproduced in a fresh PID namespace: the confirmed process ends, another takes its PID,
    then the user confirms. Skipped where `unshare --pid --fork --mount-proc` is refused."""
    import json
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                            "echo 1 > /proc/sys/kernel/ns_last_pid"], check=False, capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"unshare --pid --fork --mount-proc is not permitted here: {probe.stderr.decode(errors='replace')}")
    script = tmp_path / "reuse.py"
    script.write_text(REUSE)
    repo = str(Path(__file__).resolve().parents[3])
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(script)],
                          check=False, capture_output=True, timeout=60, cwd=repo,
                          env={**os.environ, "PYTHONPATH": repo})
    lines = done.stdout.decode().strip().splitlines()
    assert lines, done.stderr.decode()
    result = json.loads(lines[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    assert result["alive"], "End process ended the process that took the confirmed one's PID"
    assert "no longer the process you confirmed" in (result["message"] or "")
