"""The GPU sample layout of schema v10: rows, packs and counted seconds, written and read back.

A ``gpu_samples`` row holds the metrics that move (``layout.ROW_METRICS``), ``pack``, the id of its
``gpu_packs`` row: the combination of the rarely-changing ones (``layout.PACK_COLUMNS``; a week at 1 Hz
has a few dozen), and ``counters``, the four clock-event counters (ms) in 16-bit fields, or -1 when one
does not fit and they are in ``gpu_counters``. The pack's ``counted`` bits say which counters were read:
the others read missing. Every value comes back as it was stored before v10.

Writes keep the rule of the old single-table INSERT OR IGNORE: a sample already stored at the same GPU
and millisecond is kept whole, its counted seconds included (the side row goes in only where no sample
row is stored yet, and before it; a repeated key within one batch keeps its first sample).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from desktop.history.codec import FloatArray, fetch_columns
from desktop.history.layout import (
    COUNTER_BITS,
    COUNTER_MAX,
    COUNTER_METRICS,
    GPU_SCALES,
    PACK_COLUMNS,
    PACKED_METRICS,
    ROW_METRICS,
)
from desktop.telemetry.model import GpuSample

Pack = tuple[int | None, ...]

_INT_LIMIT = 2.0**62
_ROW_SCALES = [GPU_SCALES[m] for m in ROW_METRICS]
_PACK_SCALES = [GPU_SCALES[m] for m in PACKED_METRICS]
_COUNTER_SCALES = [GPU_SCALES[m] for m in COUNTER_METRICS]

#: The sample row of a snapshot (``gpu``, ``ts``, ``pack``, ``counters``, then ``ROW_METRICS``).
INSERT_ROW: Final = (f"INSERT OR IGNORE INTO gpu_samples (gpu, ts, pack, counters, {', '.join(ROW_METRICS)}) "
                     f"VALUES ({', '.join('?' * (4 + len(ROW_METRICS)))})")
#: The counted seconds of a sample whose counters do not fit its row, only where no sample row is stored
#: at that key yet (and before it: INSERT OR IGNORE keeps the stored sample whole).
INSERT_COUNTERS: Final = (f"INSERT OR IGNORE INTO gpu_counters (gpu, ts, {', '.join(COUNTER_METRICS)}) "
                          f"SELECT ?1, ?2, {', '.join(f'?{i + 3}' for i in range(len(COUNTER_METRICS)))} "
                          "WHERE NOT EXISTS (SELECT 1 FROM gpu_samples WHERE gpu = ?1 AND ts = ?2)")


def _scaled(value: float | int | None, scale: int) -> int | None:
    if value is None:
        return None
    number = value * scale
    return round(number) if -_INT_LIMIT < number < _INT_LIMIT else None


class Packs:
    """The ``gpu_packs`` table as a dict, read at the start of each write (so a rolled-back pack, or
    one another connection added, is never assumed); new combinations are inserted as they come."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.ids: dict[Pack, int] = {tuple(row[1:]): int(row[0]) for row in conn.execute(
            f"SELECT id, {', '.join(PACK_COLUMNS)} FROM gpu_packs ORDER BY id DESC")}

    def id(self, pack: Pack) -> int:
        found = self.ids.get(pack)
        if found is None:
            cur = self.conn.execute(f"INSERT INTO gpu_packs ({', '.join(PACK_COLUMNS)}) "
                                    f"VALUES ({', '.join('?' * len(PACK_COLUMNS))})", pack)
            found = self.ids[pack] = int(cur.lastrowid or 0)
        return found


