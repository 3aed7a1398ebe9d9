"""The recorder: SIGTERM/SIGINT, a second writer refused, SIGKILL at random moments, a full disk, a 30-day soak."""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from desktop import cli
from desktop.config import RetentionSettings
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from desktop.recorder import Recorder
from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading, GpuSample, Snapshot, SourceInfo
from tests.waits import until

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
REPO = Path(__file__).resolve().parents[2]
CHILD = REPO / "tests" / "unit" / "history" / "recorder_child.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _committed_ticks(db: Path) -> int:
    """Host samples (one per tick) committed to ``db`` so far; 0 before its schema is there."""
    try:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute("SELECT COUNT(*) FROM host_samples").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


@posix_only
def test_record_simulate_then_sigterm_leaves_rows_and_exits_0(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "rtx4090-laptop,rtx4090",
                             "--interval", "0.25", "--db", str(db)], stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stderr is not None
    assert "Recording to" in proc.stderr.readline()
    # Recording until the history holds ten ticks (what the "record for 5 s" gave on an idle machine; a
    # busy one took fewer in 5 s), then SIGTERM: what is measured is what is left afterwards.
    until(lambda: _committed_ticks(db) >= 10 or proc.poll() is not None)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "samples written" in err
    assert _integrity(db) == "ok"
    with HistoryStore.open(db, readonly=True) as store:
        counts = store.counts()
        assert counts["gpus"] == 2
        assert counts["gpu_samples"] >= 2 * 10
        assert counts["host_samples"] >= 10
        assert counts["gpu_samples"] == 2 * counts["host_samples"]  # both GPUs, every tick


@posix_only
def test_corrupt_database_is_moved_aside_and_prometheus_serves_while_recording(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    damaged = b"SQLite format 3\0" + b"\xff" * 5000  # a database whose header is gone (not any file: issue 12)
    db.write_bytes(damaged)
    proc = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "--interval", "0.2",
                             "--db", str(db), "--prometheus", "--listen", "127.0.0.1:0"],
                            stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stderr is not None
    try:
        moved = proc.stderr.readline()
        assert "damaged; it was moved to" in moved
        old = Path(moved.split("moved to ")[1].split(" and a fresh")[0])
        assert old.read_bytes() == damaged  # moved, never deleted
        started = proc.stderr.readline()
        url = re.search(r"Prometheus metrics on (http://\S+)", started)
        assert url, started
        text = ""  # the first sample is what is waited for, not a second that usually brings it
        deadline = time.monotonic() + 60.0
        while "GPU-SIM00" not in text and time.monotonic() < deadline:
            with urllib.request.urlopen(url.group(1).rstrip(".;"), timeout=10) as response:
                text = response.read().decode()
            if "GPU-SIM00" not in text:
                time.sleep(0.05)
        assert "GPU-SIM00" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert _integrity(db) == "ok"


