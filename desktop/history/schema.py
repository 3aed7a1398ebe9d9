"""The history database schema: its tables and the forward migrations that make them.

Samples are stored in WITHOUT ROWID tables keyed by (GPU, time in ms), as integers scaled per column
(the scales and column lists are in ``layout``): SQLite writes small integers in one to three bytes,
which keeps a GPU sample under ~60 bytes on disk. ``PRAGMA user_version`` holds the schema version;
``MIGRATIONS[v]`` takes a database from version ``v`` to ``v + 1``, so a file from any older release is
brought forward step by step.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Callable
from typing import Any, Final

from desktop.history.layout import (
    CAPPED_ROLLUP_COLUMNS,
    COUNTER_BITS,
    COUNTER_MAX,
    COUNTER_METRICS,
    HOST_ROLLUP_METRICS,
    HOST_SCALES,
    LIMIT_COLUMNS,
    PACK_COLUMNS,
    PACKED_METRICS,
    PROCESS_V8_COLUMNS,
    ROW_METRICS,
    V1_GPU_METRICS,
    V9_GPU_METRICS,
    v4_rollup_columns,
)


def _run(conn: sqlite3.Connection, script: str) -> None:
    # Not executescript: it commits first, and a migration step must be one transaction.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _utils(conn: sqlite3.Connection) -> Any:
    """``conn`` as a ``sqlite_utils.Database``, for the steps it says best: plain tables, ``add_column``,
    ``create_index``. It runs each statement on ``conn`` inside the step's transaction (nothing it does
    commits), and leaves the connection's settings alone. A WITHOUT ROWID table, a UNIQUE column and a
    foreign key ON DELETE CASCADE are beyond its ``create_table``: those stay SQL. Imported here, on the
    rare open that migrates: it costs ~0.2 s, which no ordinary open (or the window's start) should pay."""
    import sqlite_utils

    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


def _add_columns(conn: sqlite3.Connection, tables: tuple[str, ...], columns: tuple[str, ...]) -> None:
    """Integer ``columns`` appended to each of ``tables`` (old rows keep NULL)."""
    db = _utils(conn)
    for table in tables:
        for column in columns:
            db[table].add_column(column, int)


#: What a step that appends metric columns does after: the day blocks hold copies without the new
#: columns, and a block that lacks a column asked for is read from its rows; dropped, so that the next
#: rollup packs every day again, with them.
_DROP_DAY_BLOCKS = "DELETE FROM day_blocks; DELETE FROM meta WHERE key = 'blocks_until';"


def _v1(conn: sqlite3.Connection) -> None:
    gpu_cols = ", ".join(f"{m} INTEGER" for m in V1_GPU_METRICS)
    host_cols = ", ".join(f"{m} INTEGER" for m in HOST_SCALES)
    db = _utils(conn)
    db.create_table("meta", {"key": str, "value": str}, pk="key", not_null={"value"})
    _run(conn, f"""
        CREATE TABLE gpus (
            id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, idx INTEGER NOT NULL, name TEXT NOT NULL,
            info_json TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'ok', throttle_mask INTEGER NOT NULL DEFAULT 0,
            first_seen_s REAL, last_seen_s REAL);
        CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
        CREATE TABLE gpu_samples (gpu INTEGER NOT NULL, ts INTEGER NOT NULL, {gpu_cols},
            PRIMARY KEY (gpu, ts)) WITHOUT ROWID;
        CREATE TABLE host_samples (ts INTEGER PRIMARY KEY, {host_cols}, cpu_per_core BLOB) WITHOUT ROWID;
    """)
    db.create_table("events", {"id": int, "ts": float, "kind": str, "gpu_uuid": str, "detail": str}, pk="id",
                    not_null={"ts", "kind", "detail"}, defaults={"detail": ""})
    db["events"].create_index(["ts"], index_name="events_ts")


def _v2(conn: sqlite3.Connection) -> None:
    _run(conn, """
        CREATE TABLE process_samples (ts INTEGER NOT NULL, gpu INTEGER NOT NULL, pid INTEGER NOT NULL,
            name_id INTEGER NOT NULL, user_id INTEGER, vram_mib INTEGER, kind INTEGER NOT NULL DEFAULT 0,
            cpu_pct INTEGER, started_ms INTEGER, own INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (ts, gpu, pid)) WITHOUT ROWID;
    """)


def _v3(conn: sqlite3.Connection) -> None:
    db = _utils(conn)
    columns = {"run_id": int, "started_s": float, "ended_s": float, "gpu_uuid": str, "gpu_name": str,
               "workload": str, "dtype": str, "unit": str, "peak_throughput": float, "sustained_throughput": float,
               "throttled": int, "errors": int, "driver_version": str, "summary": str, "device": str,
               "extra_json": str}
    db.create_table("stress_runs", columns, pk="run_id",
                    not_null=set(columns) - {"run_id", "driver_version"}, defaults={"device": "", "extra_json": ""})
    db["stress_runs"].create_index(["started_s"], index_name="stress_runs_started")
    _run(conn, """
        -- One row per run and column: the whole float64 series as a blob (runs are short).
        CREATE TABLE stress_series (run_id INTEGER NOT NULL REFERENCES stress_runs(run_id) ON DELETE CASCADE,
            name TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, name)) WITHOUT ROWID;
    """)


def _v4(conn: sqlite3.Connection) -> None:
    cols = ", ".join(f"{c} INTEGER" for c in v4_rollup_columns())
    host = ", ".join(f"{c} INTEGER" for c in HOST_ROLLUP_METRICS)
    script = ""
    for table in ("gpu_minute", "gpu_hour"):
        script += f"CREATE TABLE {table} (gpu INTEGER NOT NULL, ts INTEGER NOT NULL, {cols}, " \
                  "PRIMARY KEY (gpu, ts)) WITHOUT ROWID;\n"
    for table in ("host_minute", "host_hour"):
        script += f"CREATE TABLE {table} (ts INTEGER PRIMARY KEY, {host}, dur_ds INTEGER) WITHOUT ROWID;\n"
    _run(conn, script)


def _v5(conn: sqlite3.Connection) -> None:
    # Whole UTC days of a table packed into one compressed blob (desktop/history/blocks.py): a copy
    # of rows that stay in their tables, so reading a week decodes a few blobs instead of 100,000 rows.
    columns = {"day": int, "source": str, "gpu": int, "rows": int, "columns": str, "data": bytes}
    _utils(conn).create_table("day_blocks", columns, pk=("day", "source", "gpu"), not_null=set(columns))


def _v6(conn: sqlite3.Connection) -> None:
    # NVML's time under each clock-event cause: appended to the raw and rollup tables (old rows
    # keep NULL there: nobody counted then); the day blocks are packed again with them.
    _add_columns(conn, ("gpu_samples", "gpu_minute", "gpu_hour"), COUNTER_METRICS)
    _run(conn, _DROP_DAY_BLOCKS)


def _v7(conn: sqlite3.Connection) -> None:
    # Jobs run under `rigscope run` (issue 15, desktop/history/jobs.py): one row per job (lists as JSON),
    # its throughput series as float64 blobs (like stress_series), and the guard's pauses and resumes.
    db = _utils(conn)
    columns = {"job_id": int, "name": str, "argv_json": str, "started_s": float, "ended_s": float, "exit_code": int,
               "pids_json": str, "gpu_uuids_json": str, "gpu_indices_json": str, "throughput_unit": str,
               "guard_c": float, "paused_s": float, "source": str, "card_json": str, "extra_json": str}
    db.create_table("jobs", columns, pk="job_id",
                    not_null={"name", "argv_json", "started_s", "pids_json", "gpu_uuids_json", "gpu_indices_json",
                              "paused_s", "source", "extra_json"},
                    defaults={"pids_json": "[]", "gpu_uuids_json": "[]", "gpu_indices_json": "[]", "paused_s": 0,
                              "source": "nvml", "extra_json": ""})
    db["jobs"].create_index(["started_s"], index_name="jobs_started")
    _run(conn, """
        CREATE TABLE job_series (job_id INTEGER NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,
            name TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (job_id, name)) WITHOUT ROWID;
        CREATE TABLE job_events (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(job_id)
            ON DELETE CASCADE, ts REAL NOT NULL, kind TEXT NOT NULL, temperature_c REAL, gpu_index INTEGER);
    """)
    db["job_events"].create_index(["job_id", "ts"], index_name="job_events_job")


def _v8(conn: sqlite3.Connection) -> None:
    # Per-process utilization and attribution (issue 16): columns on process_samples; older rows keep
    # NULL (n/a: nobody asked then). The day blocks hold copies without them: dropped, as in _v6.
    _add_columns(conn, ("process_samples",), PROCESS_V8_COLUMNS)
    _run(conn, _DROP_DAY_BLOCKS)


def _v9(conn: sqlite3.Connection) -> None:
    # Effective load (issue 16): appended to the raw and rollup tables; older rows keep NULL
    # (nobody estimated then). The day blocks hold copies without the column: dropped, as in _v6.
    _add_columns(conn, ("gpu_samples", "gpu_minute", "gpu_hour"), V9_GPU_METRICS)
    _run(conn, _DROP_DAY_BLOCKS)


def _v10_exprs(src: str) -> tuple[list[str], str, str]:
    """SQL over a v9 ``gpu_samples`` row named ``src``: each ``PACK_COLUMNS`` value, ``counters``, and
    whether the counters fit there."""
    counted = " + ".join(f"({src}.{m} IS NOT NULL) * {1 << i}" for i, m in enumerate(COUNTER_METRICS))
    packs = [f"{src}.vram_free_mib + coalesce({src}.vram_used_mib, 0)",
             *(f"{src}.{m}" for m in PACKED_METRICS[1:]), f"({counted})"]
    fits = " AND ".join(f"coalesce({src}.{m}, 0) BETWEEN 0 AND {COUNTER_MAX}" for m in COUNTER_METRICS)
    packed = " + ".join(f"(coalesce({src}.{m}, 0) << {COUNTER_BITS * i})" for i, m in enumerate(COUNTER_METRICS))
    return packs, f"CASE WHEN {fits} THEN {packed} ELSE -1 END", fits


def _v10(conn: sqlite3.Connection) -> None:
    # Issue 27: 23 columns made a sample 68 bytes on disk; packed, ~50 (``layout.PACK_COLUMNS`` says how). Every
    # v9 row is copied into the new layout (same values back: tests/unit/history/test_packed_layout.py).
    packs = ", ".join(f"{c} INTEGER" for c in PACK_COLUMNS)
    counters = ", ".join(f"{m} INTEGER" for m in COUNTER_METRICS)
    row = ", ".join(f"{m} INTEGER" for m in ROW_METRICS)
    pack_exprs, counters_expr, fits = _v10_exprs("s")
    match = " AND ".join(f"p.{c} IS {e}" for c, e in zip(PACK_COLUMNS, pack_exprs, strict=True))
    _run(conn, f"""
        CREATE TABLE gpu_packs (id INTEGER PRIMARY KEY, {packs});
        CREATE TABLE gpu_counters (gpu INTEGER NOT NULL, ts INTEGER NOT NULL, {counters},
            PRIMARY KEY (gpu, ts)) WITHOUT ROWID;
        CREATE TABLE gpu_samples_v10 (gpu INTEGER NOT NULL, ts INTEGER NOT NULL, pack INTEGER NOT NULL,
            counters INTEGER NOT NULL, {row}, PRIMARY KEY (gpu, ts)) WITHOUT ROWID;
        INSERT INTO gpu_packs ({', '.join(PACK_COLUMNS)}) SELECT DISTINCT {', '.join(pack_exprs)} FROM gpu_samples s;
        CREATE INDEX gpu_packs_v10 ON gpu_packs ({', '.join(PACK_COLUMNS)});
        INSERT INTO gpu_samples_v10 (gpu, ts, pack, counters, {', '.join(ROW_METRICS)})
            SELECT s.gpu, s.ts, (SELECT p.id FROM gpu_packs p WHERE {match}), {counters_expr},
                {', '.join(f's.{m}' for m in ROW_METRICS)}
            FROM gpu_samples s;
        INSERT INTO gpu_counters (gpu, ts, {', '.join(COUNTER_METRICS)})
            SELECT s.gpu, s.ts, {', '.join(f's.{m}' for m in COUNTER_METRICS)} FROM gpu_samples s WHERE NOT ({fits});
        DROP INDEX gpu_packs_v10;
        DROP TABLE gpu_samples;
        ALTER TABLE gpu_samples_v10 RENAME TO gpu_samples;
    """)


#: The power limit in an ``envelope.limit`` event's line (advisor.envelope.explain_cap): "capped at 80 W of
#: 175 W: ...", "at its rated power (175 W)", "limit 150 W".
_EVENT_LIMIT = re.compile(r"^(?:capped at (\d+(?:\.\d+)?) W of|at its rated power \((\d+(?:\.\d+)?) W\)"
                          r"|limit (\d+(?:\.\d+)?) W)")


def _scaled(value: Any, scale: int) -> int | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return round(float(value) * scale) if ok else None


def _v11_seed(conn: sqlite3.Connection) -> list[tuple[int, int, int | None, int | None, int | None]]:
    """One row per GPU from what the history knew: its stored info (the last limits read) from its first
    sample on, and the power limit of each ``envelope.limit`` event (a firmware mode switch, Dynamic Boost)."""
    rows = []
    for gid, uuid, info_json, first_seen in conn.execute("SELECT id, uuid, info_json, first_seen_s FROM gpus"):
        try:
            info = json.loads(info_json)
        except ValueError:
            info = None
        info = info if isinstance(info, dict) else {}
        first = conn.execute("SELECT min(ts) FROM gpu_samples WHERE gpu = ?", (gid,)).fetchone()[0]
        known = [x for x in (first, None if first_seen is None else round(first_seen * 1000)) if x is not None]
        start_ms = min(known) if known else 0
        seed = [_scaled(info.get(field), scale) for _, field, scale in LIMIT_COLUMNS]
        rows.append((gid, start_ms, *seed))
        for ts, detail in conn.execute("SELECT ts, detail FROM events WHERE kind = 'envelope.limit' AND gpu_uuid = ? "
                                       "ORDER BY ts, id", (uuid,)):
            match = _EVENT_LIMIT.match(str(detail))
            if match is not None:
                watts = next(g for g in match.groups() if g is not None)
                rows.append((gid, max(start_ms, round(float(ts) * 1000)), _scaled(float(watts), 10), seed[1], seed[2]))
    return rows


def _v11(conn: sqlite3.Connection) -> None:
    # Issue 32: a laptop's enforced power limit moves (Dynamic Boost, firmware modes, battery); every judgement
    # from history reads the limit in force at each sample from here. Rollups gain the power-capped seconds and
    # their mean power: the minute marker goes, so the next pass rolls the raw rows still kept up again (older
    # rows keep NULL: the whole row's power stands in; hours are for long charts, no judgement reads them).
    _run(conn, f"""
        CREATE TABLE gpu_limits (gpu INTEGER NOT NULL, ts INTEGER NOT NULL,
            {', '.join(f'{c} INTEGER' for c, _, _ in LIMIT_COLUMNS)}, PRIMARY KEY (gpu, ts)) WITHOUT ROWID
    """)
    last: dict[int, tuple[int | None, ...]] = {}
    for gid, ts, *values in _v11_seed(conn):
        if last.get(gid) != tuple(values):
            conn.execute("INSERT OR REPLACE INTO gpu_limits VALUES (?, ?, ?, ?, ?)", (gid, ts, *values))
            last[gid] = tuple(values)
    _add_columns(conn, ("gpu_minute", "gpu_hour"), CAPPED_ROLLUP_COLUMNS)
    _run(conn, _DROP_DAY_BLOCKS + " DELETE FROM meta WHERE key = 'rollup_minute_until';")


def _jobs_running_index(conn: sqlite3.Connection) -> None:
    """Issue 38: every command closes orphaned jobs at its start (``jobs.close_orphaned_jobs``), asking for the
    jobs still running; without an index that walks every job ever run. The partial index holds only those."""
    conn.execute("CREATE INDEX IF NOT EXISTS jobs_running ON jobs (job_id) WHERE ended_s IS NULL")


#: MIGRATIONS[v] upgrades a database at version v to v + 1 (version 0 = empty file).
MIGRATIONS: Final[tuple[Callable[[sqlite3.Connection], None], ...]] = (_v1, _v2, _v3, _v4, _v5, _v6, _v7,
                                                                       _v8, _v9, _v10, _v11,
                                                                       _jobs_running_index)
SCHEMA_VERSION: Final = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring ``conn`` up to ``target``, one transaction per step; returns the version found."""
    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(f"schema version {found} is newer than this Rigscope ({SCHEMA_VERSION})")
    for version in range(found, target):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Read again under the write lock: another process opening the same new file may have
            # taken this step meanwhile ("duplicate column name" if it were taken twice).
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) > version:
                conn.execute("COMMIT")
                continue
            MIGRATIONS[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return found