class SampleRows:
    """The GPU samples of one write (the recorder's snapshots), collected then written in one go."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.packs = Packs(conn)
        self.rows: list[tuple[int | None, ...]] = []
        self.counters: list[tuple[int | None, ...]] = []
        self._keys: set[tuple[int, int]] = set()

    def add(self, gpu_id: int, time_s: float, s: GpuSample) -> None:
        ts = round(time_s * 1000.0)
        key = (gpu_id, ts)
        if key in self._keys:
            return  # INSERT OR IGNORE keeps the first; so must the side row
        self._keys.add(key)
        used = _scaled(s.vram_used_mib, 10)
        free = _scaled(s.vram_free_mib, 10)
        counts = [_scaled(getattr(s, m), k) for m, k in zip(COUNTER_METRICS, _COUNTER_SCALES, strict=True)]
        counted = sum(1 << i for i, v in enumerate(counts) if v is not None)
        pack = (None if free is None else free + (used or 0), _scaled(s.mem_clock_mhz, 1),
                _scaled(s.clock_event_reasons, 1), _scaled(s.pcie_gen, 1), _scaled(s.pcie_width, 1),
                _scaled(s.pstate, 1), counted)
        if all(v is None or 0 <= v <= COUNTER_MAX for v in counts):
            packed = sum((v or 0) << (COUNTER_BITS * i) for i, v in enumerate(counts))
        else:
            packed = -1
            self.counters.append((gpu_id, ts, *counts))
        self.rows.append((gpu_id, ts, self.packs.id(pack), packed, _scaled(s.utilization_gpu_pct, 10),
                          _scaled(s.utilization_mem_pct, 10), used, _scaled(s.temperature_c, 10),
                          _scaled(s.power_w, 10), _scaled(s.energy_mj, 1), _scaled(s.sm_clock_mhz, 1),
                          _scaled(s.fan_pct, 1), _scaled(s.pcie_rx_kib_s, 1), _scaled(s.pcie_tx_kib_s, 1),
                          _scaled(s.effective_load_pct, 10)))

    def write(self) -> None:
        if self.counters:
            self.conn.executemany(INSERT_COUNTERS, self.counters)
        self.conn.executemany(INSERT_ROW, self.rows)


assert ROW_METRICS == ("utilization_gpu_pct", "utilization_mem_pct", "vram_used_mib", "temperature_c", "power_w",
                       "energy_mj", "sm_clock_mhz", "fan_pct", "pcie_rx_kib_s", "pcie_tx_kib_s",
                       "effective_load_pct"), "SampleRows.add lists the row metrics by hand"


# --- bulk (numpy columns) ------------------------------------------------------------------------


#: Python ints 0 .. SHARED_INTS - 1, made once: a column within that range goes to SQLite as references to
#: them instead of one new int object per value (making and freeing those is what a bulk write costs
#: over SQLite's own work; utilization, temperature, power, clocks and pack ids all fit).
SHARED_INTS: Final = 16_384
_shared: npt.NDArray[np.object_] | None = None
#: Below this many values a column is not worth the range check.
_SHARED_MIN_ROWS: Final = 256


def _objects(ints: npt.NDArray[np.int64], missing: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.object_]:
    """The column as an object array of Python ints (None where missing)."""
    global _shared
    if ints.size >= _SHARED_MIN_ROWS and int(ints.min()) >= 0 and int(ints.max()) < SHARED_INTS:
        if _shared is None:
            _shared = np.arange(SHARED_INTS, dtype=np.int64).astype(object)
        objects: npt.NDArray[np.object_] = _shared[ints]
    else:
        objects = ints.astype(object)
    if missing is not None and missing.any():
        objects[missing] = None
    return objects


def _as_list(ints: npt.NDArray[np.int64], missing: npt.NDArray[np.bool_]) -> list[int | None]:
    return _objects(ints, missing).tolist()  # type: ignore[no-any-return]


def _pack_ids(packs: Packs, matrix: npt.NDArray[np.int64], missing: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """The pack id of each column of ``matrix`` (PACK_COLUMNS x rows): a lookup only where a row differs from
    the one before it (runs of the same pack are the rule)."""
    n = matrix.shape[1]
    starts = np.ones(n, dtype=bool)
    starts[1:] = (matrix[:, 1:] != matrix[:, :-1]).any(axis=0) | (missing[:, 1:] != missing[:, :-1]).any(axis=0)
    first = np.flatnonzero(starts)
    ids = np.empty(len(first), dtype=np.int64)
    for k, (row, gone) in enumerate(zip(matrix[:, first].T.tolist(), missing[:, first].T.tolist(), strict=True)):
        ids[k] = packs.id(tuple(None if g else v for v, g in zip(row, gone, strict=True)))
    out: npt.NDArray[np.int64] = ids[np.cumsum(starts) - 1]
    return out


#: A read-only "nothing missing" mask shared by the columns that have every value (the common case).
_NONE_MISSING = np.zeros(65_536, dtype=bool)
_NONE_MISSING.flags.writeable = False


def _ints(values: FloatArray | None, n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], bool]:
    """Rounded int64 values, where they are missing (NaN, or beyond what SQLite holds), and whether any is."""
    if values is None:
        return np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool), True
    rounded = np.rint(values)
    if n and rounded.min() > -_INT_LIMIT and rounded.max() < _INT_LIMIT:  # NaN fails both: the slow path
        return rounded.astype(np.int64), _NONE_MISSING[:n] if n <= len(_NONE_MISSING) else np.zeros(n, bool), False
    missing = ~(np.abs(rounded) < _INT_LIMIT)
    if missing.any():
        return np.where(missing, 0.0, rounded).astype(np.int64), missing, True
    return rounded.astype(np.int64), missing, False


def _packed_counters(counts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], bool]], n: int,
                     ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """(which counters were read, as the pack's bits; where all fit 16 bits; the four packed in one int)."""
    counted = np.zeros(n, dtype=np.int64)
    fits = np.ones(n, dtype=bool)
    packed = np.zeros(n, dtype=np.int64)
    for i, (values, gone, _) in enumerate(counts):
        counted |= (~gone).astype(np.int64) << i
        if not gone.all():
            fits &= gone | ((values >= 0) & (values <= COUNTER_MAX))
            packed |= (values & 0xFFFF) << (COUNTER_BITS * i)  # a missing value is 0 here
    return counted, fits, packed


@dataclass(frozen=True, slots=True)
class BulkRows:
    """One GPU's rows for one write: the INSERT's columns, those written into it, and the bound values."""

    names: tuple[str, ...]
    #: Columns with one value in every row (the GPU id, mostly the pack and the counters): in the statement.
    fixed: dict[str, int]
    #: rows x the bound columns (``names`` less ``fixed``, in order): Python ints, None where missing.
    matrix: npt.NDArray[np.object_]
    #: Side rows of the samples whose counters do not fit their row (``INSERT_COUNTERS``).
    counter_rows: list[tuple[int | None, ...]]

    def head(self) -> str:
        return f"INSERT OR IGNORE INTO gpu_samples ({', '.join(self.names)}) VALUES "

    def group(self) -> str:
        """One row's ``(...)``: the fixed values written in, a ``?`` for each bound one."""
        return f"({', '.join(str(self.fixed[c]) if c in self.fixed else '?' for c in self.names)})"

    def single_insert(self) -> str:
        return self.head() + self.group()

    def batches(self, variable_limit: int) -> list[tuple[str, list[list[int | None]]]]:
        """The INSERTs that write these rows, each with its parameter lists (for executemany): statements of
        ``MULTI_ROWS`` rows (fewer where SQLite's variable limit says so) whose values are one flat list, then
        the part group's rows one per statement."""
        n, width = self.matrix.shape
        per = max(1, min(MULTI_ROWS, variable_limit // max(1, width)))
        whole = n - n % per
        out: list[tuple[str, list[list[int | None]]]] = []
        if whole:
            groups = self.matrix[:whole].reshape(whole // per, per * width).tolist()
            out.append((self.head() + ", ".join([self.group()] * per), groups))
        if whole < n:
            out.append((self.single_insert(), self.matrix[whole:].tolist()))
        return out


def build_rows(packs: Packs, gpu_id: int, time_s: FloatArray, columns: dict[str, FloatArray]) -> BulkRows:
    """The rows of one GPU's scaled float columns (NaN = missing, absent = all missing), built a column at a
    time (numpy to Python ints, shared where small)."""
    n = len(time_s)
    ts = np.rint(time_s * 1000.0).astype(np.int64)
    keep: npt.NDArray[np.bool_] | None = None
    if n > 1 and not (ts[1:] > ts[:-1]).all():  # out of order or repeated: the first of each key wins
        keep = np.zeros(n, dtype=bool)
        keep[np.unique(ts, return_index=True)[1]] = True
    row = {m: _ints(columns.get(m), n) for m in ROW_METRICS}
    used, used_gone, _ = row["vram_used_mib"]
    free, free_gone, _ = _ints(columns.get("vram_free_mib"), n)
    pack_ints = np.empty((len(PACK_COLUMNS), n), dtype=np.int64)
    pack_gone = np.zeros((len(PACK_COLUMNS), n), dtype=bool)
    pack_ints[0] = free + np.where(used_gone, 0, used)
    pack_gone[0] = free_gone
    for k, m in enumerate(PACKED_METRICS[1:], start=1):
        pack_ints[k], pack_gone[k], _ = _ints(columns.get(m), n)
    counts = [_ints(columns.get(m), n) for m in COUNTER_METRICS]
    pack_ints[-1], fits, packed = _packed_counters(counts, n)
    ids = _pack_ids(packs, pack_ints, pack_gone)
    packed[~fits] = -1
    side = ~fits if keep is None else ~fits & keep
    counter_rows: list[tuple[int | None, ...]] = []
    if side.any():
        where = np.flatnonzero(side)
        counter_rows = list(zip([gpu_id] * len(where), ts[where].tolist(),
                                *(_as_list(v[where], g[where]) for v, g, _ in counts), strict=True))

    names = ["gpu", "ts", "pack", "counters"]
    fixed: dict[str, int] = {"gpu": gpu_id}
    bound: list[npt.NDArray[np.object_]] = [_objects(ts)]
    for name, column in (("pack", ids), ("counters", packed)):
        if n and (column == column[0]).all():
            fixed[name] = int(column[0])
        else:
            bound.append(_objects(column))
    for m in ROW_METRICS:
        ints, gone, some_gone = row[m]
        if some_gone and gone.all():
            continue  # all missing: left out of the INSERT (NULL)
        names.append(m)
        bound.append(_objects(ints, gone if some_gone else None))
    matrix = np.empty((n, len(bound)), dtype=object)
    for j, objects in enumerate(bound):
        matrix[:, j] = objects
    return BulkRows(tuple(names), fixed, matrix, counter_rows)


def bulk_rows(packs: Packs, gpu_id: int, time_s: FloatArray,
              columns: dict[str, FloatArray]) -> tuple[str, list[list[int | None]], list[tuple[int | None, ...]]]:
    """(single-row INSERT, its rows, side counter rows): the same rows as ``write_bulk`` writes, one per statement
    (the benchmark's executemany floor, and the naive writer it is compared with)."""
    rows = build_rows(packs, gpu_id, time_s, columns)
    return rows.single_insert(), rows.matrix.tolist(), rows.counter_rows


#: Rows per multi-row INSERT: each statement binds this many rows' values at once (fewer if SQLite's variable
#: limit says so). Measured (50,000 rows of 13 values into a fresh table): 16 rows 30 ms, 64 26 ms, 256 25 ms,
#: 1,024 29 ms, 2,520 31 ms; one executemany of the same rows ready-made 40-47 ms.
MULTI_ROWS: Final = 256


def write_bulk(conn: sqlite3.Connection, gpu_id: int, time_s: FloatArray, columns: dict[str, FloatArray]) -> int:
    """Insert one GPU's scaled columns (one transaction is the caller's); returns the sample rows inserted.

    The rows go in as multi-row INSERT OR IGNOREs (``BulkRows.batches``): SQLite takes each row of one in order
    and ignores it alone where its key is stored, as one statement per row would, without a Python tuple made
    and freed per row.
    """
    rows = build_rows(Packs(conn), gpu_id, time_s, columns)
    if rows.counter_rows:
        conn.executemany(INSERT_COUNTERS, rows.counter_rows)
    before = conn.total_changes
    for sql, params in rows.batches(conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)):
        conn.executemany(sql, params)
    return conn.total_changes - before


# --- reading -----------------------------------------------------------------------------------------


def read_columns(conn: sqlite3.Connection, gpu_id: int, lo_ms: int, hi_ms: int,
                 metrics: Sequence[str]) -> tuple[FloatArray, dict[str, FloatArray]]:
    """(ts in ms, the stored integers of ``metrics`` as floats, NaN = missing) of one GPU in [lo_ms, hi_ms)."""
    exprs: list[str] = []
    packed = False
    counted = False
    for m in metrics:
        if m in ROW_METRICS:
            exprs.append(f"s.{m}")
        elif m == "vram_free_mib":
            exprs.append("p.vram_rest - coalesce(s.vram_used_mib, 0)")
            packed = True
        elif m in PACKED_METRICS:
            exprs.append(f"p.{m}")
            packed = True
        else:
            i = COUNTER_METRICS.index(m)
            exprs.append(f"CASE WHEN s.counters < 0 THEN c.{m} WHEN p.counted & {1 << i} "
                         f"THEN (s.counters >> {COUNTER_BITS * i}) & {COUNTER_MAX} END")
            packed = counted = True
    source = "gpu_samples s"
    if packed:
        source += " JOIN gpu_packs p ON p.id = s.pack"
    if counted:
        source += " LEFT JOIN gpu_counters c ON c.gpu = s.gpu AND c.ts = s.ts"
    arr = fetch_columns(conn, ["s.ts", *exprs], f"{source} WHERE s.gpu = ? AND s.ts >= ? AND s.ts < ?",
                        (gpu_id, lo_ms, hi_ms), "s.ts", not_null=("s.ts",))
    return arr[:, 0], {m: arr[:, i + 1] for i, m in enumerate(metrics)}
