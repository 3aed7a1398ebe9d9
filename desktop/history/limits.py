"""The limits in force per GPU over time (schema v11 ``gpu_limits``): written when they change, read as a step function.

A laptop's enforced power limit moves (Dynamic Boost 80 -> 175 W, a firmware mode switch, the battery); the
slowdown temperature and the SM clock reference can move with a driver or a mode. Each is stored with the
time it took effect, one row per change and GPU, from three sources: the snapshots the recorder and the
window write (the NVML backend re-reads the limits every minute and on an AC/battery change; a firmware
mode switch of the simulated laptop changes them at once), imported logs (a per-row ``enforced.power.limit``
column, else the log's one limit) and the migration from v10 (what the history knew). A sample's limit is
the one of the latest row at or before it; a sample before the first row has the first row's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from desktop.history import codec
from desktop.history.layout import LIMIT_COLUMNS
from desktop.telemetry.model import GpuInfo

FloatArray = npt.NDArray[np.float64]
#: The stored (scaled) limits of one row, in ``LIMIT_COLUMNS`` order; None: not known.
Scaled = tuple[int | None, ...]
#: The limit columns by name: "power_limit_w", "temp_slowdown_c", "sm_clock_ref_mhz".
LIMIT_NAMES: tuple[str, ...] = tuple(name for name, _, _ in LIMIT_COLUMNS)
_INSERT = f"INSERT OR REPLACE INTO gpu_limits (gpu, ts, {', '.join(LIMIT_NAMES)}) VALUES (?, ?, ?, ?, ?)"


def _scale(value: float | None, scale: int) -> int | None:
    if value is None or not np.isfinite(value) or abs(value) >= 2.0**40:
        return None
    return round(float(value) * scale)


def scaled_of(info: GpuInfo) -> Scaled:
    """``info``'s limits as stored."""
    return tuple(_scale(getattr(info, field), scale) for _, field, scale in LIMIT_COLUMNS)


def _in_force(conn: sqlite3.Connection, gpu_id: int, ts_ms: int) -> Scaled | None:
    row = conn.execute(f"SELECT {', '.join(LIMIT_NAMES)} FROM gpu_limits WHERE gpu = ? AND ts <= ? "
                       "ORDER BY ts DESC LIMIT 1", (gpu_id, ts_ms)).fetchone()
    return None if row is None else tuple(row)


def _next_row(conn: sqlite3.Connection, gpu_id: int, ts_ms: int) -> tuple[int, Scaled] | None:
    row = conn.execute(f"SELECT ts, {', '.join(LIMIT_NAMES)} FROM gpu_limits WHERE gpu = ? AND ts > ? "
                       "ORDER BY ts LIMIT 1", (gpu_id, ts_ms)).fetchone()
    return None if row is None else (int(row[0]), tuple(row[1:]))


def _effective(conn: sqlite3.Connection, gpu_id: int, ts_ms: int) -> Scaled | None:
    """What a sample at ``ts_ms`` reads: the row in force, else (before the first row) the first row's."""
    row = _in_force(conn, gpu_id, ts_ms)
    if row is None and (following := _next_row(conn, gpu_id, ts_ms)) is not None:
        return following[1]
    return row


def record(conn: sqlite3.Connection, gpu_id: int, ts_ms: int, values: Scaled) -> bool:
    """Store ``values`` as in force from ``ts_ms`` on, unless they already are; True when a row was written.

    A row just after it that says the same becomes redundant and goes (an import older than the live rows)."""
    if _effective(conn, gpu_id, ts_ms) == values:
        return False
    conn.execute(_INSERT, (gpu_id, ts_ms, *values))
    following = _next_row(conn, gpu_id, ts_ms)
    if following is not None and following[1] == values:
        conn.execute("DELETE FROM gpu_limits WHERE gpu = ? AND ts = ?", (gpu_id, following[0]))
    return True


def record_span(conn: sqlite3.Connection, gpu_id: int, time_s: FloatArray, values: list[Scaled], *,
                end_s: float | None = None) -> int:
    """The limits of an imported span: ``values[i]`` in force from ``time_s[i]`` (sorted) to the span's end
    (``end_s``, default the last time), a row per change; what was in force after the span before the import is
    put back after it. Returns the rows written."""
    if len(time_s) == 0:
        return 0
    end_ms = codec.to_ms(float(time_s[-1]) if end_s is None else max(end_s, float(time_s[-1]))) + 1
    after = _effective(conn, gpu_id, end_ms)
    if after is not None and _next_row(conn, gpu_id, codec.to_ms(float(time_s[0])) - 1) is None:
        after = None  # nothing stored after the span's start: its last limit simply stays in force
    written = 0
    previous: Scaled | None = None
    for t, value in zip(time_s.tolist(), values, strict=True):
        if value != previous:
            written += record(conn, gpu_id, codec.to_ms(t), value)
            previous = value
    if after is not None and previous != after and _effective(conn, gpu_id, end_ms) != after:
        written += record(conn, gpu_id, end_ms, after)
    return written


class LimitsLog:
    """Writes each GPU's limits from the snapshots when they change (one lookup per GPU, then a cache)."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[int, Scaled]] = {}

    def clear(self) -> None:
        """Forget the cache (after a rollback it may hold rows never committed)."""
        self._last.clear()

    def note(self, conn: sqlite3.Connection, gpu_id: int, time_s: float, info: GpuInfo) -> None:
        ts_ms = codec.to_ms(time_s)
        values = scaled_of(info)
        cached = self._last.get(gpu_id)
        if cached is not None and ts_ms >= cached[0] and cached[1] == values:
            return
        record(conn, gpu_id, ts_ms, values)
        if cached is None or ts_ms >= cached[0]:
            self._last[gpu_id] = (ts_ms, values)


def read(conn: sqlite3.Connection, gpu_id: int) -> tuple[FloatArray, dict[str, FloatArray]]:
    """Every stored change of one GPU: (time_s, columns in natural units, NaN = not known), oldest first; none
    where the file has no such table (an older schema read where it cannot be migrated: a read-only copy)."""
    try:
        rows = conn.execute(f"SELECT ts, {', '.join(LIMIT_NAMES)} FROM gpu_limits WHERE gpu = ? ORDER BY ts",
                            (gpu_id,)).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        rows = []
    arr = np.array([[np.nan if v is None else float(v) for v in row] for row in rows],
                   dtype=np.float64).reshape(len(rows), 1 + len(LIMIT_NAMES))
    return arr[:, 0] / 1000.0, {name: arr[:, i + 1] / scale for i, (name, _, scale) in enumerate(LIMIT_COLUMNS)}


def in_force_at(changes: tuple[FloatArray, Mapping[str, FloatArray]], time_s: FloatArray) -> dict[str, FloatArray]:
    """Each limit in force at each of ``time_s`` (a step function over ``changes``; before the first change, the
    first change's value). All NaN where nothing is stored."""
    times, columns = changes
    n = len(time_s)
    if len(times) == 0:
        return {name: np.full(n, np.nan) for name in LIMIT_NAMES}
    at = np.maximum(np.searchsorted(times, np.asarray(time_s, dtype=np.float64), side="right") - 1, 0)
    return {name: np.asarray(columns[name][at], dtype=np.float64) for name in LIMIT_NAMES}


def limits_at(conn: sqlite3.Connection, gpu_id: int, time_s: FloatArray) -> dict[str, FloatArray]:
    """The limits in force for one GPU at each of ``time_s``."""
    return in_force_at(read(conn, gpu_id), time_s)
