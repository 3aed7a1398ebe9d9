"""Columnar reads: fetch_columns and the frame's process rows equal what a plain SELECT returns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from desktop.history.codec import fetch_columns
from desktop.history.frames import _processes
from desktop.history.store import HistoryStore


def test_fetch_columns_equals_a_plain_select_with_null_as_nan() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, a INTEGER, b INTEGER)")
    rows = [(5, None, -3), (1, 2**40, None), (3, 0, 7), (9, -12, 2**52)]
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    got = fetch_columns(conn, ["k", "a", "b"], "t WHERE k >= ?", (2,), "k", not_null=("k",))
    expected = np.array([(3, 0, 7), (5, np.nan, -3), (9, -12, 2**52)], dtype=np.float64)
    np.testing.assert_array_equal(got, expected)  # ordered, NULL -> NaN, large and negative values exact
    empty = fetch_columns(conn, ["k", "a"], "t WHERE k > ?", (100,), "k")
    assert empty.shape == (0, 2)


def test_process_rows_keep_order_names_users_and_gpus(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        with store.transaction():
            ids = {text: store.string_id(text) for text in ("zeta", "alpha", "bob", "carol")}
            # (ts ms, gpu, pid, name, user, vram x10), inserted out of order; gpu 9 is unknown.
            raw = [(2000, 2, 7, "alpha", None, 50), (1000, 1, 9, "zeta", "bob", None),
                   (1000, 1, 3, "alpha", "carol", 10), (2000, 1, 9, "zeta", "carol", 20),
                   (3000, 9, 1, "alpha", "bob", 30)]
            store.conn.executemany(
                "INSERT INTO process_samples (ts, gpu, pid, name_id, user_id, vram_mib) VALUES (?, ?, ?, ?, ?, ?)",
                [(t, g, p, ids[n], ids[u] if u else None, v) for t, g, p, n, u, v in raw])
        procs = _processes(store, 0.0, 10.0, {1: 0, 2: 1}, {1: "GPU-a", 2: "GPU-b"})
        assert _processes(store, 10.0, 20.0, {1: 0}, {1: "GPU-a"}) is None
    assert procs is not None
    # Primary-key order (ts, gpu, pid): (1000,1,3) (1000,1,9) (2000,1,9) (2000,2,7) (3000,9,1).
    np.testing.assert_array_equal(procs.time_s, [1.0, 1.0, 2.0, 2.0, 3.0])
    np.testing.assert_array_equal(procs.pid, [3, 9, 9, 7, 1])
    np.testing.assert_array_equal(procs.gpu_index, [0, 0, 0, 1, -1])
    # The GPU by identity too: stored GPUs 1 and 2 carry their keys, the unknown GPU 9 none of them.
    assert procs.gpu_key_ix is not None
    keys = [procs.gpu_keys[i] if i >= 0 else None for i in procs.gpu_key_ix]
    assert keys[:4] == ["GPU-a", "GPU-a", "GPU-a", "GPU-b"] and keys[4] not in ("GPU-a", "GPU-b")
    np.testing.assert_array_equal(procs.vram_mib, [1.0, np.nan, 2.0, 5.0, 3.0])
    assert procs.names == ("alpha", "zeta")  # in order of first appearance
    assert procs.users == ("carol", "bob")  # the user of each name's first row
    np.testing.assert_array_equal(procs.name_id, [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(procs.duration_s, [1.0] * 5)  # the median gap between sample times
    assert procs.pid.dtype == np.int64 and procs.name_id.dtype == np.int64 and procs.gpu_index.dtype == np.int64
