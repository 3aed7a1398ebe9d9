"""Jobs run under `rigscope run` in the history database: the job row, its throughput series, the guard's events.

Each write is one short transaction on the caller's connection, as for stress runs: `rigscope run`
writes the row when the job starts, a heartbeat every few seconds, each guard event as it happens,
and the rest when it ends, while the recorder may hold the writer lock (SQLite's WAL mode serialises
the two). A job whose `rigscope run` died (killed, a crash, a reboot) stays "running" in its row:
``close_orphaned_jobs`` (run when any command opens the history, ``close_orphaned_jobs_at``) closes it
at its last heartbeat, so its duration and energy are its own, never the jobs' that ran after it.
Texts (a job named ``$'train\\xff'``) are stored losslessly (``codec.db_text``).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.progress import JobSeries
from advisor.safetext import printable
from desktop.history.codec import db_text, text_from_db
from desktop.history.job_model import GuardEvent, JobOwner, JobRecord
from desktop.history.job_owner import owner_alive

if TYPE_CHECKING:
    from desktop.history.store_api import StoreApi

log = logging.getLogger(__name__)

_COLUMNS = ("job_id", "name", "argv_json", "started_s", "ended_s", "exit_code", "pids_json", "gpu_uuids_json",
            "gpu_indices_json", "throughput_unit", "guard_c", "paused_s", "source", "card_json", "extra_json")


def _extra(record: JobRecord) -> str:
    owner = record.owner
    data: dict[str, Any] = {"last_seen_s": record.last_seen_s, "lost": record.lost}
    if owner is not None:
        data["owner"] = {"host": owner.host, "pid": owner.pid, "boot_id": owner.boot_id,
                         "start_ticks": owner.start_ticks}
    return json.dumps(data)  # ASCII: a host name's odd bytes are \u escapes


def _read_extra(text: object) -> dict[str, Any]:
    try:
        data = json.loads(text_from_db(text) or "{}") if isinstance(text, str | bytes) else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _owner(data: object) -> JobOwner | None:
    if not isinstance(data, dict):
        return None
    host, pid = data.get("host"), data.get("pid")
    if not isinstance(host, str) or not isinstance(pid, int):
        return None
    boot, ticks = data.get("boot_id"), data.get("start_ticks")
    return JobOwner(host=host, pid=pid, boot_id=boot if isinstance(boot, str) else None,
                    start_ticks=ticks if isinstance(ticks, int) else None)


# --- rows -------------------------------------------------------------------------------------


def _row(record: JobRecord) -> dict[str, Any]:
    return {
        "name": db_text(record.name), "argv_json": json.dumps(list(record.argv)), "started_s": record.started_s,
        "ended_s": record.ended_s, "exit_code": record.exit_code, "pids_json": json.dumps(list(record.pids)),
        "gpu_uuids_json": json.dumps(list(record.gpu_uuids)), "gpu_indices_json": json.dumps(list(record.gpu_indices)),
        "throughput_unit": None if record.throughput_unit is None else db_text(record.throughput_unit),
        "guard_c": record.guard_c, "paused_s": record.paused_s, "source": db_text(record.source),
        "card_json": None if record.card is None else json.dumps(record.card, default=str),
        "extra_json": _extra(record),
    }


def add_job(db: StoreApi, record: JobRecord) -> int:
    """Store a job (running or finished) with its events; returns its new job_id (``record.job_id`` is ignored)."""
    row = _row(record)
    with db.transaction():
        cur = db.conn.execute(f"INSERT INTO jobs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                              tuple(row.values()))
        job_id = int(cur.lastrowid or 0)
        for event in record.events:
            _insert_event(db, job_id, event)
    return job_id


def update_job(db: StoreApi, record: JobRecord) -> None:
    """Store what ``record`` says now (its end, PIDs, GPUs, card); its events are added by ``add_job_event``."""
    row = _row(record)
    with db.transaction():
        cur = db.conn.execute(f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in row)} WHERE job_id = ?",
                              (*row.values(), record.job_id))
        if cur.rowcount == 0:
            raise KeyError(f"no job {record.job_id}")


def heartbeat(db: StoreApi, record: JobRecord, now_s: float) -> None:
    """Say that ``record``'s `rigscope run` is alive at ``now_s``. A job a later command took for lost
    (its heartbeat went stale: another machine's clock, a stalled disk) is running again."""
    with db.transaction():
        db.conn.execute("UPDATE jobs SET extra_json = ?, ended_s = NULL WHERE job_id = ? AND exit_code IS NULL",
                        (_extra(replace(record, last_seen_s=now_s, lost=False)), record.job_id))


def add_job_event(db: StoreApi, job_id: int, event: GuardEvent, gpu_uuid: str | None = None, detail: str = "") -> None:
    """One guard event of a job, also on the history's timeline (``events``: kind ``job_pause``/``job_resume``)."""
    with db.transaction():
        _insert_event(db, job_id, event)
        # The detail quotes the job's name: shown escaped (a timeline note, not the name itself).
        db.add_event(event.time_s, f"job_{event.kind}", gpu_uuid, printable(detail or f"job {job_id}"))


def _insert_event(db: StoreApi, job_id: int, event: GuardEvent) -> None:
    db.conn.execute("INSERT INTO job_events (job_id, ts, kind, temperature_c, gpu_index) VALUES (?, ?, ?, ?, ?)",
                    (job_id, event.time_s, event.kind, event.temperature_c, event.gpu_index))


def set_job_series(db: StoreApi, job_id: int, series: JobSeries) -> None:
    """The job's throughput series, replacing any stored before."""
    times = np.asarray(series.time_s, dtype=np.float64)
    values = np.asarray(series.throughput, dtype=np.float64)
    if values.shape != times.shape:
        raise ValueError(f"job throughput has {values.shape[0]} points, time_s has {times.shape[0]}")
    with db.transaction():
        db.conn.executemany("INSERT OR REPLACE INTO job_series (job_id, name, data) VALUES (?, ?, ?)",
                            [(job_id, "time_s", times.astype("<f8").tobytes()),
                             (job_id, "throughput", values.astype("<f8").tobytes())])


def job_series(db: StoreApi, job_id: int) -> JobSeries:
    """The job's throughput series; empty when it reported none."""
    data = {name: np.frombuffer(blob, dtype="<f8").astype(np.float64) for name, blob in db.conn.execute(
        "SELECT name, data FROM job_series WHERE job_id = ?", (job_id,))}
    if "time_s" not in data or "throughput" not in data:
        return JobSeries()
    return JobSeries(time_s=data["time_s"], throughput=data["throughput"])


def _events(db: StoreApi, job_ids: list[int]) -> dict[int, tuple[GuardEvent, ...]]:
    out: dict[int, list[GuardEvent]] = {}
    if not job_ids:
        return {}
    marks = ", ".join("?" * len(job_ids))
    for job_id, ts, kind, temp, gpu in db.conn.execute(
            f"SELECT job_id, ts, kind, temperature_c, gpu_index FROM job_events WHERE job_id IN ({marks}) "
            "ORDER BY ts, id", job_ids):
        out.setdefault(int(job_id), []).append(GuardEvent(time_s=float(ts), kind=kind, temperature_c=temp,
                                                          gpu_index=gpu))
    return {k: tuple(v) for k, v in out.items()}


def _record(row: tuple[Any, ...]) -> JobRecord:
    data = dict(zip(_COLUMNS, row, strict=True))
    card = json.loads(data["card_json"]) if data["card_json"] else None
    extra = _read_extra(data["extra_json"])
    seen = extra.get("last_seen_s")
    return JobRecord(
        job_id=int(data["job_id"]), name=text_from_db(data["name"]) or "", argv=tuple(json.loads(data["argv_json"])),
        started_s=float(data["started_s"]), ended_s=data["ended_s"], exit_code=data["exit_code"],
        pids=tuple(json.loads(data["pids_json"])), gpu_uuids=tuple(json.loads(data["gpu_uuids_json"])),
        gpu_indices=tuple(json.loads(data["gpu_indices_json"])), throughput_unit=text_from_db(data["throughput_unit"]),
        guard_c=data["guard_c"], paused_s=float(data["paused_s"]), source=text_from_db(data["source"]) or "nvml",
        card=card if isinstance(card, dict) else None, owner=_owner(extra.get("owner")),
        last_seen_s=float(seen) if isinstance(seen, int | float) and not isinstance(seen, bool) else None,
        lost=extra.get("lost") is True and data["exit_code"] is None and data["ended_s"] is not None)


def jobs(db: StoreApi, start_s: float | None = None, end_s: float | None = None, *,
         limit: int | None = None) -> list[JobRecord]:
    """Stored jobs, newest first; optionally those that started in [start_s, end_s), and only the newest
    ``limit`` (read from the ``jobs_started`` index: a year of jobs costs what the newest ``limit`` do)."""
    sql = f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE 1"
    params: list[float] = []
    if start_s is not None:
        sql += " AND started_s >= ?"
        params.append(start_s)
    if end_s is not None:
        sql += " AND started_s < ?"
        params.append(end_s)
    sql += " ORDER BY started_s DESC, job_id DESC"
    if limit is not None:
        sql += f" LIMIT {max(0, int(limit))}"
    records = [_record(row) for row in db.conn.execute(sql, params)]
    events = _events(db, [r.job_id for r in records])
    return [replace(r, events=events.get(r.job_id, ())) for r in records]


def job(db: StoreApi, job_id: int) -> JobRecord | None:
    """One job with its events; None when there is no such job."""
    row = db.conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    if row is None:
        return None
    record = _record(row)
    return replace(record, events=_events(db, [job_id]).get(job_id, ()))


# --- jobs whose rigscope died -----------------------------------------------------------------


def close_orphaned_jobs(conn: sqlite3.Connection, now_s: float, *,
                        alive: Callable[[JobRecord, float], bool] = owner_alive) -> list[JobRecord]:
    """Close every job still "running" whose `rigscope run` is gone (``alive``): it ends at its last heartbeat
    (its start, for a job stored before heartbeats were), exit code unknown, marked ``lost``. Returns them closed.

    Its card is then built from the history up to that time only, so its duration and energy are its own
    and never grow with the jobs that ran after it. One short transaction, only when there is one to close.
    """
    rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE ended_s IS NULL").fetchall()
    lost = [r for r in map(_record, rows) if not alive(r, now_s)]
    if not lost:
        return []
    closed = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for record in lost:
            seen = max(record.started_s, min(now_s, record.last_seen_s or record.started_s))
            done = replace(record, ended_s=seen, last_seen_s=seen, lost=True)
            cur = conn.execute("UPDATE jobs SET ended_s = ?, extra_json = ? WHERE job_id = ? AND ended_s IS NULL",
                               (seen, _extra(done), record.job_id))
            if cur.rowcount:
                closed.append(done)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return closed


def close_orphaned_jobs_at(path: Path, now_s: float) -> list[JobRecord]:
    """``close_orphaned_jobs`` on the database at ``path``, for a command about to open it (nothing else of this
    process has it open yet). Never creates, migrates or fails: a missing, read-only, busy, foreign or newer
    file is left as it is, to the command that opens it to say what is wrong."""
    from desktop.errors import UserError
    from desktop.history.connections import connect
    from desktop.history.dbfile import resolve_db
    from desktop.history.schema import SCHEMA_VERSION

    try:
        db = resolve_db(path)  # taken as it is when the command resolved it already
        if not db.is_file():
            return []
        # Made by connections.connect like every history connection, so this process knows the file is open.
        conn = connect(f"{db.as_uri()}?mode=rw", uri=True, timeout=2.0)
    except (OSError, ValueError, sqlite3.Error, UserError):
        return []
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        has_jobs = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone()
        if not 7 <= version <= SCHEMA_VERSION or has_jobs is None:
            return []
        closed = close_orphaned_jobs(conn, now_s)
    except (sqlite3.Error, ValueError, TypeError) as exc:  # busy, read-only, damaged: the command will say
        log.debug("could not close orphaned jobs in %s: %s", path, exc)
        return []
    finally:
        conn.close()
    for record in closed:
        log.info("job %d (%s) ended without rigscope: last seen %s", record.job_id, printable(record.name),
                 record.last_seen_s)
    return closed
