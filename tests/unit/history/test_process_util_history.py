"""Per-process utilization and attribution in the history (schema v8): written by every writer, read back.

Real SQLite files; None (n/a) stays NULL and comes back None, 0 % stays 0.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from desktop.history import blocks, bulk
from desktop.history.demo import write_demo
from desktop.history.query import process_history
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuProcess
from desktop.telemetry.simulated import parse_profile_list
from tests.unit.history.helpers import FULL_INFO, snapshot

T0 = 1_790_000_000.0
BUSY = GpuProcess(pid=4242, gpu_index=0, name="python", user="ana", vram_mib=9000.5, sm_util_pct=87.0,
                  mem_util_pct=41.5, enc_util_pct=0.0, dec_util_pct=3.0, command="python train.py --cfg a.yaml",
                  container="docker:trainer (3f2a9c1b4e5d)")
NA = GpuProcess(pid=77, gpu_index=0, name="game.exe")  # a GPU without per-process utilization


def test_live_snapshots_store_utilization_and_attribution(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0, processes=(BUSY, NA)),
                               snapshot(T0 + 5, processes=(replace(BUSY, sm_util_pct=12.0), NA))])
        rows = process_history(store, T0, T0 + 10)
    assert [(t, p.pid, p.sm_util_pct) for t, p in rows] == [(T0, 77, None), (T0, 4242, 87.0),
                                                           (T0 + 5, 77, None), (T0 + 5, 4242, 12.0)]
    assert rows[1][1] == BUSY
    assert rows[0][1] == NA  # n/a stays n/a: never 0


def test_bulk_writes_them_too_and_the_day_blocks_carry_them(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0)])  # the GPU
        bulk.write_process_samples(store, [(T0 + i * 5.0, FULL_INFO.uuid, replace(BUSY, sm_util_pct=float(i)))
                                           for i in range(3)])
        assert [p.sm_util_pct for _, p in process_history(store, T0, T0 + 60, pid=4242)] == [0.0, 1.0, 2.0]
        assert process_history(store, T0, T0 + 60, pid=4242)[0][1].command == BUSY.command
        day_end = (T0 // blocks.DAY_S + 1) * blocks.DAY_S
        blocks.build(store, day_end + 1)
        arr = blocks.fetch(store, "process_samples", ["ts", "pid", "sm_util_pct", "dec_util_pct", "command_id"],
                           round(T0 * 1000), round((T0 + 60) * 1000))
    assert arr[:, 2].tolist() == [0.0, 10.0, 20.0]  # 0.1 % units
    assert arr[:, 3].tolist() == [30.0, 30.0, 30.0]


def test_demo_history_gives_processes_their_share_of_the_load(tmp_path: Path) -> None:
    now = 1_795_000_020.0
    path = tmp_path / "demo.sqlite"
    write_demo(path, parse_profile_list("rtx4090-laptop"), days=0.05, seed=3, now_s=now)
    with HistoryStore.open(path, readonly=True) as store:
        rows = process_history(store, now - 86400, now)
    assert rows
    assert all(p.sm_util_pct is not None and 0.0 <= p.sm_util_pct <= 100.0 for _, p in rows)
    assert any(p.sm_util_pct for _, p in rows)
