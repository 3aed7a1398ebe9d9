"""Two processes, one database (issue 20): the window records while the command line writes and reads.

Real processes only, no mocks: the window (offscreen, simulated GPU) records into ``h.sqlite``
while `run`, `stress`, `import`, `export`, `advise` and `report` run against the same file in a
loop, a reader opens and closes it as fast as it can, and some of the writers are SIGKILLed at
random moments. Before issue 20 the first command to close made the window write into a WAL
with no name from then on. Then: every sample the window says it took is in the file (counted),
no gap in its samples, ``PRAGMA integrity_check`` is ok, and the window's WAL never lost its name.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from desktop.history.schema import SCHEMA_VERSION
from tests.unit.history.helpers import deleted_open_files

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/fd and POSIX locks")

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
#: How long the window records while the others run (the issue asks for at least 60 s of samples).
RECORD_S = 60.0
KILLS = 10

_READER = """
import sqlite3, sys, time
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    conn = sqlite3.connect(sys.argv[1], timeout=10)
    conn.execute("SELECT count(*) FROM gpu_samples").fetchone()
    conn.close()
    with open(sys.argv[1], "rb") as raw:  # another process's descriptors drop only its own locks
        raw.read(100)
    n += 1
    time.sleep(0.05)
print(n)
"""


def _samples_by_uuid(db: Path) -> dict[str, list[int]]:
    conn = sqlite3.connect(db, timeout=10)
    try:
        out: dict[str, list[int]] = {}
        for uuid, ts in conn.execute("SELECT g.uuid, s.ts FROM gpu_samples s JOIN gpus g ON g.id = s.gpu "
                                     "ORDER BY g.uuid, s.ts"):
            out.setdefault(uuid, []).append(ts)
        return out
    finally:
        conn.close()


def _schema_version(db: Path) -> int:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_the_window_keeps_every_sample_while_commands_write_and_die(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen",
           "RIGSCOPE_CONFIG_DIR": str(tmp_path / "config"), "RIGSCOPE_DATA_DIR": str(tmp_path / "data")}
    cli = [sys.executable, "-m", "desktop"]
    # The imported log is from June 2025: the window's maintenance (at its first tick and at its close, as
    # `rigscope record`'s) would prune it by the shipped retention (raw 14 days, minutes a year). Keep every row:
    # this test is about every sample landing beside the others, not about retention.
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.toml").write_text("[retention]\nraw_days = 3650\nminute_days = 36500\n")
    window = subprocess.Popen([sys.executable, "-m", "tests.integration.window_child", str(db)], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    stop = threading.Event()
    problems: list[str] = []
    done: list[str] = []
    killed: list[str] = []
    rng = random.Random(20)
    try:
        deadline = time.monotonic() + 60
        while not (db.exists() and (tmp_path / "h.sqlite-wal").exists()) and time.monotonic() < deadline:
            assert window.poll() is None, window.stderr.read() if window.stderr else ""
            time.sleep(0.2)
        assert (tmp_path / "h.sqlite-wal").exists(), "the window never started recording"
        # The WAL appears before the first migration step commits: the reader starts on a whole schema.
        while _schema_version(db) < SCHEMA_VERSION and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _schema_version(db) == SCHEMA_VERSION, "the window never finished creating its schema"

        writers = [
            ["run", "--db", str(db), "--simulate", "--", "true"],
            ["stress", "--device", "sim", "--minutes", "0.05", "--db", str(db)],
            ["import", "--db", str(db), str(FIXTURES / "nvsmi_a10_idle_power_cap.csv")],
        ]
        readers = [
            ["export", "--db", str(db), "--from", "-2m", "--format", "csv", "-o", str(tmp_path / "out.csv")],
            ["advise", "--db", str(db)],
            ["report", "--db", str(db), "--format", "json", "-o", str(tmp_path / "report.json")],
        ]

        def loop(commands: list[list[str]], may_kill: bool) -> None:
            n = 0
            while not stop.is_set():
                argv = commands[n % len(commands)]
                n += 1
                proc = subprocess.Popen(cli + argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, errors="replace")
                if may_kill and len(killed) < KILLS:  # the first KILLS writers die at a random moment
                    time.sleep(rng.uniform(0.3, 2.0))
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                        killed.append(argv[0])
                _, err = proc.communicate(timeout=120)
                if proc.returncode >= 0:
                    # 1: throttled, 7: inconclusive (a 3 s stress run is too short for a verdict)
                    # 2 from a reader: a one-line user message ("needs at least 30 minutes of history")
                    said = (proc.returncode == 2 and not may_kill and err.count("\n") == 1
                            and err.startswith("rigscope "))
                    if "Traceback" in err or (proc.returncode not in (0, 1, 7) and not said):
                        problems.append(f"{argv[0]} exited {proc.returncode}: {err[-600:]}")
                    done.append(argv[0])

        threads = [threading.Thread(target=loop, args=(writers, True), daemon=True),
                   threading.Thread(target=loop, args=(readers, False), daemon=True)]
        reader = subprocess.Popen([sys.executable, "-c", _READER, str(db), str(RECORD_S)], stdout=subprocess.PIPE,
                                  text=True)
        for thread in threads:
            thread.start()
        start = time.monotonic()
        # At least RECORD_S of samples, and on a loaded machine until every kind of writer also finished once.
        while time.monotonic() < start + RECORD_S or (
                (len(killed) < KILLS or not {"run", "stress", "import"} <= set(done))
                and time.monotonic() < start + 3 * RECORD_S):
            deleted = deleted_open_files(window.pid, "h.sqlite")
            assert not deleted, f"the window writes a database file that has no name any more: {deleted}"
            assert window.poll() is None, "the window died"
            time.sleep(0.25)
        stop.set()
        for thread in threads:
            thread.join(timeout=150)
        reads = int((reader.communicate(timeout=60)[0] or "0").strip() or 0)
        assert deleted_open_files(window.pid, "h.sqlite") == []
    finally:
        stop.set()
        if window.poll() is None:
            window.send_signal(signal.SIGTERM)
        _, window_err = window.communicate(timeout=60)
    assert not problems, problems
    assert window.returncode == 0, window_err[-2000:]
    written = re.search(r"history: (\d+) of (\d+) samples written \((\d+) dropped\)", window_err)
    assert written, window_err[-2000:]
    n_written, n_submitted, n_dropped = (int(g) for g in written.groups())
    assert n_written == n_submitted and n_dropped == 0

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        sim = conn.execute("SELECT id FROM gpus WHERE name LIKE '%(simulated)%' OR uuid LIKE '%sim%'").fetchall()
        assert len(sim) == 1, sim
        times = [ts / 1000.0 for (ts,) in conn.execute("SELECT ts FROM gpu_samples WHERE gpu = ? ORDER BY ts", sim[0])]
        hosts = conn.execute("SELECT count(*) FROM host_samples").fetchone()[0]
    finally:
        conn.close()
    # Every sample the window took is in the file: counted, and without a hole anywhere.
    assert len(times) == n_submitted == hosts, (len(times), n_submitted, hosts)
    assert times[-1] - times[0] >= RECORD_S - 5
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) < 5.0, f"a hole of {max(gaps):.1f} s in the window's samples"
    assert len(killed) == KILLS and {"run", "stress", "import"} <= set(done), (killed, done)
    assert {"export", "advise", "report"} <= set(done) and reads > 50
    # Every sample of the imported log landed too (its bulk, multi-row writes beside the window's): the same
    # timestamps as the log imported alone into a file of its own.
    ref = tmp_path / "ref.sqlite"
    subprocess.run([*cli, "import", "--db", str(ref), str(FIXTURES / "nvsmi_a10_idle_power_cap.csv")], cwd=REPO,
                   env=env, check=True, capture_output=True, timeout=120)
    imported = _samples_by_uuid(ref)
    assert imported and all(imported.values())
    shared = _samples_by_uuid(db)
    assert {uuid: shared.get(uuid) for uuid in imported} == imported
