"""Benchmark: `rigscope import` of a log with 2,000 distinct GPUs x 1 row against 1 GPU x 2,000 rows.

Issue 12 found the first 142 times slower than the second (92 s): every GPU of the store was
reloaded and JSON-decoded once per GPU of the log. Linear, the two take about the same time.
Each figure is the median of three imports into a fresh database, end to end through the CLI
(parse, write, rollups), and of the GPU matching and writes alone (``import_result``). The
rollups that follow cost about a millisecond per GPU: linear, and most of what remains.
Nothing asserts on them (run: `make bench`).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from desktop import cli
from desktop.history.importer import import_result
from desktop.history.nvsmi_csv import parse_nvsmi_csv
from desktop.history.store import HistoryStore

NOW_S = 1_717_200_000.0  # 2024-06-01: the logs below are from 2024-05-14
HEADER = "timestamp, index, name, uuid, temperature.gpu, power.draw [W], utilization.gpu [%]"


def _log(path: Path, gpus: int, rows: int) -> Path:
    lines = [HEADER]
    for row in range(rows):
        stamp = f"2024/05/14 {9 + row // 3600:02d}:{row // 60 % 60:02d}:{row % 60:02d}.000"
        lines.extend(f"{stamp}, {g}, NVIDIA A100-SXM4-80GB, GPU-{g:08d}, 60, 300.00 W, 90 %" for g in range(gpus))
    path.write_text("\n".join(lines) + "\n")
    return path


def _median_import_s(log: Path, tmp: Path, repeat: int = 3) -> float:
    times = []
    for n in range(repeat):
        db = tmp / f"{log.stem}-{n}.sqlite"
        start = time.perf_counter()
        assert cli.main(["import", "--db", str(db), "--json", str(log)], now_s=NOW_S) == 0
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _median_write_s(log: Path, tmp: Path, repeat: int = 3) -> float:
    """Only the part that was quadratic: matching the log's GPUs and writing their rows (no parse, no rollups)."""
    result = parse_nvsmi_csv(log, now_s=NOW_S)
    times = []
    for n in range(repeat):
        with HistoryStore.open(tmp / f"{log.stem}-write-{n}.sqlite") as store:
            start = time.perf_counter()
            import_result(store, result)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_bench_import_many_gpus_vs_many_rows(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    wide_log, long_log = _log(tmp_path / "wide.csv", 2000, 1), _log(tmp_path / "long.csv", 1, 2000)
    wide = _median_import_s(wide_log, tmp_path)
    long = _median_import_s(long_log, tmp_path)
    wide_write = _median_write_s(wide_log, tmp_path)
    long_write = _median_write_s(long_log, tmp_path)
    capsys.readouterr()  # the imports' JSON reports
    with capsys.disabled():
        print()
        print("| log | rows | `rigscope import` (median) | of which GPU matching + writes |")
        print("| --- | --- | --- | --- |")
        print(f"| 2,000 GPUs x 1 row | 2,000 | {wide:.2f} s ({wide / long:.0f}x) | {wide_write:.2f} s |")
        print(f"| 1 GPU x 2,000 rows | 2,000 | {long:.2f} s | {long_write:.3f} s |")
