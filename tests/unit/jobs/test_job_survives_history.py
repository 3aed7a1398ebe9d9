"""A run never loses its job (issues 20 and 21): a database that cannot take the job says so once and the job
runs on (card printed, -o written, its exit code); a job whose rigscope died is closed by the next command
that opens the history, at its last heartbeat, with its own energy only."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from desktop.cli import main
from desktop.history import job_owner
from desktop.history.job_model import JobOwner, JobRecord
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import FULL_SAMPLE, snapshot

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX processes and /proc")
REPO = Path(__file__).resolve().parents[3]
JOB = [sys.executable, "-c", "import sys, time; time.sleep(0.5); print('done'); sys.exit(3)"]


def _until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def _run(db: Path, tmp_path: Path, *extra: str) -> tuple[int, str, str, Path]:
    out = tmp_path / "job.json"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    proc = subprocess.run([sys.executable, "-m", "desktop", "run", "--simulate", "--interval", "0.2", "--db", str(db),
                           "-o", str(out), *extra, "--", *JOB], check=False, cwd=REPO, capture_output=True,
                          timeout=120, env={**os.environ, "TMPDIR": str(temporary)})
    assert list(temporary.iterdir()) == []  # the private database (and the progress file) removed
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode("utf-8", "replace"), out


def _newer_schema(db: Path) -> None:
    with HistoryStore.open(db):
        pass
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()


def _read_only(db: Path) -> None:
    with HistoryStore.open(db):
        pass
    db.chmod(0o400)


@pytest.mark.parametrize("spoil", [_newer_schema, _read_only], ids=["newer schema", "read-only"])
def test_a_database_that_cannot_take_the_job_is_said_once_and_the_job_runs(
        tmp_path: Path, spoil: Callable[[Path], None]) -> None:
    db = tmp_path / "h.sqlite"
    spoil(db)
    code, out, err, record = _run(db, tmp_path)
    assert code == 3, err  # the job's, not 2
    assert out == "done\n"
    assert err.count("cannot take the job") == 1 and "could not write" not in err, err
    assert "duration" in err and "exit code 3" in err and "#1" not in err  # the card, naming no stored job
    assert json.loads(record.read_text())["kind"] == "job"


def test_a_hostile_job_name_is_stored_as_it_is_and_the_job_runs(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    code, _out, err, record = _run(db, tmp_path, "--name", "train\udcff")  # the byte 0xff, as argv decodes it
    assert code == 3 and "could not write" not in err and "Traceback" not in err, err
    assert "train\\xff" in err  # the card shows the byte escaped
    with HistoryStore.open(db, readonly=True) as store:
        (job,) = store.jobs()
    assert job.name == "train\udcff" and job.exit_code == 3 and job.card is not None
    assert json.loads(record.read_text())["workload"] == "train\\xff"


# --- defect 4: a job whose rigscope died -------------------------------------------------------------

def test_a_killed_rigscope_s_job_is_closed_by_the_next_command(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "desktop", "run", "--simulate", "--interval", "0.2", "--db",
                             str(db), "--", sys.executable, "-c", "import time; time.sleep(60)"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def beat_after_start() -> bool:
        """A heartbeat at least 0.5 s after the start is stored: what the closing check below reads."""
        if not db.exists():
            return False
        try:
            with HistoryStore.open(db, readonly=True) as store:
                jobs = store.jobs()
        except Exception:  # the file is being created
            return False
        return bool(jobs) and (jobs[0].last_seen_s or 0.0) >= jobs[0].started_s + 0.5

    children: list[psutil.Process] = []
    try:
        _until(beat_after_start, 60.0)  # the thing itself, not a second that usually brings it
        _until(lambda: len(psutil.Process(proc.pid).children(recursive=True)) >= 2, 60.0)
        children = psutil.Process(proc.pid).children(recursive=True)  # the job and the watchdog
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed_at = time.time()
    finally:
        proc.kill()
    with HistoryStore.open(db, readonly=True) as store:
        (job,) = store.jobs()
    try:
        assert job.ended_s is None  # rigscope died: nobody closed it
        assert main(["jobs", "--db", str(db), "--json"]) == 0
        (listed,) = json.loads(capsys.readouterr().out)
        assert listed["lost"] is True and listed["exit_code"] is None
        assert listed["ended_s"] is not None and job.started_s + 0.5 <= listed["ended_s"] <= killed_at  # heartbeat
        assert main(["jobs", "--db", str(db)]) == 0
        assert "no rigscope" in capsys.readouterr().out
    finally:
        for child in children:  # by pid: only what this test started
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass


T0 = 1_790_000_040.0


def _dead_owner() -> JobOwner:
    """A real process of this machine that has exited: its pid and start time, as a dead rigscope leaves them."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ticks = job_owner.process_start_ticks(child.pid)
    owner = dataclasses.replace(job_owner.this_process(), pid=child.pid, start_ticks=ticks)
    child.kill()
    child.wait()
    return owner


