"""The steps that sqlite-utils now takes (plain tables, ``add_column``, ``create_index``) make the same
tables as the SQL they replaced: same columns, types, NOT NULL, defaults, keys and indexes; and a
step is still one transaction (a failed one leaves nothing behind)."""

from __future__ import annotations

import sqlite3

import pytest

from desktop.history import layout, schema

#: The SQL the converted tables and indexes were created with before (schema v1, v3, v5, v7).
BEFORE = """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE events (id INTEGER PRIMARY KEY, ts REAL NOT NULL, kind TEXT NOT NULL, gpu_uuid TEXT,
        detail TEXT NOT NULL DEFAULT '');
    CREATE INDEX events_ts ON events (ts);
    CREATE TABLE stress_runs (run_id INTEGER PRIMARY KEY, started_s REAL NOT NULL, ended_s REAL NOT NULL,
        gpu_uuid TEXT NOT NULL, gpu_name TEXT NOT NULL, workload TEXT NOT NULL, dtype TEXT NOT NULL,
        unit TEXT NOT NULL, peak_throughput REAL NOT NULL, sustained_throughput REAL NOT NULL,
        throttled INTEGER NOT NULL, errors INTEGER NOT NULL, driver_version TEXT, summary TEXT NOT NULL,
        device TEXT NOT NULL DEFAULT '', extra_json TEXT NOT NULL DEFAULT '');
    CREATE INDEX stress_runs_started ON stress_runs (started_s);
    CREATE TABLE day_blocks (day INTEGER NOT NULL, source TEXT NOT NULL, gpu INTEGER NOT NULL,
        rows INTEGER NOT NULL, columns TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (day, source, gpu));
    CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, name TEXT NOT NULL, argv_json TEXT NOT NULL,
        started_s REAL NOT NULL, ended_s REAL, exit_code INTEGER, pids_json TEXT NOT NULL DEFAULT '[]',
        gpu_uuids_json TEXT NOT NULL DEFAULT '[]', gpu_indices_json TEXT NOT NULL DEFAULT '[]',
        throughput_unit TEXT, guard_c REAL, paused_s REAL NOT NULL DEFAULT 0,
        source TEXT NOT NULL DEFAULT 'nvml', card_json TEXT, extra_json TEXT NOT NULL DEFAULT '');
    CREATE INDEX jobs_started ON jobs (started_s);
    CREATE TABLE job_events (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(job_id)
        ON DELETE CASCADE, ts REAL NOT NULL, kind TEXT NOT NULL, temperature_c REAL, gpu_index INTEGER);
    CREATE INDEX job_events_job ON job_events (job_id, ts);
"""
TABLES = ("meta", "events", "stress_runs", "day_blocks", "jobs")
INDEXES = {"events_ts": "events", "stress_runs_started": "stress_runs", "jobs_started": "jobs",
           "job_events_job": "job_events"}


def _shape(conn: sqlite3.Connection) -> dict[str, object]:
    out: dict[str, object] = {}
    for table in TABLES:
        # (name, declared type, not null, default, position in the primary key)
        out[table] = [tuple(r[1:6]) for r in conn.execute(f"PRAGMA table_xinfo({table})")]
        out[f"{table} without rowid"] = "WITHOUT ROWID" in (conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0] or "").upper()
    for index, table in INDEXES.items():
        out[index] = ([r[2] for r in conn.execute(f"PRAGMA index_info({index})")],
                      [r[1:3] for r in conn.execute(f"PRAGMA index_list({table})") if r[1] == index])
    return out


def test_the_tables_sqlite_utils_makes_are_the_ones_the_sql_made() -> None:
    before = sqlite3.connect(":memory:")
    before.executescript(BEFORE)
    now = sqlite3.connect(":memory:", isolation_level=None)
    schema.migrate(now)
    assert _shape(now) == _shape(before)


def test_add_column_appends_the_same_integer_columns() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    schema.migrate(conn, target=9)
    for table in ("gpu_minute", "gpu_hour"):
        columns = [(r[1], r[2]) for r in conn.execute(f"PRAGMA table_info({table})")]
        assert columns[-len(layout.COUNTER_METRICS) - 1:] == [(m, "INTEGER") for m in
                                                              (*layout.COUNTER_METRICS, "effective_load_pct")]
    process = [(r[1], r[2]) for r in conn.execute("PRAGMA table_info(process_samples)")]
    assert process[-len(layout.PROCESS_V8_COLUMNS):] == [(c, "INTEGER") for c in layout.PROCESS_V8_COLUMNS]


def test_a_step_that_fails_half_way_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlite-utils runs each statement inside the step's own transaction: nothing it does commits."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    schema.migrate(conn, target=6)

    def broken(conn: sqlite3.Connection) -> None:
        schema._utils(conn)["jobs_half"].create({"x": int}, pk="x")
        schema._utils(conn)["jobs_half"].create_index(["x"], index_name="jobs_half_x")
        raise RuntimeError("the step fails after sqlite-utils did its part")

    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS[:6], broken, *schema.MIGRATIONS[7:]))
    with pytest.raises(RuntimeError):
        schema.migrate(conn, target=7)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 6
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE 'jobs_half%'").fetchone()[0] == 0
