"""HistoryStore: the SQLite history database as the rest of Rigscope uses it (open, recover, write
snapshots, read back), the one object every reader and writer holds.

One process writes (guarded by ``desktop.history.lock.WriterLock``, through
``desktop.history.writer.HistoryWriter``), any number read. A new file is created with mode 0600
(in a 0700 folder when Rigscope creates the folder); an existing file or folder keeps its
permissions. WAL and ``synchronous=NORMAL`` make a commit survive the process being killed. A
Rigscope database that SQLite calls corrupt is moved aside to ``<name>.corrupt-<timestamp>``
(never deleted) and a fresh one is started; the caller reads ``recovered_from`` to tell the user.
Any other file is refused (``dbfile.NotOurDatabase``).

The store holds the connection, its transactions, metadata and the small lookup tables (GPUs,
strings, events) that readers and writers share. It caches the ``gpus`` and ``strings`` rows, so
a write resolves a GPU or a process name without a query; a rolled-back transaction empties the
caches, since they may then name rows that were never committed. The tables' own code lives in
private modules it calls (range queries in ``query``, rollups in ``rollup``, bulk numpy writes in
``bulk``, stress runs in ``stress_runs``, jobs in ``jobs``; ``store_api`` says why they type it
as a Protocol); code outside ``desktop.history`` calls this class's methods, never those modules.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from advisor.frame import Event, StressResult
from advisor.progress import JobSeries
from advisor.usage import GpuEnergy, ProcessUsageRows
from desktop.config import RetentionSettings
from desktop.errors import UserError
from desktop.history import (
    bulk,
    codec,
    dberrors,
    jobs,
    limits,
    media,
    packing,
    rollup,
    schema,
    stress_runs,
    usage_query,
)
from desktop.history.dbfile import (
    DbPath,
    NotOurDatabase,
    Transaction,
    connect_rw,
    is_own_connection,
    may_move_aside,
    move_aside,
    resolve_db,
)
from desktop.history.job_model import GuardEvent, JobRecord
from desktop.history.media import connect_readonly
from desktop.history.query import QUERYABLE, QueryResult, Resolution, process_history, run_query
from desktop.paths import ensure_private_dir
from desktop.telemetry.model import (
    THROTTLE_REASONS,
    ClockEventReason,
    DeviceState,
    GpuInfo,
    GpuProcess,
    HostSample,
    Snapshot,
)

__all__ = ["QUERYABLE", "HistoryStore", "QueryResult", "Resolution"]

log = logging.getLogger(__name__)

#: Seconds without any throttle reason that end a throttle episode.
THROTTLE_END_GAP_S = 30.0


def _throttle_labels(mask: int) -> str:
    return ", ".join(r.label for r in ClockEventReason.decode(mask & int(THROTTLE_REASONS)))


def _create_private(path: Path) -> None:
    """Create the empty database file, 0600. Only a file made here is chmod-ed (the umask may have
    taken the owner's own bits); one that appeared meanwhile is someone else's and keeps its mode."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        if hasattr(os, "fchmod"):  # POSIX
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


_WARNED_NEWER: set[Path] = set()


def _warn_newer(path: Path, version: int) -> None:
    """Said once per file and process: what a reader shows may lack what a newer Rigscope stored."""
    if path in _WARNED_NEWER:
        return
    _WARNED_NEWER.add(path)
    log.warning("the history database %s was written by a newer Rigscope (schema version %d; this one knows up "
                "to %d): it is read as far as this version understands it, and newer figures are left out; "
                "update Rigscope to see everything", path, version, schema.SCHEMA_VERSION)


@dataclass(slots=True)
class CachedGpu:
    """One ``gpus`` row as the writer last stored it (it compares each new reading with this)."""

    id: int
    info: GpuInfo
    #: The ``DeviceState`` value stored last.
    state: str
    #: Throttle reasons seen in the open throttle episode (0: no episode open).
    throttle_mask: int


class HistoryStore:
    """One open history database. Not thread-safe: use it from one thread (or via HistoryWriter)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, readonly: bool, recovered_from: Path | None) -> None:
        self.conn = conn
        self.path = path
        self.readonly = readonly
        #: Where a corrupt file found at ``path`` was moved to, when that happened at open.
        self.recovered_from = recovered_from
        self._gpu_cache: dict[str, CachedGpu] = {}
        self._strings: dict[str, int] = {}
        # uuid -> when the current calm stretch of an open throttle episode began.
        self._unthrottled_since: dict[str, float] = {}
        #: Each GPU's limits in force, written when they change (schema v11).
        self._limits = limits.LimitsLog()
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
            return cls._open_readonly(path)
        media.require_writable_folder(path)  # read-only media: one line, before anything is made or written
        try:
            ensure_private_dir(path.parent)
            if not path.exists():
                _create_private(path)
        except OSError as exc:
            raise UserError(f"cannot create the history database {path}: {exc.strerror or exc} "
                            "(a read-only file system, missing permission, or a file where a folder should be)"
                            ) from exc
        recovered: Path | None = None
        try:
            conn = connect_rw(path, verify)
        except sqlite3.DatabaseError as exc:
            if not dberrors.is_corruption(exc):
                raise cls._as_user_error(path, exc) from exc
            if not may_move_aside(path):  # only a damaged *Rigscope* database is ours to move
                raise NotOurDatabase(path, "it is a damaged SQLite file that does not say it is Rigscope's"
                                     ) from exc
            recovered = move_aside(path)
            log.info("history database %s was corrupt; moved it to %s and started a fresh one", path, recovered)
            conn = connect_rw(path, verify)
        return cls(conn, path, readonly=False, recovered_from=recovered)

    @classmethod
    def _open_readonly(cls, path: DbPath) -> HistoryStore:
        if not path.exists():
            raise UserError(f"no history database at {path} (start `rigscope record`, or `rigscope demo`)")
        conn: sqlite3.Connection | None = None
        try:
            conn = connect_readonly(path)  # immutable=1 where read-only media take no -shm (said once)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            own = is_own_connection(conn)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if dberrors.is_corruption(exc) and not may_move_aside(path):
                raise NotOurDatabase(path, "it is a damaged SQLite file that does not say it is Rigscope's") from exc
            raise cls._as_user_error(path, exc) from exc
        if own is False:
            conn.close()
            raise NotOurDatabase(path, "it is another program's SQLite database")
        if version < schema.SCHEMA_VERSION:  # an older file nobody has opened for writing yet
            conn.close()
            if media.folder_unwritable(path.parent):
                raise UserError(f"the history database {path} was written by an older Rigscope (schema version "
                                f"{version}) and is upgraded once by writing it, but it is "
                                f"{media.why_unwritable(path.parent)}: copy it to a writable folder and read the copy")
            cls.open(path).close()
            return cls._open_readonly(path)
        if version > schema.SCHEMA_VERSION:
            _warn_newer(path, int(version))
        return cls(conn, path, readonly=True, recovered_from=None)

    @staticmethod
    def _as_user_error(path: Path, exc: sqlite3.DatabaseError) -> UserError:
        if dberrors.is_corruption(exc):
            return UserError(f"the history database {path} is damaged ({exc}); open it once for writing "
                             "(`rigscope record`) to move it aside and start a fresh one")
        reason = dberrors.environment_problem(exc) or str(exc)
        return UserError(f"cannot open the history database {path}: {reason}")

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
        self._unthrottled_since.clear()
        self._gpu_cache.clear()
        self._strings.clear()
        self._limits.clear()
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
        gpu_rows = packing.SampleRows(self.conn)
        host_rows: list[tuple[Any, ...]] = []
        proc_rows: list[tuple[Any, ...]] = []
        seen: dict[int, float] = {}
        self._limits.clear()  # another process (an import) may have written limits since the last batch
        for snap in snapshots:
            ids: dict[int, int] = {}
            for reading in snap.gpus:
                gid = self.ensure_gpu(reading.info, snap.time_s)
                ids[reading.info.index] = gid
                seen[gid] = snap.time_s
                self._limits.note(self.conn, gid, snap.time_s, reading.info)
                self._track_state(reading.info.uuid, snap.time_s, reading.state, reading.state_detail)
                if reading.state is DeviceState.OK and reading.sample is not None:
                    gpu_rows.add(gid, snap.time_s, reading.sample)
                    self._track_throttle(reading.info.uuid, snap.time_s, reading.sample.clock_event_reasons)
            if snap.host is not None:
                host_rows.append(codec.host_row(snap.time_s, snap.host))
            if snap.processes_fresh:
                ts_ms = codec.to_ms(snap.time_s)
                for proc in snap.processes:
                    gid_or_none = ids.get(proc.gpu_index)
                    if gid_or_none is None:
                        continue
                    proc_rows.append(codec.process_row(ts_ms, gid_or_none, proc, self.string_id(proc.name),
                                                       self.process_string_ids(proc)))
        gpu_rows.write()
        self.conn.executemany(codec.INSERT_HOST, host_rows)
        self.conn.executemany(codec.INSERT_PROC, proc_rows)
        for gid, last in seen.items():
            self.conn.execute("UPDATE gpus SET last_seen_s = max(coalesce(last_seen_s, 0), ?) WHERE id = ?",
                              (last, gid))
        rollup.note_written(self, min(s.time_s for s in snapshots))

    def _track_state(self, uuid: str, time_s: float, state: DeviceState, detail: str | None) -> None:
        entry = self._gpu_cache[uuid]
        if entry.state == state.value:
            return
        # Only losing a GPU and getting it back are events; a laptop GPU put to sleep by the
        # driver (runtime PM) and woken again is normal running, not a fault.
        if state is DeviceState.LOST:
            self.add_event(time_s, "gpu_lost", uuid, detail or "")
        elif entry.state == DeviceState.LOST.value:
            self.add_event(time_s, "gpu_back", uuid, detail or "")
        entry.state = state.value
        self.conn.execute("UPDATE gpus SET state = ? WHERE id = ?", (state.value, entry.id))

    def _track_throttle(self, uuid: str, time_s: float, reasons: int | None) -> None:
        """throttle_start / throttle_end events, one pair per episode: an episode ends only after
        ``THROTTLE_END_GAP_S`` without a throttle reason, so a power cap that flickers every few
        seconds is one episode (the end is stamped at the first sample without a reason)."""
        entry = self._gpu_cache[uuid]
        mask = (reasons or 0) & int(THROTTLE_REASONS)
        episode = entry.throttle_mask
        if mask:
            self._unthrottled_since.pop(uuid, None)
            if not episode:
                self.add_event(time_s, "throttle_start", uuid, _throttle_labels(mask))
            if mask | episode != episode:
                entry.throttle_mask = mask | episode
                self.conn.execute("UPDATE gpus SET throttle_mask = ? WHERE id = ?", (entry.throttle_mask, entry.id))
            return
        if not episode:
            return
        since = self._unthrottled_since.setdefault(uuid, time_s)
        if time_s - since >= THROTTLE_END_GAP_S:
            self.add_event(since, "throttle_end", uuid, _throttle_labels(episode))
            del self._unthrottled_since[uuid]
            entry.throttle_mask = 0
            self.conn.execute("UPDATE gpus SET throttle_mask = 0 WHERE id = ?", (entry.id,))

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

    # --- jobs (`rigscope run`) -----------------------------------------------------------

    def add_job(self, record: JobRecord) -> int:
        """Store a job (running or finished) with its events; returns its new job_id (``record.job_id`` is ignored)."""
        return jobs.add_job(self, record)

    def update_job(self, record: JobRecord) -> None:
        """Store what ``record`` says now (its end, PIDs, GPUs, card); its events are added by ``add_job_event``."""
        jobs.update_job(self, record)

    def heartbeat(self, record: JobRecord, now_s: float) -> None:
        """Say that ``record``'s `rigscope run` is alive at ``now_s`` (a job taken for lost runs again)."""
        jobs.heartbeat(self, record, now_s)

    def add_job_event(self, job_id: int, event: GuardEvent, gpu_uuid: str | None = None, detail: str = "") -> None:
        """One guard event of a job, also on the history's timeline (``job_pause``/``job_resume``)."""
        jobs.add_job_event(self, job_id, event, gpu_uuid, detail)

    def set_job_series(self, job_id: int, series: JobSeries) -> None:
        """The job's throughput series, replacing any stored before."""
        jobs.set_job_series(self, job_id, series)

    def job_series(self, job_id: int) -> JobSeries:
        """The job's throughput series; empty when it reported none."""
        return jobs.job_series(self, job_id)

    def jobs(self, start_s: float | None = None, end_s: float | None = None, *,
             limit: int | None = None) -> list[JobRecord]:
        """Stored jobs, newest first; optionally those that started in [start_s, end_s), the newest ``limit``."""
        return jobs.jobs(self, start_s, end_s, limit=limit)

    def job(self, job_id: int) -> JobRecord | None:
        """One job with its events; None when there is no such job."""
        return jobs.job(self, job_id)

    def close_orphaned_jobs(self, now_s: float, *,
                            alive: Callable[[JobRecord, float], bool] | None = None) -> list[JobRecord]:
        """Close every job still "running" whose `rigscope run` is gone, at its last heartbeat; returns them."""
        if alive is None:
            return jobs.close_orphaned_jobs(self.conn, now_s)
        return jobs.close_orphaned_jobs(self.conn, now_s, alive=alive)

    @staticmethod
    def close_orphaned_jobs_at(path: Path, now_s: float) -> list[JobRecord]:
        """``close_orphaned_jobs`` on the database at ``path`` for a command about to open it: never creates,
        migrates or fails (what is wrong with the file is said by the command that opens it)."""
        return jobs.close_orphaned_jobs_at(path, now_s)

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
