"""The history database schema: tables, integer column scales and forward migrations.

Samples are stored as integers scaled per column (0.1 % utilization, 0.1 °C, 0.1 W, ...)
in WITHOUT ROWID tables keyed by (GPU, time in ms): SQLite writes small integers in one
to three bytes, which keeps a GPU sample under ~60 bytes on disk. ``PRAGMA user_version``
holds the schema version; ``MIGRATIONS[v]`` takes a database from version ``v`` to
``v + 1``, so a file from any older release is brought forward step by step.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Callable
from typing import Any, Final

from advisor.clock_events import SINGLE_REASONS
from desktop.telemetry.model import CLOCK_EVENT_COUNTERS, GPU_METRIC_NAMES

#: Multiply a GpuSample value by this before storing it as an integer.
GPU_SCALES: Final[dict[str, int]] = {
    "utilization_gpu_pct": 10,
    "utilization_mem_pct": 10,
    "vram_used_mib": 10,
    "vram_free_mib": 10,
    "temperature_c": 10,
    "power_w": 10,
    "energy_mj": 1,
    "sm_clock_mhz": 1,
    "mem_clock_mhz": 1,
    "fan_pct": 1,
    "clock_event_reasons": 1,
    "pcie_rx_kib_s": 1,
    "pcie_tx_kib_s": 1,
    "pcie_gen": 1,
    "pcie_width": 1,
    "pstate": 1,
    # Seconds under each clock-event cause (the counter rows of advisor/clock_events.py's table), in ms: NVML
    # counts ns, and a 0.3 s episode must stay 0.3 s.
    **dict.fromkeys((name for name, _reason in CLOCK_EVENT_COUNTERS), 1000),
    "effective_load_pct": 10,
}
assert tuple(GPU_SCALES) == GPU_METRIC_NAMES

#: The gpu_samples columns schema v1 created; later metrics are appended by their own migration
#: (``_v6``), so a file of any version has the registry's columns in the registry's order.
_V1_GPU_METRICS: Final[tuple[str, ...]] = GPU_METRIC_NAMES[:16]
assert _V1_GPU_METRICS[-1] == "pstate"
#: Seconds under each clock-event cause (NVML's counters): summed in rollups, never averaged.
COUNTER_METRICS: Final[tuple[str, ...]] = tuple(name for name, _ in CLOCK_EVENT_COUNTERS)

#: HostSample scalar fields and their scales (cpu_per_core_pct is a blob of int16 x10).
HOST_SCALES: Final[dict[str, int]] = {
    "cpu_pct": 10,
    "cpu_freq_mhz": 1,
    "ram_used_mib": 10,
    "ram_total_mib": 10,
    "swap_used_mib": 10,
    "swap_total_mib": 10,
    "load_1m": 100,
    "load_5m": 100,
    "load_15m": 100,
    "cpu_temp_c": 10,
    "battery_pct": 10,
    "on_ac_power": 1,
}

#: Metrics whose rollups also keep the per-bucket minimum and maximum.
MINMAX_METRICS: Final[tuple[str, ...]] = (
    "utilization_gpu_pct", "vram_used_mib", "temperature_c", "power_w", "sm_clock_mhz",
)
#: Metrics whose rollups keep a time-weighted mean (the energy counter becomes energy used).
MEAN_METRICS: Final[tuple[str, ...]] = tuple(
    m for m in GPU_METRIC_NAMES if m not in ("energy_mj", "clock_event_reasons", *COUNTER_METRICS)
)
REASON_BITS: Final[tuple[int, ...]] = tuple(int(r) for r in SINGLE_REASONS)
#: Rollup host metrics (time-weighted means).
HOST_ROLLUP_METRICS: Final[tuple[str, ...]] = ("cpu_pct", "ram_used_mib", "ram_total_mib", "on_ac_power", "battery_pct")
#: Scale of on_ac_power in host rollups (a share of time, so more than 0/1).
ON_AC_ROLLUP_SCALE: Final = 1000


def _v4_rollup_columns() -> list[str]:
    """The value columns schema v4 created in gpu_minute / gpu_hour."""
    cols = [m for m in MEAN_METRICS if m in _V1_GPU_METRICS]
    cols += [f"{m}_min" for m in MINMAX_METRICS] + [f"{m}_max" for m in MINMAX_METRICS]
    cols += ["energy_used_mj", "busy_ds", "dur_ds", "reasons_any"]
    cols += [f"r_{bit}_ds" for bit in REASON_BITS]
    return cols


#: GPU metrics schema v9 appended to the raw and rollup tables (time-weighted means in rollups).
_V9_GPU_METRICS: Final[tuple[str, ...]] = ("effective_load_pct",)
assert GPU_METRIC_NAMES[-len(_V9_GPU_METRICS):] == _V9_GPU_METRICS


#: Rollup columns schema v11 appended: seconds under a power reason (SW power cap or HW power brake, from the
#: sampled masks; deciseconds) and the mean power over those seconds only (0.1 W), so that "mean power while
#: capped" on a minute or hour row is not diluted by its idle seconds.
CAPPED_ROLLUP_COLUMNS: Final[tuple[str, ...]] = ("capped_ds", "power_capped_w")


def rollup_columns() -> list[str]:
    """The value columns of gpu_minute / gpu_hour, in order (v6 appended the counted seconds in ms, v9 the
    effective load, v11 the power-capped seconds and their mean power)."""
    return [*_v4_rollup_columns(), *COUNTER_METRICS, *_V9_GPU_METRICS, *CAPPED_ROLLUP_COLUMNS]


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
    gpu_cols = ", ".join(f"{m} INTEGER" for m in _V1_GPU_METRICS)
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
    cols = ", ".join(f"{c} INTEGER" for c in _v4_rollup_columns())
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


#: Per-process utilization (0.1 %) and attribution (``strings`` ids) that schema v8 appended to process_samples.
PROCESS_V8_COLUMNS: Final[tuple[str, ...]] = ("sm_util_pct", "mem_util_pct", "enc_util_pct", "dec_util_pct",
                                             "command_id", "container_id")


def _v8(conn: sqlite3.Connection) -> None:
    # Per-process utilization and attribution (issue 16): columns on process_samples; older rows keep
    # NULL (n/a: nobody asked then). The day blocks hold copies without them: dropped, as in _v6.
    _add_columns(conn, ("process_samples",), PROCESS_V8_COLUMNS)
    _run(conn, _DROP_DAY_BLOCKS)


def _v9(conn: sqlite3.Connection) -> None:
    # Effective load (issue 16): appended to the raw and rollup tables; older rows keep NULL
    # (nobody estimated then). The day blocks hold copies without the column: dropped, as in _v6.
    _add_columns(conn, ("gpu_samples", "gpu_minute", "gpu_hour"), _V9_GPU_METRICS)
    _run(conn, _DROP_DAY_BLOCKS)


#: Schema v10 (issue 27): the rarely-changing GPU columns of a sample live in ``gpu_packs``, one row per
#: distinct combination, and the sample row holds its id (``pack``). The seconds under each clock-event
#: cause (ms, mostly 0 or the whole interval) share one row column, ``counters``: counter i in bits
#: 16i..16i+14, 0 when none counted anything; a value that does not fit (over 32.767 s, negative) makes it
#: -1, and the four are in ``gpu_counters`` instead. The pack's ``counted`` has bit i set where counter i
#: was read at all (unset: missing, not 0). For the free VRAM the pack holds ``vram_rest`` = free + used
#: (0.1 MiB), which stays put while the used part moves. ``desktop/history/packing.py`` reads and writes it.
PACK_COLUMNS: Final[tuple[str, ...]] = ("vram_rest", "mem_clock_mhz", "clock_event_reasons", "pcie_gen",
                                        "pcie_width", "pstate", "counted")
#: The metrics the packs stand for (``vram_rest`` gives ``vram_free_mib``), in registry order.
PACKED_METRICS: Final[tuple[str, ...]] = ("vram_free_mib", "mem_clock_mhz", "clock_event_reasons", "pcie_gen",
                                          "pcie_width", "pstate")
#: The metrics a gpu_samples row holds in columns of their own since v10, in registry order.
ROW_METRICS: Final[tuple[str, ...]] = tuple(m for m in GPU_METRIC_NAMES
                                            if m not in PACKED_METRICS and m not in COUNTER_METRICS)
#: Bits per counter in the ``counters`` column, and the largest value (ms) one holds there.
COUNTER_BITS: Final = 16
COUNTER_MAX: Final = 0x7FFF
# A counted cause past the fourth (a new row of advisor/clock_events.py's table) needs its schema step to widen this.
assert len(COUNTER_METRICS) * COUNTER_BITS <= 64, "the packed counters column holds four causes"


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
    # Issue 27: 23 columns made a sample 68 bytes on disk; packed, ~50. Every v9 row is copied into the
    # new layout (same values back: tests/unit/history/test_packed_layout.py).
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


#: Schema v11 (issue 32): the limits in force per GPU over time, one row per change (``desktop/history/limits.py``
#: writes and reads them): (column, GpuInfo field, scale). The SM clock reference is the GPU's reported max SM clock.
LIMIT_COLUMNS: Final[tuple[tuple[str, str, int], ...]] = (
    ("power_limit_w", "power_limit_enforced_w", 10),
    ("temp_slowdown_c", "temp_slowdown_c", 10),
    ("sm_clock_ref_mhz", "sm_clock_max_mhz", 1),
)
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
