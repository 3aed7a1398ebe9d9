"""The guard never stops a process that took the PID of one of the job's ended processes (issue 21, defect 1).

Reproduced in a fresh PID namespace, where PIDs are few and ``/proc/sys/kernel/ns_last_pid`` says which one
the next process gets: the job's child ends, an unrelated ``setsid sleep 120`` is given the child's PID, then
the guard pauses the job. The job must be stopped, the sleep must not. Needs root (or user namespaces) for
``unshare --pid --fork --mount-proc``: skipped with the reason where that is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PID namespaces are Linux's")
REPO = Path(__file__).resolve().parents[3]

SCRIPT = r'''
import json, os, signal, subprocess, sys, time
from pathlib import Path

import psutil

from advisor.guard import GuardSettings, ThermalGuard
from desktop.jobs.job import JobRun
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

gate = Path(sys.argv[1])
code = ("import subprocess, time\n"
        f"subprocess.Popen(['sh', '-c', 'while [ ! -e {gate} ]; do sleep 0.01; done']).wait()\n"
        "while True: time.sleep(0.02)\n")


def until(condition, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(json.dumps({"error": "timed out"}))
        time.sleep(0.005)


def stop_pending(pid):
    with open(f"/proc/{pid}/status") as handle:
        masks = [int(line.split()[1], 16) for line in handle if line.startswith(("SigPnd:", "ShdPnd:"))]
    return any(mask >> (signal.SIGSTOP - 1) & 1 for mask in masks)


def state(pid):
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0].decode()


sampler = Sampler(SimulatedBackend(parse_profile_list("rtx4090-laptop")), process_period_s=0.0)
devnull = os.open(os.devnull, os.O_WRONLY)
# A guard far above the simulated GPU's 35 °C: nothing is paused while the job's tree is followed.
run = JobRun([sys.executable, "-c", code], sampler, guard=GuardSettings(90.0), watchdog=False,
             stdout_fd=devnull, stderr_fd=devnull, interval_s=0.05)
run.start()
job = psutil.Process(run.job.pid)
until(lambda: job.children())
child = job.children()[0].pid
run.step()  # the run sees the child in the job's tree
gate.touch()
until(lambda: not psutil.pid_exists(child))  # ended and reaped by the job
with open("/proc/sys/kernel/ns_last_pid", "w") as handle:
    handle.write(str(child - 1))
sleeper = subprocess.Popen(["setsid", "sleep", "120"])  # not a group leader: setsid execs in place
try:
    if sleeper.pid != child:
        print(json.dumps({"skip": f"the sleep got PID {sleeper.pid}, not the child's {child}"}))
        raise SystemExit(0)
    until(lambda: psutil.Process(child).name() == "sleep")
    run.guard = ThermalGuard(GuardSettings(30.0), time.time())  # now the GPU is over the guard
    run.step()
    # The job stopped (the guard's SIGSTOP taken), then the sleep: stopped, or a SIGSTOP still pending for it.
    until(lambda: state(run.job.pid) == "T", 60.0)
    print(json.dumps({"child": child, "seen": child in run.processes.pids, "job": state(run.job.pid),
                      "sleep": "T" if stop_pending(sleeper.pid) else state(sleeper.pid),
                      "events": [e.kind for e in run.events]}))
finally:
    sleeper.kill()
    os.killpg(run.job.pid, 9)
    run.job.wait(10)
'''


def _unshare_refused() -> str | None:
    if shutil.which("unshare") is None or shutil.which("setsid") is None:
        return "unshare or setsid is not installed"
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                            "echo 1 > /proc/sys/kernel/ns_last_pid"], check=False, capture_output=True,
                           timeout=30)
    if probe.returncode != 0:
        return f"unshare --pid --fork --mount-proc is not permitted here: {probe.stderr.decode(errors='replace')}"
    return None


def test_the_guard_does_not_stop_an_unrelated_process_that_reused_a_pid_of_the_job(tmp_path: Path) -> None:
    refused = _unshare_refused()
    if refused:
        pytest.skip(refused)
    script = tmp_path / "reuse.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(script),
                           str(tmp_path / "gate")], check=False, capture_output=True, timeout=60, cwd=REPO,
                          env=env)
    lines = done.stdout.decode().strip().splitlines()
    assert lines, done.stderr.decode()
    result = json.loads(lines[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    assert "error" not in result, done.stderr.decode()
    assert result["seen"], "the run never saw the child: the test did not set up the reuse"
    assert result["events"] == ["pause"]
    assert result["job"] == "T", "the guard did not stop the job"
    assert result["sleep"] != "T", "the guard stopped an unrelated process that reused a PID of the job"
