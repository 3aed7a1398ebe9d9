"""A long history, made quickly: what a year of recording leaves at the shipped retention (issue 38).

The last ``raw_days`` (14) are a real ``rigscope demo`` (raw samples, processes, jobs, events, rollups);
everything before is that fortnight's minute and hour rollups, events and jobs repeated backwards in time
(minutes for ``minute_days``, hours for the whole span), then packed into day blocks as the recorder's
maintenance would. Simulating a year second by second would take ~6 minutes; this takes seconds, and its
tables hold what a year-long recorder's would.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from desktop.config import RetentionSettings
from desktop.history import blocks
from desktop.history.store import HistoryStore
from desktop.jobs.demo_jobs import write_demo_week
from desktop.telemetry.simulated import parse_profile_list

DAY_S = 86400.0


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def _tile(conn: sqlite3.Connection, table: str, *, base_lo: float, base_hi: float, oldest: float,
          ts_scale: float = 1.0) -> None:
    """Copy ``table``'s rows of ``[base_lo, base_hi)`` backwards, one base span at a time, down to ``oldest``."""
    cols = [c for c in _columns(conn, table) if c != "id"]
    span = base_hi - base_lo
    shifted = ", ".join("ts - :shift" if c == "ts" else c for c in cols)
    k = 1
    while base_lo - k * span + span > oldest:
        conn.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) SELECT {shifted} FROM {table} "
                     "WHERE ts >= :lo AND ts < :hi AND ts - :shift >= :oldest",
                     {"shift": k * span * ts_scale, "lo": base_lo * ts_scale, "hi": base_hi * ts_scale,
                      "oldest": oldest * ts_scale})
        k += 1


def _tile_jobs(conn: sqlite3.Connection, *, base_lo: float, base_hi: float, oldest: float) -> None:
    cols = [c for c in _columns(conn, "jobs") if c != "job_id"]
    span = base_hi - base_lo
    jobs = conn.execute(f"SELECT job_id, {', '.join(cols)} FROM jobs WHERE started_s >= ? AND started_s < ?",
                        (base_lo, base_hi)).fetchall()
    k = 1
    while base_lo - k * span + span > oldest:
        for row in jobs:
            values = dict(zip(cols, row[1:], strict=True))
            values["started_s"] -= k * span
            if values["started_s"] < oldest:
                continue
            if values["ended_s"] is not None:
                values["ended_s"] -= k * span
            cur = conn.execute(f"INSERT INTO jobs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                               list(values.values()))
            conn.execute("INSERT INTO job_series (job_id, name, data) SELECT ?, name, data FROM job_series "
                         "WHERE job_id = ?", (cur.lastrowid, row[0]))
        k += 1


def build_long_history(path: Path, days: float, now_s: float, *, profiles: str = "rtx4090-laptop",
                       retention: RetentionSettings | None = None) -> None:
    """A history of ``days`` ending at ``now_s`` at ``retention`` (the shipped one by default)."""
    retention = retention or RetentionSettings()
    base_days = min(days, float(retention.raw_days))
    write_demo_week(path, parse_profile_list(profiles), days=base_days, now_s=now_s)
    if days <= base_days:
        return
    base_lo = math.ceil((now_s - base_days * DAY_S) / 3600.0) * 3600.0  # whole hours: no partial rollup row
    base_hi = base_lo + math.floor((now_s - base_lo) / DAY_S) * DAY_S
    start = now_s - days * DAY_S
    minute_from = max(start, now_s - retention.minute_days * DAY_S)
    with HistoryStore.open(path) as store:
        conn = store.conn
        with store.transaction():
            for table in ("gpu_minute", "host_minute"):
                _tile(conn, table, base_lo=base_lo, base_hi=base_hi, oldest=minute_from)
            _tile(conn, "events", base_lo=base_lo, base_hi=base_hi, oldest=minute_from)
            for table in ("gpu_hour", "host_hour"):
                _tile(conn, table, base_lo=base_lo, base_hi=base_hi, oldest=start)
            _tile_jobs(conn, base_lo=base_lo, base_hi=base_hi, oldest=start)
            conn.execute("UPDATE gpus SET first_seen_s = ?", (start,))
            store.set_meta(blocks.MARKER, repr(math.floor(minute_from / DAY_S) * DAY_S))
        blocks.build(store, float(store.meta("rollup_minute_until") or now_s))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