def test_a_lost_job_ends_at_its_last_heartbeat_with_its_own_energy(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The attack run's 8 s job read "40 min 43 s (still running)" and 8.06 Wh: the energy of what ran after it."""
    db = tmp_path / "h.sqlite"
    sample = dataclasses.replace(FULL_SAMPLE, power_w=200.0, energy_mj=None)
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(T0 + i, sample=sample) for i in range(0, 2460)])  # 41 min at 200 W
        job_id = store.add_job(JobRecord(job_id=0, name="train", argv=("python", "train.py"),
                                                    started_s=T0 + 10, owner=_dead_owner(), last_seen_s=T0 + 18))
        live_id = store.add_job(JobRecord(job_id=0, name="live", argv=("x",), started_s=T0 + 20,
                                                     owner=job_owner.this_process(), last_seen_s=T0 + 20))
    now_s = T0 + 2460
    assert main(["jobs", "show", str(job_id), "--db", str(db), "--json"], now_s=now_s) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["lost"] is True and shown["ended_s"] == T0 + 18 and shown["duration_s"] == 8.0
    card = shown["card"]
    assert card["duration_s"] == pytest.approx(8.0)
    assert card["energy_wh"] == pytest.approx(200.0 * 8 / 3600, rel=0.2)  # 0.44 Wh, not 40 minutes' 137 Wh
    assert main(["jobs", "show", str(job_id), "--db", str(db)], now_s=now_s) == 0
    text = capsys.readouterr().out
    last_seen = datetime.fromtimestamp(T0 + 18).strftime("%H:%M")
    assert f"8 s (ended without rigscope: last seen {last_seen})" in text, text
    assert "still running" not in text
    with HistoryStore.open(db, readonly=True) as store:
        live = store.job(live_id)
    assert live is not None and live.ended_s is None and not live.lost  # this process lives: left running


def test_another_machine_s_job_is_lost_only_when_its_heartbeat_is_stale() -> None:
    other = JobOwner(host="another-box", pid=1, boot_id="x", start_ticks=1)
    record = JobRecord(job_id=1, name="j", argv=("j",), started_s=T0, owner=other, last_seen_s=T0 + 100)
    assert job_owner.owner_alive(record, T0 + 100 + job_owner.STALE_AFTER_S - 1)
    assert not job_owner.owner_alive(record, T0 + 100 + job_owner.STALE_AFTER_S + 1)
    legacy = JobRecord(job_id=2, name="j", argv=("j",), started_s=T0)  # stored before owners were
    assert job_owner.owner_alive(legacy, T0 + 60) and not job_owner.owner_alive(legacy, T0 + 3600)


def test_a_heartbeat_reopens_a_job_taken_for_lost(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with HistoryStore.open(db) as store:
        job_id = store.add_job(JobRecord(job_id=0, name="j", argv=("j",), started_s=T0,
                                                    owner=_dead_owner(), last_seen_s=T0 + 5))
        (closed,) = store.close_orphaned_jobs(T0 + 10)
        assert closed.lost and closed.ended_s == T0 + 5
        store.heartbeat(dataclasses.replace(closed, ended_s=None, owner=job_owner.this_process()), T0 + 20)
        again = store.job(job_id)
        assert again is not None and again.ended_s is None and not again.lost and again.last_seen_s == T0 + 20
        assert store.close_orphaned_jobs(T0 + 30) == []  # its owner (this process) lives


@pytest.mark.parametrize("newer", [False, True], ids=["beside the recorder", "recorder of a newer schema"])
def test_beside_a_writer_the_job_is_stored_or_said_once(tmp_path: Path, newer: bool) -> None:
    from desktop.history.lock import WriterLock

    db = tmp_path / "h.sqlite"
    if newer:
        _newer_schema(db)
    else:
        with HistoryStore.open(db):
            pass
    with WriterLock(db):  # the recorder (or the window) holds the writer lock
        code, out, err, record = _run(db, tmp_path)
    assert code == 3 and out == "done\n" and "duration" in err, err
    assert err.count("cannot take the job") == (1 if newer else 0) and "could not write" not in err, err
    assert json.loads(record.read_text())["kind"] == "job"
    if not newer:
        with HistoryStore.open(db, readonly=True) as store:
            (job,) = store.jobs()
        assert job.exit_code == 3 and not job.lost and job.last_seen_s is not None
