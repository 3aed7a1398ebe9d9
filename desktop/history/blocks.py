"""Day blocks: whole UTC days of the minute rollups and process samples, packed one blob per day.

Reading rows through the sqlite3 module costs ~0.2-0.4 µs per value, so a stored week (minute
rollups of two GPUs, host minutes and ~100,000 process samples: ~1.3 million values) takes
about half a second row by row. The same days packed as one compressed int64 array per table,
GPU and day decode in about a millisecond each. Blocks are a copy: the rows stay in their
tables and remain the truth; a day without a usable block is read from its table.

- ``build`` packs every whole day before ``until_s`` (the minute-rollup mark, so those days'
  minute rows are final), from the meta mark ``blocks_until`` on.
- ``invalidate`` is called whenever rows arrive (``rollup.note_written``): a write into a
  packed day drops the blocks of that day and later and moves the mark back, so they are
  packed again after the rollups have caught up.
- ``trim`` follows retention: blocks of days before the cut go; the day holding the cut is
  packed again from the rows left.
- ``fetch`` reads a time range of any rollup or process table like ``codec.fetch_columns``,
  blocks where they exist.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from desktop.history.codec import fetch_columns

if TYPE_CHECKING:
    from desktop.history.store_api import StoreApi

FloatArray = npt.NDArray[np.float64]

MARKER = "blocks_until"
DAY_S = 86400
#: NULL inside a block (history tables hold integers well inside int64, never this).
_NULL = np.iinfo(np.int64).min
#: Values beyond this do not survive float64 exactly: such a day stays unpacked (read from its rows).
_EXACT = 2.0**53


@dataclass(frozen=True)
class Source:
    table: str
    #: One block per GPU and day (the gpu column is then left out of the block).
    per_gpu: bool
    #: ``ts`` units per second: 1000 for raw tables (ms), 1 for rollups (s).
    ts_per_s: int
    order_by: str


#: The packed tables.
SOURCES: dict[str, Source] = {
    "gpu_minute": Source("gpu_minute", True, 1, "ts"),
    "host_minute": Source("host_minute", False, 1, "ts"),
    "process_samples": Source("process_samples", False, 1000, "ts, gpu, pid"),
}
#: Every table ``fetch`` reads; the hour tables are small enough to read row by row.
TABLES: dict[str, Source] = {
    **SOURCES,
    "gpu_hour": Source("gpu_hour", True, 1, "ts"),
    "host_hour": Source("host_hour", False, 1, "ts"),
}


def _table_columns(store: StoreApi, source: Source) -> list[str]:
    names = [row[1] for row in store.conn.execute(f"PRAGMA table_info({source.table})")]
    names = [n for n in names if n != "cpu_per_core" and not (source.per_gpu and n == "gpu")]
    names.remove("ts")
    return ["ts", *names]


def _where(source: Source) -> str:
    return f"{source.table} WHERE {'gpu = ? AND ' if source.per_gpu else ''}ts >= ? AND ts < ?"


def _params(source: Source, gpu_id: int, lo: int, hi: int) -> tuple[int, ...]:
    return (gpu_id, lo, hi) if source.per_gpu else (lo, hi)


def encode(matrix: FloatArray) -> bytes | None:
    """Rows (first column ``ts``, ascending) as compressed int64 columns; None if not exactly representable."""
    finite = np.isfinite(matrix)
    if np.any(np.abs(matrix[finite]) >= _EXACT) or np.isinf(matrix).any():
        return None
    ints = np.full(matrix.shape, _NULL, dtype=np.int64)
    ints[finite] = matrix[finite].astype(np.int64)
    ints[1:, 0] = np.diff(ints[:, 0])  # time deltas compress to almost nothing
    return zlib.compress(np.asfortranarray(ints).tobytes(order="F"), 6)


def decode(data: bytes, rows: int, n_columns: int, pick: Sequence[int]) -> FloatArray:
    """The columns ``pick`` of a block, float64, NULL as NaN."""
    ints = np.frombuffer(zlib.decompress(data), dtype=np.int64).reshape(n_columns, rows)
    out = np.empty((rows, len(pick)), dtype=np.float64)
    for j, i in enumerate(pick):
        column = np.cumsum(ints[i]) if i == 0 else ints[i]
        out[:, j] = column
        if i:
            out[column == _NULL, j] = np.nan
    return out


def _pack(store: StoreApi, source: Source, day: int, gpu_ids: Iterable[int]) -> int:
    """(Re)pack one day of ``source`` for ``gpu_ids``; returns the blocks written."""
    columns = _table_columns(store, source)
    lo, hi = day * DAY_S * source.ts_per_s, (day + 1) * DAY_S * source.ts_per_s
    written = 0
    for gpu_id in gpu_ids:
        arr = fetch_columns(store.conn, columns, _where(source), _params(source, gpu_id, lo, hi), source.order_by,
                            not_null=("ts",))
        data = encode(arr) if len(arr) else None
        if data is None:
            store.conn.execute("DELETE FROM day_blocks WHERE day = ? AND source = ? AND gpu = ?",
                               (day, source.table, gpu_id))
            continue
        store.conn.execute("INSERT OR REPLACE INTO day_blocks (day, source, gpu, rows, columns, data) "
                           "VALUES (?, ?, ?, ?, ?, ?)", (day, source.table, gpu_id, len(arr), ",".join(columns), data))
        written += 1
    return written


def _gpu_ids(store: StoreApi, source: Source) -> list[int]:
    return list(store.gpu_uuid_of_id()) if source.per_gpu else [0]


def _first_day_with_rows(store: StoreApi, from_day: int) -> int | None:
    """The first day at or after ``from_day`` holding rows in any packed table."""
    lows = []
    for source in SOURCES.values():
        lo = from_day * DAY_S * source.ts_per_s
        for gpu_id in _gpu_ids(store, source):
            row = store.conn.execute(f"SELECT min(ts) FROM {_where(source)}",
                                     _params(source, gpu_id, lo, 2**62)).fetchone()
            if row[0] is not None:
                lows.append(int(row[0]) // (DAY_S * source.ts_per_s))
    return min(lows) if lows else None


def build(store: StoreApi, until_s: float) -> int:
    """Pack every whole day before ``until_s`` not packed yet, a day per transaction; returns blocks written."""
    end_day = math.floor(until_s / DAY_S)
    marker = store.meta(MARKER)
    day = math.floor(float(marker) / DAY_S) if marker is not None else -(2**30)
    written = 0
    while True:
        following = _first_day_with_rows(store, day)
        if following is None or following >= end_day:
            break
        day = following
        with store.transaction():
            for source in SOURCES.values():
                written += _pack(store, source, day, _gpu_ids(store, source))
            store.set_meta(MARKER, repr(float((day + 1) * DAY_S)))
        day += 1
    if marker is None or float(marker) < end_day * DAY_S:
        store.set_meta(MARKER, repr(float(end_day * DAY_S)))
    return written


def invalidate(store: StoreApi, earliest_s: float) -> None:
    """Rows at ``earliest_s`` arrived: the blocks of that day and later no longer hold every row."""
    marker = store.meta(MARKER)
    if marker is None or earliest_s >= float(marker):
        return
    day = math.floor(earliest_s / DAY_S)
    store.conn.execute("DELETE FROM day_blocks WHERE day >= ?", (day,))
    store.set_meta(MARKER, repr(float(day * DAY_S)))


def trim(store: StoreApi, tables: Collection[str], cut_s: float) -> None:
    """Retention deleted rows of ``tables`` before ``cut_s``: drop or repack the blocks that held them."""
    day = math.floor(cut_s / DAY_S)
    for table in tables:
        store.conn.execute("DELETE FROM day_blocks WHERE day < ? AND source = ?", (day, table))
        if cut_s > day * DAY_S and store.conn.execute(
                "SELECT 1 FROM day_blocks WHERE day = ? AND source = ? LIMIT 1", (day, table)).fetchone():
            source = SOURCES[table]
            _pack(store, source, day, _gpu_ids(store, source))


def fetch(store: StoreApi, table: str, columns: Sequence[str], lo: int, hi: int, *, gpu_id: int = 0,
          not_null: Collection[str] = ("ts",)) -> FloatArray:
    """Rows of ``table`` (one of TABLES) with ``lo <= ts < hi`` (its units) as float64, NULL as NaN.

    ``columns`` starts with ``ts``. In a packed table, days with a block that holds every column
    asked for are decoded from it; the other days are read from the table, consecutive ones in
    one query.
    """
    source = TABLES[table]
    if hi <= lo:
        return np.empty((0, len(columns)), dtype=np.float64)
    if table not in SOURCES:
        return fetch_columns(store.conn, columns, _where(source), _params(source, gpu_id, lo, hi), source.order_by,
                             not_null=not_null)
    units = DAY_S * source.ts_per_s
    first, last = lo // units, (hi - 1) // units
    found = {day: (rows, names.split(","), data) for day, rows, names, data in store.conn.execute(
        "SELECT day, rows, columns, data FROM day_blocks WHERE day >= ? AND day <= ? AND source = ? AND gpu = ?",
        (first, last, table, gpu_id))}
    parts: list[FloatArray] = []
    gap_from: int | None = None  # start (table units) of days still to read from rows

    def read_rows(until: int) -> None:
        nonlocal gap_from
        if gap_from is not None:
            parts.append(fetch_columns(store.conn, columns, _where(source), _params(source, gpu_id, gap_from, until),
                                       source.order_by, not_null=not_null))
            gap_from = None

    for day in range(first, last + 1):
        day_lo, day_hi = max(lo, day * units), min(hi, (day + 1) * units)
        block = found.get(day)
        if block is None or not set(columns) <= set(block[1]):
            gap_from = day_lo if gap_from is None else gap_from
            continue
        read_rows(day_lo)
        rows, names, data = block
        arr = decode(data, rows, len(names), [names.index(c) for c in columns])
        if day_lo > day * units or day_hi < (day + 1) * units:
            ts = arr[:, 0]
            arr = arr[(ts >= day_lo) & (ts < day_hi)]
        parts.append(arr)
    read_rows(hi)
    if not parts:
        return np.empty((0, len(columns)), dtype=np.float64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