@posix_only
def test_a_second_recorder_is_refused_naming_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    first = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "--interval", "0.5",
                              "--db", str(db)], stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert first.stderr is not None and "Recording to" in first.stderr.readline()
        assert cli.main(["record", "--simulate", "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert f"pid {first.pid}" in err and "already being written" in err
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    assert first.returncode == 0


@posix_only
def test_sigkill_at_random_moments_loses_nothing_flushed(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    rng = random.Random(20261129)
    for run in range(20):
        base = 1_790_000_000.0 + run * 100_000.0
        child = subprocess.Popen([sys.executable, str(CHILD), str(db), str(base)], stdout=subprocess.PIPE,
                                 text=True, env=_env())
        assert child.stdout is not None
        flushed = -1
        for _ in range(rng.randint(1, 3)):
            line = child.stdout.readline()
            assert line.startswith("flushed"), line
            flushed = int(line.split()[1])
        time.sleep(rng.uniform(0.0, 0.05))  # somewhere inside the next batch, commit or not
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        assert _integrity(db) == "ok", f"run {run}"
        conn = sqlite3.connect(db)
        try:
            kept = conn.execute("SELECT count(*) FROM gpu_samples WHERE ts >= ? AND ts <= ?",
                                (int(base * 1000), int((base + flushed) * 1000))).fetchone()[0]
        finally:
            conn.close()
        assert kept == 2 * (flushed + 1), f"run {run}: lost rows flushed before the kill"


class _FakeSampler:
    """Cheap GPU readings on a clock the test moves: a recorder soak without the physics."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.info = GpuInfo(index=0, uuid="GPU-soak", name="Soak GPU", vram_total_mib=24564.0)
        self.rng = np.random.default_rng(3)
        self.source = SourceInfo(kind="simulated", detail="soak")

    def tick(self) -> Snapshot:
        util, temp, power = self.rng.uniform(0, 100), self.rng.uniform(30, 85), self.rng.uniform(20, 300)
        sample = GpuSample(utilization_gpu_pct=round(util), temperature_c=round(temp), power_w=round(power, 1),
                           sm_clock_mhz=2100.0, clock_event_reasons=4 if power > 280 else 0, vram_used_mib=1000.0)
        reading = GpuReading(self.info, DeviceState.OK, sample)
        return Snapshot(time_s=self.clock[0], monotonic_s=self.clock[0], source=self.source, gpus=(reading,))

    def close(self) -> None:
        pass


def test_full_disk_recorder_keeps_sampling_says_so_once_and_catches_up(tmp_path: Path) -> None:
    clock = [1_790_000_000.0]
    said: list[str] = []
    writer = HistoryWriter(tmp_path / "h.sqlite", flush_interval_s=3600, max_buffer=10_000)
    writer.start()
    try:
        recorder = Recorder(_FakeSampler(clock), writer, clock=lambda: clock[0], maintenance_period_s=1e9,
                            report=said.append)
        recorder.step()
        recorder.wait_maintenance()
        assert writer.flush()
        pages = writer.call(lambda s: s.conn.execute("PRAGMA page_count").fetchone()[0]).result()
        writer.call(lambda s: s.conn.execute(f"PRAGMA max_page_count = {pages + 1}")).result()
        for i in range(2000):
            clock[0] += 1.0
            recorder.step()
            if i % 250 == 0:
                writer.flush()
        assert recorder.ticks == 2001 and writer.status.disk_full
        assert writer.status.rows_pending > 1000
        assert sum("is full" in message for message in said) == 1
        writer.call(lambda s: s.conn.execute("PRAGMA max_page_count = 1073741823")).result()
        assert writer.flush()
        assert not writer.status.disk_full and writer.status.rows_pending == 0
        clock[0] += 1.0
        recorder.step()
        assert said[-1] == "writing to the history again; nothing was lost"
        assert writer.flush()
    finally:
        writer.close()
    with HistoryStore.open(tmp_path / "h.sqlite", readonly=True) as store:
        assert store.counts()["gpu_samples"] == 2002


def _rss_mib() -> float | None:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except OSError:
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_soak_30_days_memory_flat_and_size_bounded_by_retention(tmp_path: Path) -> None:
    day = 86400.0
    interval_s = 120.0
    clock = [1_790_006_400.0]
    path = tmp_path / "h.sqlite"
    writer = HistoryWriter(path, flush_interval_s=3600)
    writer.start()
    sizes: dict[int, int] = {}
    rss: dict[int, float | None] = {}
    try:
        retention = RetentionSettings(raw_days=2, minute_days=5, hour_days=10)
        recorder = Recorder(_FakeSampler(clock), writer, interval_s=interval_s, retention=retention,
                            clock=lambda: clock[0], maintenance_period_s=6 * 3600)
        ticks_per_day = int(day / interval_s)
        for d in range(1, 31):
            for _ in range(ticks_per_day):
                clock[0] += interval_s
                recorder.step()
            writer.flush()
            recorder.wait_maintenance()
            sizes[d] = writer.call(lambda s: s.size_bytes()).result()
            rss[d] = _rss_mib()
        counts = writer.call(lambda s: s.counts()).result()
    finally:
        writer.close()
    assert counts["gpu_samples"] <= (2 + 1) * ticks_per_day  # raw: retention plus up to one maintenance period
    assert counts["gpu_minute"] <= (5 + 1) * ticks_per_day
    assert counts["gpu_hour"] <= (10 + 1) * 24
    assert counts["events"] > 0
    steady = [sizes[d] for d in range(12, 31)]
    assert max(steady) <= 1.15 * min(steady), sizes  # bounded: days 12..30 hold the same amount
    assert path.stat().st_size <= 2 * max(steady) + (1 << 20)  # the file does not keep growing either
    if rss[10] is not None:
        assert rss[30] - rss[10] < 20.0, rss  # MiB: flat, not growing with the days recorded


def test_record_on_every_interface_warns_like_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 12 item 12: `record --prometheus --listen 0.0.0.0:...` served without the warning `export` gives."""
    monkeypatch.setattr(Recorder, "run", lambda self, stop, max_ticks=None: 0)
    db = tmp_path / "h.sqlite"
    assert cli.main(["record", "--simulate", "--db", str(db), "--prometheus", "--listen", "0.0.0.0:0"]) == 0
    err = capsys.readouterr().err
    assert "0.0.0.0 is reachable from other machines" in err and "no authentication" in err
    assert cli.main(["record", "--simulate", "--db", str(db), "--prometheus", "--listen", "127.0.0.1:0"]) == 0
    assert "reachable from other machines" not in capsys.readouterr().err


def test_record_refuses_a_file_that_is_not_a_history_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(Recorder, "run", lambda self, stop, max_ticks=None: 0)  # never record for long
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\n")
    assert cli.main(["record", "--simulate", "--db", str(notes)]) == 2
    assert "is not a Rigscope history database; refusing to touch it" in capsys.readouterr().err
    assert notes.read_text() == "shopping list\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("threshold", [10.0, 50.0])
def test_the_recorders_rollups_count_busy_seconds_at_the_settings_threshold(tmp_path: Path, threshold: float) -> None:
    """Issue 22's one busy definition reaches `rigscope record`'s own rollups (they used the 10 % default)."""
    clock = [1_790_000_040.0]
    writer = HistoryWriter(tmp_path / "h.sqlite", flush_interval_s=3600)
    writer.start()
    sampler = _FakeSampler(clock)
    try:
        recorder = Recorder(sampler, writer, clock=lambda: clock[0], maintenance_period_s=300.0,
                            busy_util_pct=threshold)
        utils = iter([30.0] * 60 + [0.0] * 400)
        sampler.rng = type("Fixed", (), {"uniform": lambda _self, lo, hi: next(utils) if lo == 0 else lo})()
        for _ in range(400):
            recorder.step()
            recorder.wait_maintenance()  # each pass done before the next step: no race with the clock
            clock[0] += 1.0
        assert writer.flush()
    finally:
        writer.close()
    with HistoryStore.open(tmp_path / "h.sqlite", readonly=True) as store:
        busy_ds = store.conn.execute("SELECT coalesce(sum(busy_ds), 0) FROM gpu_minute").fetchone()[0]
        rows = store.conn.execute("SELECT ts, busy_ds, dur_ds FROM gpu_minute").fetchall()
    # The first 60 samples at 30 % utilization: busy above a 10 % threshold, idle under a 50 % one.
    assert busy_ds == (600 if threshold == 10.0 else 0), rows
