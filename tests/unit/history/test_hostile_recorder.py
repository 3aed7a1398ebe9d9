"""A GPU process named ``b"\\xff\\xfe\\x80bad"`` costs nothing: `record --prometheus` stores every
sample and every scrape answers 200 with the name escaped (issue 20, done-when).

Real processes: a sleeper that renames itself with prctl(PR_SET_NAME), and `rigscope record`
over the fake NVML whose GPU lists the sleeper's pid (tests/unit/history/hostile_recorder_child.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from desktop.history.store import HistoryStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_NAME) and /proc")

REPO = Path(__file__).resolve().parents[3]
_SLEEPER = """
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, b"\\xff\\xfe\\x80bad", 0, 0, 0)  # PR_SET_NAME
print("named", flush=True)
time.sleep(120)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_record_with_prometheus_keeps_every_sample_of_a_hostile_process(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", _SLEEPER], stdout=subprocess.PIPE, text=True)
    db, port = tmp_path / "h.sqlite", _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "RIGSCOPE_CONFIG_DIR": str(tmp_path / "cfg"),
           "RIGSCOPE_DATA_DIR": str(tmp_path / "data")}
    recorder = None
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline().strip() == "named"
        assert Path(f"/proc/{sleeper.pid}/comm").read_bytes() == b"\xff\xfe\x80bad\n"
        recorder = subprocess.Popen([sys.executable, "-m", "tests.unit.history.hostile_recorder_child",
                                     str(sleeper.pid), str(db), str(port)], cwd=REPO, env=env,
                                    stderr=subprocess.PIPE, text=True, errors="replace")
        pages: list[str] = []
        deadline = time.monotonic() + 60
        while len(pages) < 8 and time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                    assert answer.status == 200
                    pages.append(answer.read().decode("utf-8"))
            except OSError:
                assert recorder.poll() is None, recorder.stderr.read() if recorder.stderr else ""
        assert len(pages) == 8
        assert any('\\\\xff\\\\xfe\\\\x80bad' in page for page in pages[2:]), "the process series names it escaped"
        recorder.send_signal(signal.SIGTERM)
        _, err = recorder.communicate(timeout=30)
        assert recorder.returncode == 0, err
        assert "Traceback" not in err and "could not be written" not in err, err
    finally:
        for proc in (recorder, sleeper):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if sleeper.stdout is not None:
            sleeper.stdout.close()
        if recorder is not None and recorder.stderr is not None:
            recorder.stderr.close()
    with HistoryStore.open(db, readonly=True) as store:
        gpu_rows = store.conn.execute("SELECT count(*) FROM gpu_samples").fetchone()[0]
        host_rows = store.conn.execute("SELECT count(*) FROM host_samples").fetchone()[0]
        names = set(store.string_table().values())
    # `Stopped: N samples written`: every sample it took is stored, the hostile process's name with them.
    written = int(err.split("Stopped: ", 1)[1].split(" samples", 1)[0].replace(",", ""))
    assert gpu_rows == host_rows == written >= 15
    assert os.fsdecode(b"\xff\xfe\x80bad") in names
