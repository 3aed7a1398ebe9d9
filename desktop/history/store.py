"""HistoryStore: the SQLite history database as the rest of Rigscope uses it (open, recover, write
snapshots, read back), the one object every reader and writer holds.

One process writes (guarded by ``desktop.history.lock.WriterLock``, through
``desktop.history.writer.HistoryWriter``), any number read. A new file is created with mode 0600
(in a 0700 folder when Rigscope creates the folder); an existing file or folder keeps its
permissions. WAL and ``synchronous=NORMAL`` make a commit survive the process being killed. A
Rigscope database that SQLite calls corrupt is moved aside to ``<name>.corrupt-<timestamp>``
(never deleted) and a fresh one is started; the caller reads ``recovered_from`` to tell the user.
Any other file is refused (``filekind.NotOurDatabase``). Opening, recovery and the read-only
upgrade are ``store_open``'s.

The store holds the connection, its transactions, metadata and the small lookup tables (GPUs,
strings, events) that readers and writers share. It caches the ``gpus`` and ``strings`` rows, so
a write resolves a GPU or a process name without a query; a rolled-back transaction empties the
caches, since they may then name rows that were never committed. The tables' own code lives in
private modules it calls (a batch of snapshots in ``snapshot_rows``, range queries in ``query``,
rollups in ``rollup``, bulk numpy writes in ``bulk``, stress runs in ``stress_runs``, jobs in ``jobs``
through the ``store_jobs`` mixin; ``store_api`` says why they type it as a Protocol); code outside
``desktop.history`` calls this class's methods, never those modules.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from advisor.frame import Event, StressResult
from advisor.usage import GpuEnergy, ProcessUsageRows
from desktop.config import RetentionSettings
from desktop.history import bulk, codec, limits, rollup, store_open, stress_runs, usage_query
from desktop.history.dbfile import Transaction, resolve_db
from desktop.history.query import QUERYABLE, QueryResult, Resolution, process_history, run_query
from desktop.history.snapshot_rows import CachedGpu, SnapshotRows
from desktop.history.store_jobs import StoreJobs
from desktop.telemetry.model import GpuInfo, GpuProcess, HostSample, Snapshot

__all__ = ["QUERYABLE", "HistoryStore", "QueryResult", "Resolution"]


class HistoryStore(StoreJobs):
    """One open history database. Not thread-safe: use it from one thread (or via HistoryWriter)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, readonly: bool, recovered_from: Path | None) -> None:
        self.conn = conn
        self.path = path
        self.readonly = readonly
        #: Where a corrupt file found at ``path`` was moved to, when that happened at open.
        self.recovered_from = recovered_from
        self._gpu_cache: dict[str, CachedGpu] = {}
        self._strings: dict[str, int] = {}
        #: What writing snapshots remembers between batches (open throttle episodes, limits last written).
        self._snapshot_rows = SnapshotRows()
        self._load_gpus()

    # --- opening ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, readonly: bool = False, verify: bool = False) -> HistoryStore:
        """Open (creating or migrating as needed). ``verify`` also runs ``PRAGMA quick_check``
        (about a second per 100 MB): the long-lived writer does; short writes (a stress result) need not.

        ``path`` is taken as it is when ``resolve_db`` made it (the command line and the writer do), else
        resolved and checked there first: a folder, a device, a text file or another program's database is refused."""
        path = resolve_db(path)
        if readonly:
            return cls(store_open.open_readonly(path), path, readonly=True, recovered_from=None)
        conn, recovered = store_open.open_rw(path, verify)
        return cls(conn, path, readonly=False, recovered_from=recovered)

    @property
    def db(self) -> Any:
        """The same connection as a ``sqlite_utils.Database`` (introspection, counts), imported on first use."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    # --- the connection ---------------------------------------------------------------

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def transaction(self) -> Transaction:
        return Transaction(self.conn, self._reset_caches)

    def _reset_caches(self) -> None:
        """After a rollback the caches may name rows that were never committed."""
        self._snapshot_rows.clear()
        self._gpu_cache.clear()
        self._strings.clear()
        self._load_gpus()

    # --- metadata ----------------------------------------------------------------------

    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @property
    def is_demo(self) -> bool:
        """True for the database `rigscope demo` writes (everything in it is simulated)."""
        return self.meta("demo") == "1"

    # --- GPUs --------------------------------------------------------------------------

    def _load_gpus(self) -> None:
        for gid, uuid, info_json, state, mask in self.conn.execute(
                "SELECT id, uuid, info_json, state, throttle_mask FROM gpus"):
            key = codec.text_from_db(uuid) or ""
            self._gpu_cache[key] = CachedGpu(int(gid), codec.info_from_json(info_json), state, int(mask))

    def gpus(self) -> list[GpuInfo]:
        self._gpu_cache.clear()
        self._load_gpus()
        return sorted((entry.info for entry in self._gpu_cache.values()), key=lambda i: (i.index, i.uuid))

    def gpu_id(self, uuid: str) -> int | None:
        entry = self._gpu_cache.get(uuid)
        if entry is None:
            self._load_gpus()
            entry = self._gpu_cache.get(uuid)
        return entry.id if entry else None

    def gpu_uuid_of_id(self) -> dict[int, str]:
        return {entry.id: uuid for uuid, entry in self._gpu_cache.items()}

    def ensure_gpu(self, info: GpuInfo, time_s: float) -> int:
        """The row id for ``info.uuid``, inserting or updating its static info (emits change events)."""
        entry = self._gpu_cache.get(info.uuid)
        if entry is not None and (entry.info is info or entry.info == info):
            return entry.id
        info_json = codec.info_to_json(info)
        if entry is None:
            cur = self.conn.execute(
                "INSERT INTO gpus (uuid, idx, name, info_json, first_seen_s, last_seen_s) VALUES (?, ?, ?, ?, ?, ?)",
                (codec.db_text(info.uuid), info.index, codec.db_text(info.name), info_json, time_s, time_s))
            gid = int(cur.lastrowid or 0)
            self._gpu_cache[info.uuid] = CachedGpu(gid, info, "ok", 0)
            return gid
        old = entry.info
        if old != info:
            if old.driver_version and info.driver_version and old.driver_version != info.driver_version:
                self.add_event(time_s, "driver_change", info.uuid, f"{old.driver_version} -> {info.driver_version}")
            if old.vbios_version and info.vbios_version and old.vbios_version != info.vbios_version:
                self.add_event(time_s, "vbios_change", info.uuid, f"{old.vbios_version} -> {info.vbios_version}")
            self.conn.execute("UPDATE gpus SET idx = ?, name = ?, info_json = ? WHERE id = ?",
                              (info.index, codec.db_text(info.name), info_json, entry.id))
            entry.info = info
        return entry.id

    # --- strings (process names, users) ----------------------------------------------------

    def string_id(self, text: str) -> int:
        """The ``strings`` id of ``text``, stored losslessly whatever it holds (``codec.db_text``):
        a process name with a non-UTF-8 byte costs nothing but its own row."""
        sid = self._strings.get(text)
        if sid is None:
            stored = codec.db_text(text)
            self.conn.execute("INSERT OR IGNORE INTO strings (text) VALUES (?)", (stored,))
            sid = int(self.conn.execute("SELECT id FROM strings WHERE text = ?", (stored,)).fetchone()[0])
            self._strings[text] = sid
        return sid

    def process_string_ids(self, proc: GpuProcess) -> tuple[int | None, int | None, int | None]:
        """The ``strings`` ids of a process's user, command and container (None where it has none)."""
        user, command, container = (None if text is None else self.string_id(text)
                                    for text in (proc.user, proc.command, proc.container))
        return user, command, container

    def string_table(self) -> dict[int, str]:
        return {int(i): codec.text_from_db(t) or "" for i, t in self.conn.execute("SELECT id, text FROM strings")}

    def strings_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        """The texts of ``strings`` rows ``ids`` (the whole table when that is cheaper than asking)."""
        if len(ids) > 500:
            return self.string_table()
        if not ids:
            return {}
        return {int(i): codec.text_from_db(t) or "" for i, t in self.conn.execute(
            f"SELECT id, text FROM strings WHERE id IN ({', '.join('?' * len(ids))})", list(ids))}

    # --- events ------------------------------------------------------------------------

    def add_event(self, time_s: float, kind: str, gpu_uuid: str | None, detail: str = "") -> None:
        self.conn.execute("INSERT INTO events (ts, kind, gpu_uuid, detail) VALUES (?, ?, ?, ?)",
                          (time_s, kind, None if gpu_uuid is None else codec.db_text(gpu_uuid), codec.db_text(detail)))

    def events(self, start_s: float, end_s: float, kinds: Sequence[str] | None = None) -> list[Event]:
        """Events in [start_s, end_s), oldest first, optionally of some kinds only."""
        sql = "SELECT ts, kind, gpu_uuid, detail FROM events WHERE ts >= ? AND ts < ?"
        params: list[Any] = [start_s, end_s]
        if kinds is not None:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            params += list(kinds)
        rows = self.conn.execute(sql + " ORDER BY ts, id", params).fetchall()
        return [Event(time_s=t, kind=k, gpu_uuid=codec.text_from_db(u), detail=codec.text_from_db(d) or "")
                for t, k, u, d in rows]

    # --- writing -----------------------------------------------------------------------

    def write_snapshots(self, snapshots: Sequence[Snapshot]) -> None:
        """Write a batch of snapshots in one transaction (samples, host, processes, state events)."""
        if not snapshots:
            return
        with self.transaction():
            self.write_snapshots_in_transaction(snapshots)

    def write_snapshots_in_transaction(self, snapshots: Sequence[Snapshot]) -> None:
        """``write_snapshots`` for a caller that already opened a transaction."""
        self._snapshot_rows.write(self, self._gpu_cache, snapshots)

    # --- reading -----------------------------------------------------------------------

    def query(self, gpu_uuid: str, metrics: Sequence[str], start_s: float, end_s: float,
              max_points: int = 2000, *, resolution: Resolution | None = None) -> QueryResult:
        """``metrics`` of one GPU over [start_s, end_s), at most ``max_points`` rows (0: no limit).

        The resolution (raw, minute, hour) is chosen from the span and ``max_points`` unless given.
        Names: the GpuSample fields, ``<metric>_min``/``_max`` (utilization, VRAM, temperature,
        power, SM clock), ``busy_s``, ``energy_used_mj``, ``duration_s``, ``reason_s_<bit>``, ``capped_s`` and
        ``power_capped_w`` (power-capped seconds and their mean power), ``power_limit_w`` (the limit in force)."""
        return run_query(self, gpu_uuid, metrics, start_s, end_s, max_points=max_points, resolution=resolution)

    def stress_runs(self, gpu_uuid: str | None = None, workload: str | None = None) -> list[StressResult]:
        """Stored stress runs, newest first, optionally for one GPU and/or one workload."""
        return stress_runs.runs(self, gpu_uuid, workload)

    def stress_points(self, run_id: int) -> tuple[npt.NDArray[np.float64], dict[str, npt.NDArray[np.float64]]]:
        """(time_s, columns) of a stress run; empty arrays when it has none."""
        return stress_runs.points(self, run_id)

    def stress_run_extra(self, run_id: int) -> str:
        return stress_runs.run_extra(self, run_id)

    def add_stress_run(self, result: StressResult, extra_json: str = "") -> int:
        """Store a finished stress run; returns its new run_id (``result.run_id`` is ignored)."""
        return stress_runs.add_run(self, result, extra_json)

    def add_stress_points(self, run_id: int, time_s: npt.ArrayLike, columns: dict[str, npt.ArrayLike]) -> None:
        """A stress run's series (throughput, clocks, temperature, ...), replacing any stored before."""
        stress_runs.add_points(self, run_id, time_s, columns)

    def process_history(self, start_s: float, end_s: float, pid: int | None = None) -> list[tuple[float, GpuProcess]]:
        """The stored process samples in [start_s, end_s) (of one ``pid`` when given) as (time_s, GpuProcess)."""
        return process_history(self, start_s, end_s, pid)

    def process_usage_rows(self, start_s: float, end_s: float) -> ProcessUsageRows:
        """Every process sample in [start_s, end_s) with its GPU's figures, for the usage accounting."""
        return usage_query.process_usage_rows(self, start_s, end_s)

    def gpu_energy(self, start_s: float, end_s: float) -> list[GpuEnergy]:
        """Each GPU's energy used and busy time over [start_s, end_s)."""
        return usage_query.gpu_energy(self, start_s, end_s)

    # --- jobs (`rigscope run`): inherited from ``store_jobs.StoreJobs`` -------------------

    # --- bulk writes, rollups, retention ---------------------------------------------------

    def write_gpu_columns(self, info: GpuInfo, time_s: npt.ArrayLike, columns: Mapping[str, npt.ArrayLike], *,
                          power_limit_w: npt.ArrayLike | None = None) -> int:
        """A GPU's samples as columns (an import, the demo): returns the rows newly stored. ``power_limit_w``:
        the limit in force per row where known (else ``info``'s)."""
        return bulk.write_gpu_columns(self, info, time_s, columns, power_limit_w=power_limit_w)

    def limits_at(self, gpu_uuid: str, time_s: npt.ArrayLike) -> dict[str, npt.NDArray[np.float64]]:
        """The limits in force for one GPU at each of ``time_s`` (``limits.LIMIT_NAMES``; NaN: not known)."""
        times = np.asarray(time_s, dtype=np.float64)
        gid = self.gpu_id(gpu_uuid)
        if gid is None:
            return {name: np.full(len(times), np.nan) for name in limits.LIMIT_NAMES}
        return limits.limits_at(self.conn, gid, times)

    def write_host_samples(self, samples: Sequence[tuple[float, HostSample]]) -> None:
        bulk.write_host_samples(self, samples)

    def write_process_samples(self, samples: Sequence[tuple[float, str, GpuProcess]]) -> None:
        bulk.write_process_samples(self, samples)

    def run_rollups(self, now_s: float, *, busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> None:
        """Bring the minute and hour tables up to the last complete minute / hour before ``now_s`` (the minutes'
        busy seconds count above ``busy_util_pct``, ``[advisor] busy_util_pct``)."""
        rollup.run_rollups(self, now_s, busy_util_pct=busy_util_pct)

    def apply_retention(self, retention: RetentionSettings, now_s: float) -> dict[str, int]:
        """Delete rows older than the retention allows (never raw rows not yet rolled up); rows deleted per table."""
        return rollup.apply_retention(self, retention, now_s)

    def maintain(self, retention: RetentionSettings, now_s: float, *,
                 busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> None:
        """What the recorder runs periodically: rollups first, then retention."""
        rollup.maintain(self, retention, now_s, busy_util_pct=busy_util_pct)

    def time_range(self) -> tuple[float, float] | None:
        """(first, last) sample time over raw and rolled-up GPU data, or None when empty."""
        lows: list[float] = []
        highs: list[float] = []
        gids = [int(r[0]) for r in self.conn.execute("SELECT id FROM gpus")]
        for table, unit in (("gpu_samples", 1000.0), ("gpu_minute", 1.0), ("gpu_hour", 1.0)):
            for gid in gids:
                bounds = codec.ts_bounds(self.conn, table, gid)
                if bounds is not None:
                    lo, hi = bounds
                    lows.append(lo / unit)
                    highs.append(hi / unit + (0.0 if unit > 1 else (60.0 if table == "gpu_minute" else 3600.0)))
        if not lows:
            return None
        return min(lows), max(highs)

    def size_bytes(self) -> int:
        page_size, pages, free = (self.conn.execute(f"PRAGMA {p}").fetchone()[0]
                                  for p in ("page_size", "page_count", "freelist_count"))
        return int(page_size * (pages - free))

    def counts(self) -> dict[str, int]:
        """Rows per table (for `rigscope demo --json`, tests and the recorder's report)."""
        tables = ("gpus", "gpu_samples", "host_samples", "process_samples", "events", "stress_runs",
                  "gpu_minute", "gpu_hour", "host_minute", "host_hour")
        db = self.db
        return {t: int(db[t].count) for t in tables}
