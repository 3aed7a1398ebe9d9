"""Jobs run under `rigscope run` in the history database: the job row, its throughput series, the guard's events.

Each write is one short transaction on the caller's connection, as for stress runs: `rigscope run`
writes the row when the job starts, each guard event as it happens, and the rest when it ends,
while the recorder may hold the writer lock (SQLite's WAL mode serialises the two).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from desktop.history.job_model import GuardEvent, JobRecord, JobSeries

if TYPE_CHECKING:
    from desktop.history.db import HistoryDb

_COLUMNS = ("job_id", "name", "argv_json", "started_s", "ended_s", "exit_code", "pids_json", "gpu_uuids_json",
            "gpu_indices_json", "throughput_unit", "guard_c", "paused_s", "source", "card_json")


def _row(record: JobRecord) -> dict[str, Any]:
    return {
        "name": record.name, "argv_json": json.dumps(list(record.argv)), "started_s": record.started_s,
        "ended_s": record.ended_s, "exit_code": record.exit_code, "pids_json": json.dumps(list(record.pids)),
        "gpu_uuids_json": json.dumps(list(record.gpu_uuids)), "gpu_indices_json": json.dumps(list(record.gpu_indices)),
        "throughput_unit": record.throughput_unit, "guard_c": record.guard_c, "paused_s": record.paused_s,
        "source": record.source, "card_json": None if record.card is None else json.dumps(record.card, default=str),
    }


def add_job(db: HistoryDb, record: JobRecord) -> int:
    """Store a job (running or finished) with its events; returns its new job_id (``record.job_id`` is ignored)."""
    row = _row(record)
    with db.transaction():
        cur = db.conn.execute(f"INSERT INTO jobs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                              tuple(row.values()))
        job_id = int(cur.lastrowid or 0)
        for event in record.events:
            _insert_event(db, job_id, event)
    return job_id


def update_job(db: HistoryDb, record: JobRecord) -> None:
    """Store what ``record`` says now (its end, PIDs, GPUs, card); its events are added by ``add_job_event``."""
    row = _row(record)
    with db.transaction():
        cur = db.conn.execute(f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in row)} WHERE job_id = ?",
                              (*row.values(), record.job_id))
        if cur.rowcount == 0:
            raise KeyError(f"no job {record.job_id}")


def add_job_event(db: HistoryDb, job_id: int, event: GuardEvent, gpu_uuid: str | None = None, detail: str = "") -> None:
    """One guard event of a job, also on the history's timeline (``events``: kind ``job_pause``/``job_resume``)."""
    with db.transaction():
        _insert_event(db, job_id, event)
        db.add_event(event.time_s, f"job_{event.kind}", gpu_uuid, detail or f"job {job_id}")


def _insert_event(db: HistoryDb, job_id: int, event: GuardEvent) -> None:
    db.conn.execute("INSERT INTO job_events (job_id, ts, kind, temperature_c, gpu_index) VALUES (?, ?, ?, ?, ?)",
                    (job_id, event.time_s, event.kind, event.temperature_c, event.gpu_index))


def set_job_series(db: HistoryDb, job_id: int, series: JobSeries) -> None:
    """The job's throughput series, replacing any stored before."""
    times = np.asarray(series.time_s, dtype=np.float64)
    values = np.asarray(series.throughput, dtype=np.float64)
    if values.shape != times.shape:
        raise ValueError(f"job throughput has {values.shape[0]} points, time_s has {times.shape[0]}")
    with db.transaction():
        db.conn.executemany("INSERT OR REPLACE INTO job_series (job_id, name, data) VALUES (?, ?, ?)",
                            [(job_id, "time_s", times.astype("<f8").tobytes()),
                             (job_id, "throughput", values.astype("<f8").tobytes())])


def job_series(db: HistoryDb, job_id: int) -> JobSeries:
    """The job's throughput series; empty when it reported none."""
    data = {name: np.frombuffer(blob, dtype="<f8").astype(np.float64) for name, blob in db.conn.execute(
        "SELECT name, data FROM job_series WHERE job_id = ?", (job_id,))}
    if "time_s" not in data or "throughput" not in data:
        return JobSeries()
    return JobSeries(time_s=data["time_s"], throughput=data["throughput"])


def _events(db: HistoryDb, job_ids: list[int]) -> dict[int, tuple[GuardEvent, ...]]:
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
    return JobRecord(
        job_id=int(data["job_id"]), name=data["name"], argv=tuple(json.loads(data["argv_json"])),
        started_s=float(data["started_s"]), ended_s=data["ended_s"], exit_code=data["exit_code"],
        pids=tuple(json.loads(data["pids_json"])), gpu_uuids=tuple(json.loads(data["gpu_uuids_json"])),
        gpu_indices=tuple(json.loads(data["gpu_indices_json"])), throughput_unit=data["throughput_unit"],
        guard_c=data["guard_c"], paused_s=float(data["paused_s"]), source=data["source"],
        card=card if isinstance(card, dict) else None)


def jobs(db: HistoryDb, start_s: float | None = None, end_s: float | None = None) -> list[JobRecord]:
    """Stored jobs, newest first; optionally those that started in [start_s, end_s)."""
    sql = f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE 1"
    params: list[float] = []
    if start_s is not None:
        sql += " AND started_s >= ?"
        params.append(start_s)
    if end_s is not None:
        sql += " AND started_s < ?"
        params.append(end_s)
    records = [_record(row) for row in db.conn.execute(sql + " ORDER BY started_s DESC, job_id DESC", params)]
    events = _events(db, [r.job_id for r in records])
    return [replace(r, events=events.get(r.job_id, ())) for r in records]


def job(db: HistoryDb, job_id: int) -> JobRecord | None:
    """One job with its events; None when there is no such job."""
    row = db.conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    if row is None:
        return None
    record = _record(row)
    return replace(record, events=_events(db, [job_id]).get(job_id, ()))
