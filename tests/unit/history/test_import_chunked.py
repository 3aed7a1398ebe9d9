"""`import` writes a log a chunk at a time (issue 38): what is stored does not depend on where the chunks fall.

A log used to be held whole before it was written (about 125 bytes a row: a year at 1 Hz would not fit a
24 GB machine). Now every ``CHUNK_ROWS`` rows go to the database; rows out of order, a timestamp repeated
across a chunk boundary, two GPUs interleaved and several headers must come out exactly as a whole read
stores them. Memory for 100,000 and 800,000 rows is measured by the long-history bench.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from desktop.history.importer import import_result
from desktop.history.nvsmi_csv import parse_nvsmi_csv
from desktop.history.store import HistoryStore

NOW_S = 1_760_000_000.0
HEADER = "timestamp, uuid, index, name, power.draw [W], utilization.gpu [%], clocks.sm [MHz]\n"


def _log() -> str:
    lines = [HEADER]
    for i in range(300):
        second = i if i % 37 else max(0, i - 5)  # every 37th row goes back 5 s: out of order, some repeated
        for gpu in (0, 1):
            lines.append(f"2025/06/10 10:{second // 60:02d}:{second % 60:02d}.000, GPU-{gpu}, {gpu}, "
                         f"NVIDIA H100, {100 + i + gpu} W, {i % 100} %, {1000 + i} MHz\n")
        if i == 150:
            lines.append(HEADER)  # a second header in the middle, as a restarted logger writes
    return "".join(lines)


def _stored(db: Path) -> dict[str, tuple[list[float], dict[str, list[float]]]]:
    out = {}
    with HistoryStore.open(db, readonly=True) as store:
        for gpu in store.gpus():
            got = store.query(gpu.uuid, ["power_w", "utilization_gpu_pct", "sm_clock_mhz"], 0, 2e9,
                              resolution="raw")
            out[gpu.uuid] = (got.time_s.tolist(), {k: np.asarray(v).tolist() for k, v in got.columns.items()})
    return out


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 599, 10_000])
def test_a_log_written_in_chunks_is_stored_as_a_whole_read_stores_it(tmp_path: Path, chunk_rows: int) -> None:
    text = _log()
    whole, chunked = tmp_path / "whole.sqlite", tmp_path / "chunked.sqlite"
    with HistoryStore.open(whole) as store:
        result = parse_nvsmi_csv(text, now_s=NOW_S)
        whole_rows = import_result(store, result)
    with HistoryStore.open(chunked) as store:
        chunks: list[int] = []
        result = parse_nvsmi_csv(text, now_s=NOW_S, chunk_rows=chunk_rows,
                                 sink=lambda part: chunks.append(import_result(store, part)))
    assert result.series == {} and result.gpu_keys() == ["GPU-0", "GPU-1"]
    assert result.imported == sum(chunks) == whole_rows == 2 * 300 - 2 * 8  # 8 repeated times per GPU
    assert len(chunks) >= 600 // chunk_rows  # handed over as it was read, not at the end
    assert _stored(chunked) == _stored(whole)
