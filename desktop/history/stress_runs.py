"""Stress-test results and their time series in the history database (a HistoryStore mixin)."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np
import numpy.typing as npt

from advisor.frame import StressResult

FloatArray = npt.NDArray[np.float64]
_FIELDS = ("started_s", "ended_s", "gpu_uuid", "gpu_name", "workload", "dtype", "unit", "peak_throughput",
           "sustained_throughput", "throttled", "errors", "driver_version", "summary", "device")


class StressRunsMixin:
    """Methods HistoryStore gets for stress runs; expects ``self.conn`` (autocommit)."""

    conn: sqlite3.Connection

    def add_stress_run(self, result: StressResult, extra_json: str = "") -> int:
        """Store a finished run; returns its new run_id (``result.run_id`` is ignored)."""
        values = [getattr(result, f) for f in _FIELDS]
        values[_FIELDS.index("throttled")] = int(bool(result.throttled))
        marks = ", ".join("?" * (len(_FIELDS) + 1))
        cur = self.conn.execute(f"INSERT INTO stress_runs ({', '.join(_FIELDS)}, extra_json) VALUES ({marks})",
                                (*values, extra_json))
        return int(cur.lastrowid or 0)

    def add_stress_points(self, run_id: int, time_s: npt.ArrayLike, columns: dict[str, npt.ArrayLike]) -> None:
        """The run's series (throughput, clocks, temperature, ...), replacing any stored before."""
        times = np.asarray(time_s, dtype=np.float64)
        rows: list[tuple[Any, ...]] = [(run_id, "time_s", times.astype("<f8").tobytes())]
        for name, values in columns.items():
            arr = np.asarray(values, dtype=np.float64)
            if arr.shape != times.shape:
                raise ValueError(f"stress column {name!r} has {arr.shape[0]} points, time_s has {times.shape[0]}")
            rows.append((run_id, name, arr.astype("<f8").tobytes()))
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany("INSERT OR REPLACE INTO stress_series (run_id, name, data) VALUES (?, ?, ?)", rows)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def stress_runs(self, gpu_uuid: str | None = None, workload: str | None = None) -> list[StressResult]:
        """Stored runs, newest first, optionally for one GPU and/or one workload."""
        sql = f"SELECT run_id, {', '.join(_FIELDS)} FROM stress_runs WHERE 1"
        params: list[Any] = []
        if gpu_uuid is not None:
            sql += " AND gpu_uuid = ?"
            params.append(gpu_uuid)
        if workload is not None:
            sql += " AND workload = ?"
            params.append(workload)
        out = []
        for row in self.conn.execute(sql + " ORDER BY started_s DESC, run_id DESC", params):
            data = dict(zip(("run_id", *_FIELDS), row, strict=True))
            data["throttled"] = bool(data["throttled"])
            out.append(StressResult(**data))
        return out

    def stress_points(self, run_id: int) -> tuple[FloatArray, dict[str, FloatArray]]:
        """(time_s, columns) of a run; empty arrays when it has none."""
        series = {name: np.frombuffer(blob, dtype="<f8").astype(np.float64)
                  for name, blob in self.conn.execute(
                      "SELECT name, data FROM stress_series WHERE run_id = ? ORDER BY name", (run_id,))}
        times = series.pop("time_s", np.empty(0, dtype=np.float64))
        return times, series

    def stress_run_extra(self, run_id: int) -> str:
        row = self.conn.execute("SELECT extra_json FROM stress_runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"no stress run {run_id}")
        return str(row[0])
