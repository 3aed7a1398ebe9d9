"""Stress-test results and their time series in the history database (``HistoryStore`` delegates here)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from advisor.frame import StressResult

if TYPE_CHECKING:
    from desktop.history.store_api import StoreApi

FloatArray = npt.NDArray[np.float64]
_FIELDS = ("started_s", "ended_s", "gpu_uuid", "gpu_name", "workload", "dtype", "unit", "peak_throughput",
           "sustained_throughput", "throttled", "errors", "driver_version", "summary", "device")


def add_run(db: StoreApi, result: StressResult, extra_json: str = "") -> int:
    """Store a finished run; returns its new run_id (``result.run_id`` is ignored)."""
    values = [getattr(result, f) for f in _FIELDS]
    values[_FIELDS.index("throttled")] = int(bool(result.throttled))
    marks = ", ".join("?" * (len(_FIELDS) + 1))
    cur = db.conn.execute(f"INSERT INTO stress_runs ({', '.join(_FIELDS)}, extra_json) VALUES ({marks})",
                          (*values, extra_json))
    return int(cur.lastrowid or 0)


def add_points(db: StoreApi, run_id: int, time_s: npt.ArrayLike, columns: dict[str, npt.ArrayLike]) -> None:
    """The run's series (throughput, clocks, temperature, ...), replacing any stored before."""
    times = np.asarray(time_s, dtype=np.float64)
    rows: list[tuple[Any, ...]] = [(run_id, "time_s", times.astype("<f8").tobytes())]
    for name, values in columns.items():
        arr = np.asarray(values, dtype=np.float64)
        if arr.shape != times.shape:
            raise ValueError(f"stress column {name!r} has {arr.shape[0]} points, time_s has {times.shape[0]}")
        rows.append((run_id, name, arr.astype("<f8").tobytes()))
    with db.transaction():
        db.conn.executemany("INSERT OR REPLACE INTO stress_series (run_id, name, data) VALUES (?, ?, ?)", rows)


def runs(db: StoreApi, gpu_uuid: str | None = None, workload: str | None = None, *,
         before_s: float | None = None, limit: int | None = None) -> list[StressResult]:
    """Stored runs, newest first, optionally for one GPU and/or one workload, started before ``before_s``,
    the newest ``limit`` of them (read from the ``stress_runs_started`` index)."""
    sql = f"SELECT run_id, {', '.join(_FIELDS)}, extra_json FROM stress_runs WHERE 1"
    params: list[Any] = []
    if before_s is not None:
        sql += " AND started_s < ?"
        params.append(before_s)
    if gpu_uuid is not None:
        sql += " AND gpu_uuid = ?"
        params.append(gpu_uuid)
    if workload is not None:
        sql += " AND workload = ?"
        params.append(workload)
    out = []
    sql += " ORDER BY started_s DESC, run_id DESC"
    if limit is not None:
        sql += f" LIMIT {max(0, int(limit))}"
    for row in db.conn.execute(sql, params):
        data = dict(zip(("run_id", *_FIELDS), row[:-1], strict=True))
        data["throttled"] = bool(data["throttled"])
        out.append(StressResult(**data, aborted=_aborted(row[-1])))
    return out


def _aborted(extra_json: str) -> bool:
    """Whether the run stopped early, from the status the runner saved ("completed" or why not).

    Runs saved without one (imported, or from before the status was kept) count as complete.
    """
    try:
        extra = json.loads(extra_json) if extra_json else {}
    except ValueError:
        return False
    status = extra.get("status") if isinstance(extra, dict) else None
    return isinstance(status, str) and status != "completed"


def points(db: StoreApi, run_id: int) -> tuple[FloatArray, dict[str, FloatArray]]:
    """(time_s, columns) of a run; empty arrays when it has none."""
    series = {name: np.frombuffer(blob, dtype="<f8").astype(np.float64)
              for name, blob in db.conn.execute(
                  "SELECT name, data FROM stress_series WHERE run_id = ? ORDER BY name", (run_id,))}
    times = series.pop("time_s", np.empty(0, dtype=np.float64))
    return times, series


def run_extra(db: StoreApi, run_id: int) -> str:
    row = db.conn.execute("SELECT extra_json FROM stress_runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise KeyError(f"no stress run {run_id}")
    return str(row[0])
