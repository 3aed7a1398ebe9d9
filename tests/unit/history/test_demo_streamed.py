"""`demo` writes a day at a time and keeps what the shipped retention keeps (issue 38).

A long demo used to hold every day in memory and every raw sample on disk (1.9 GB of memory for 42 days);
now each day is simulated, written, rolled up and trimmed as the recorder would have, so the file holds raw
samples for the raw days only and minute rollups for the whole span. Memory is measured by `make bench`
(tests/bench/test_bench_long_history.py), not here.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from desktop.config import RetentionSettings
from desktop.history.demo import _day_chunks, write_demo
from desktop.history.store import HistoryStore
from desktop.telemetry.simulated import parse_profile_list

NOW_S = 1_795_000_000.0  # 11:06:40 UTC: a span of days not aligned on midnight


def test_day_chunks_cut_on_the_sample_grid_just_before_each_midnight() -> None:
    start = NOW_S - 2.5 * 86400 + 0.25
    chunks = _day_chunks(start, NOW_S)
    assert chunks[0][0] == start and chunks[-1][1] == NOW_S and len(chunks) == 4  # three midnights crossed
    for (_, hi), (lo, _) in itertools.pairwise(chunks):
        assert hi == lo
        assert (hi - start) % 1.0 == 0.0  # on the 1 s grid the traces are sampled on
        midnight = (hi // 86400 + 1) * 86400
        assert 0 < midnight - hi <= 1.0  # the last sample before midnight: no minute split between chunks


def test_a_long_demo_keeps_raw_samples_for_the_raw_days_only(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    retention = RetentionSettings(raw_days=1, minute_days=365)
    write_demo(path, parse_profile_list("rtx4090-laptop"), days=2.5, seed=1, now_s=NOW_S, retention=retention)
    with HistoryStore.open(path, readonly=True) as store:
        gid = store.gpu_id(store.gpus()[0].uuid)
        raw_lo = store.conn.execute("SELECT min(ts) FROM gpu_samples WHERE gpu = ?", (gid,)).fetchone()[0] / 1000
        minute_lo = store.conn.execute("SELECT min(ts) FROM gpu_minute WHERE gpu = ?", (gid,)).fetchone()[0]
        minutes = store.conn.execute("SELECT count(*) FROM gpu_minute WHERE gpu = ?", (gid,)).fetchone()[0]
        host_lo = store.conn.execute("SELECT min(ts) FROM host_samples").fetchone()[0] / 1000
        proc_lo = store.conn.execute("SELECT min(ts) FROM process_samples").fetchone()[0] / 1000
    assert NOW_S - 86400 - 60 <= raw_lo <= NOW_S - 86400 + 60  # one raw day, cut at the minute rollups' mark
    assert host_lo >= NOW_S - 86400 - 60 and proc_lo >= NOW_S - 86400 - 60
    assert minute_lo <= NOW_S - 2.5 * 86400 + 60  # minutes from the first one
    assert minutes >= 2.5 * 1440 - 2  # every minute of the span, none lost at a day's cut
