"""The wrapped job: exit codes as a shell reports them, output byte for byte, a pty where rigscope has a
terminal, signals forwarded to the job's group, its tree stopped and continued."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from desktop.jobs.wrap import WrappedJob, exit_code_of

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX process groups and ptys")
PY = sys.executable


def _run(code: str, tmp_path: Path, **kwargs: object) -> tuple[int | None, bytes, bytes, list[tuple[int, bytes]]]:
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    seen: list[tuple[int, bytes]] = []
    with out_path.open("wb") as out, err_path.open("wb") as err:
        job = WrappedJob([PY, "-c", code], stdout_fd=out.fileno(), stderr_fd=err.fileno(),
                         on_output=lambda stream, chunk, t: seen.append((stream, chunk)), **kwargs)  # type: ignore[arg-type]
        rc = job.wait(30)
        assert job.finish_output()
    return rc, out_path.read_bytes(), err_path.read_bytes(), seen


@pytest.mark.parametrize(("code", "expected"), [
    ("pass", 0),
    ("import sys; sys.exit(3)", 3),
    ("import sys; sys.exit(255)", 255),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + signal.SIGTERM),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + signal.SIGKILL),
])
def test_the_exit_code_is_the_jobs_and_death_by_signal_is_128_plus_n(code: str, expected: int,
                                                                        tmp_path: Path) -> None:
    rc, _, _, _ = _run(code, tmp_path)
    assert rc == expected


def test_exit_code_of_maps_a_negative_popen_code() -> None:
    assert exit_code_of(-15) == 143
    assert exit_code_of(0) == 0
    assert exit_code_of(1) == 1


def test_binary_stdout_and_stderr_pass_through_byte_for_byte_and_apart(tmp_path: Path) -> None:
    code = ("import sys, os\n"
            "data = bytes(range(256)) * 4096 + b'\\r\\n\\x00tail'\n"
            "sys.stdout.buffer.write(data); sys.stdout.flush()\n"
            "sys.stderr.buffer.write(b'err\\r\\x1b[Aline\\n' + bytes(range(255, -1, -1)))\n")
    rc, out, err, seen = _run(code, tmp_path)
    assert rc == 0
    assert out == bytes(range(256)) * 4096 + b"\r\n\x00tail"
    assert err == b"err\r\x1b[Aline\n" + bytes(range(255, -1, -1))
    assert b"".join(chunk for stream, chunk in seen if stream == 1) == out
    assert b"".join(chunk for stream, chunk in seen if stream == 2) == err


def test_a_terminal_stays_a_terminal_and_its_bytes_are_not_rewritten(tmp_path: Path) -> None:
    import tty

    master, slave = os.openpty()  # stands in for the user's terminal
    tty.setraw(slave)
    try:
        job = WrappedJob([PY, "-c", "import sys; print(sys.stdout.isatty(), sys.stderr.isatty()); "
                                    "sys.stderr.write('a\\rb\\n')"], stdout_fd=slave, stderr_fd=slave)
        assert job.uses_pty
        assert job.wait(30) == 0
        assert job.finish_output()
        received = b""
        while not received.endswith(b"a\rb\n"):
            received += os.read(master, 4096)
    finally:
        os.close(master)
        os.close(slave)
    assert received == b"True True\na\rb\n"


def test_only_the_stream_that_is_a_terminal_gets_a_pty(tmp_path: Path) -> None:
    master, slave = os.openpty()
    try:
        with (tmp_path / "out").open("wb") as out:
            code = "import sys; print(sys.stdout.isatty()); sys.stderr.write(str(sys.stderr.isatty()))"
            job = WrappedJob([PY, "-c", code], stdout_fd=out.fileno(), stderr_fd=slave)
            assert job.wait(30) == 0
            assert job.finish_output()
        got = b""
        while b"True" not in got:
            got += os.read(master, 4096)
    finally:
        os.close(master)
        os.close(slave)
    assert (tmp_path / "out").read_bytes() == b"False\n"


def test_a_forwarded_sigint_reaches_the_job_and_its_handler_decides_the_exit(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (f"import signal, sys, time, pathlib\n"
            f"signal.signal(signal.SIGINT, lambda *a: sys.exit(5))\n"
            f"pathlib.Path({str(ready)!r}).write_text('1')\n"
            f"time.sleep(30)\n")
    with (tmp_path / "out").open("wb") as out:
        job = WrappedJob([PY, "-c", code], stdout_fd=out.fileno(), stderr_fd=out.fileno())
        _wait_for(ready.exists)
        job.send_signal(signal.SIGINT)
        assert job.wait(30) == 5
        job.finish_output()


def test_the_job_is_in_its_own_session_and_group(tmp_path: Path) -> None:
    with (tmp_path / "out").open("wb") as out:
        job = WrappedJob([PY, "-c", "import os; print(os.getpgid(0), os.getsid(0))"], stdout_fd=out.fileno(),
                         stderr_fd=out.fileno())
        pid = job.pid
        assert job.wait(30) == 0
        job.finish_output()
    assert (tmp_path / "out").read_text().split() == [str(pid), str(pid)]
    assert os.getpgid(0) != pid


def test_stop_and_cont_stop_the_whole_group_children_included(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n")
    with (tmp_path / "out").open("wb") as out:
        job = WrappedJob([PY, "-c", code], stdout_fd=out.fileno(), stderr_fd=out.fileno())
        try:
            _wait_for(lambda: (tmp_path / "out").read_text().strip() != "")
            grandchild = int((tmp_path / "out").read_text())
            job.stop()
            _wait_for(lambda: all(psutil.Process(p).status() == psutil.STATUS_STOPPED for p in (job.pid, grandchild)))
            job.cont()
            _wait_for(lambda: all(psutil.Process(p).status() != psutil.STATUS_STOPPED for p in (job.pid, grandchild)))
        finally:
            job.send_signal(signal.SIGKILL)
            assert job.wait(30) == 128 + signal.SIGKILL
            job.finish_output()


def _wait_for(condition: object, timeout_s: float = 60.0) -> None:  # bounds a failure only
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)
