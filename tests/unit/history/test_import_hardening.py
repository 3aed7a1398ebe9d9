"""Hostile and broken nvidia-smi logs, far times, read-only and full databases, and formula cells (issue 12)."""

from __future__ import annotations

import csv
import io
import os
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from desktop import cli
from desktop.history import store_open
from desktop.history.bulk import write_gpu_columns
from desktop.history.importer import import_result
from desktop.history.nvsmi_csv import MAX_LINE_BYTES, parse_nvsmi_csv
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuInfo
from tests.unit.history.helpers import snapshot

HOSTILE = Path(__file__).parents[2] / "fixtures" / "hostile"
DATA = Path(__file__).parent / "data"
#: "now" for every test here: the fixtures are from May 2024.
NOW_S = datetime(2024, 6, 1, tzinfo=UTC).timestamp()
HEADER = "timestamp, index, uuid, temperature.gpu, power.draw [W]"


def _local(y: int, mo: int, d: int, h: int, mi: int, *, s: float = 0.0) -> float:
    return time.mktime((y, mo, d, h, mi, 0, 0, 0, -1)) + s


def _import(capsys: pytest.CaptureFixture[str], db: Path, *files: Path | str,
            extra: tuple[str, ...] = ()) -> tuple[int, str, str]:
    rc = cli.main(["import", "--db", str(db), *extra, *map(str, files)], now_s=NOW_S)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


# --- item 7: far timestamps -----------------------------------------------------------------


def test_far_and_impossible_timestamps_are_rejected_with_their_line_numbers() -> None:
    result = parse_nvsmi_csv(HOSTILE / "nvsmi_far_timestamps.csv", now_s=NOW_S)
    skipped = dict(result.skipped)
    assert sorted(skipped) == [3, 4, 5, 6, 7, 9]
    assert "0000/01/01" in skipped[3] and "9999/12/31" in skipped[4] and "1989/12/31" in skipped[5]
    assert "outside" in skipped[4] and "outside" in skipped[9]
    assert "2024/02/30" in skipped[6] and "no such date" in skipped[6]  # not 1 March
    assert "no such date" in skipped[7]  # 2023 was no leap year
    times, columns = result.series["GPU-far"]
    assert times.tolist() == [_local(2024, 5, 14, 9, 0), _local(2024, 5, 14, 9, 0, s=1.0), _local(2024, 5, 16, 9, 0)]
    assert columns["temperature_c"].tolist() == [40, 41, 40]


def test_the_sane_span_ends_a_day_after_the_injected_now() -> None:
    now_s = _local(2024, 5, 15, 0, 0)
    result = parse_nvsmi_csv(HOSTILE / "nvsmi_far_timestamps.csv", now_s=now_s)
    assert 10 in dict(result.skipped)  # 2024/05/16 09:00 is more than a day after that "now"
    assert 10 not in dict(parse_nvsmi_csv(HOSTILE / "nvsmi_far_timestamps.csv", now_s=now_s + 86400).skipped)


def test_import_stores_no_far_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    rc, out, _ = _import(capsys, db, HOSTILE / "nvsmi_far_timestamps.csv")
    assert rc == 0 and "3 rows imported" in out and "line 3:" in out and "line 9:" in out
    with HistoryStore.open(db, readonly=True) as store:
        span = store.time_range()
    assert span is not None and _local(2024, 5, 14, 0, 0) < span[0] and span[1] < NOW_S


@pytest.mark.parametrize("bounds", [
    ("--from", "-1000000d"),
    ("--from", "-99999999999999999999d"),
    ("--from", "0001-01-01"),
    ("--from", "-1000000d", "--to", "-999999d"),  # nothing in range: the "no samples between" message
    ("--to", "9999-12-31T23:59:59"),
    ("--from", "2020-01-01", "--to", "9999-12-31T23:59:59+00:00"),
])
def test_export_never_crashes_on_far_times(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           bounds: tuple[str, ...]) -> None:
    db = tmp_path / "h.sqlite"
    t0 = 1_790_000_000.0
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(t0)])
        # a year-9999 sample stored before the importer rejected them must not break reading either
        far = GpuInfo(index=3, uuid="GPU-far", name="far")
        write_gpu_columns(store, far, [253_402_200_000.0], {"temperature_c": [50.0]})
    rc = cli.main(["export", "--db", str(db), *bounds], now_s=t0 + 60)
    captured = capsys.readouterr()
    assert rc in (0, 2), captured.err
    assert "Traceback" not in captured.err and "out of range" not in captured.err
    if rc == 2:
        assert captured.err.count("\n") == 1 and captured.err.startswith("rigscope export: ")


def test_export_far_range_still_finds_the_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    t0 = 1_790_000_000.0
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(t0), snapshot(t0 + 1)])
    assert cli.main(["export", "--db", str(db), "--from", "-1000000d"], now_s=t0 + 60) == 0
    assert len(list(csv.DictReader(io.StringIO(capsys.readouterr().out)))) == 2


# --- item 8: environment failures, speed, long lines, encodings -------------------------------


def _hook_store(monkeypatch: pytest.MonkeyPatch, after_open: Callable[[sqlite3.Connection], None]) -> None:
    """Let the test spoil the writer's connection the way the environment would (as root, chmod cannot)."""
    real = store_open.connect_rw

    def hooked(path: Path, verify: bool) -> sqlite3.Connection:
        conn = real(path, verify)
        after_open(conn)
        return conn

    monkeypatch.setattr(store_open, "connect_rw", hooked)


def _sample_count(db: Path) -> int:
    with HistoryStore.open(db, readonly=True) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return int(store.conn.execute("SELECT count(*) FROM gpu_samples").fetchone()[0])


def _full_disk(conn: sqlite3.Connection) -> None:
    # SQLite's own SQLITE_FULL: the file may not grow by a single page.
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def _read_only(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA query_only = ON")  # SQLITE_READONLY, "attempt to write a readonly database"


@pytest.mark.parametrize(("spoil", "words"), [(_full_disk, "full"), (_read_only, "read-only")])
def test_a_full_or_read_only_database_is_a_message_and_keeps_the_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        spoil: Callable[[sqlite3.Connection], None], words: str) -> None:
    db = tmp_path / "h.sqlite"
    assert _import(capsys, db, HOSTILE / "nvsmi_far_timestamps.csv")[0] == 0
    before = _sample_count(db)
    rows = [HEADER] + [f"2024/05/20 10:{i // 60:02d}:{i % 60:02d}, {i % 40}, GPU-{i % 40}, 50, 100 W"
                       for i in range(3000)]
    log = tmp_path / "big.csv"
    log.write_text("\n".join(rows) + "\n")
    with monkeypatch.context() as patch:
        _hook_store(patch, spoil)
        rc, out, err = _import(capsys, db, log)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("rigscope import: ") and words in err, err
    # Each GPU's rows are one transaction: some may be in, none half (75 rows per GPU in this log).
    kept = _sample_count(db) - before
    assert kept % 75 == 0 and kept < 3000
    rc, out, _ = _import(capsys, db, log)  # space freed: the same import adds the rest
    assert rc == 0 and f"{3000 - kept:,} rows imported" in out and _sample_count(db) == before + 3000


def test_a_folder_that_cannot_be_written_is_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> None:
        # what a read-only folder gives a non-root user when the database file is created
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(store_open, "_create_private", refuse)
    rc, _, err = _import(capsys, tmp_path / "ro" / "h.sqlite", HOSTILE / "nvsmi_far_timestamps.csv")
    assert rc == 2 and err.count("\n") == 1 and "Permission denied" in err and "h.sqlite" in err


def test_a_line_over_the_cap_is_skipped_with_its_number_without_reading_it_whole(tmp_path: Path) -> None:
    log = tmp_path / "long.csv"
    good = "2024/05/14 09:00:0{}, 0, GPU-x, 40, 60 W"
    with log.open("w") as handle:
        handle.write(f"{HEADER}\n{good.format(0)}\n")
        handle.write("2024/05/14 09:00:01, 0, GPU-x, " + "9" * (8 << 20) + "\n")  # 8 MiB on one line
        handle.write(f"{good.format(2)}\n")
    tracemalloc.start()
    try:
        result = parse_nvsmi_csv(log, now_s=NOW_S)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.rows == 2
    assert [line for line, _ in result.skipped] == [3]
    assert f"longer than {MAX_LINE_BYTES // 1024} KiB" in result.skipped[0][1]
    assert peak < 4 * MAX_LINE_BYTES + (1 << 20), peak  # the long line was never held whole


def test_an_endless_binary_stream_stops(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dev_zero = Path("/dev/zero")
    if not dev_zero.exists():
        pytest.skip("no /dev/zero on this system")
    result = parse_nvsmi_csv(dev_zero, now_s=NOW_S)
    assert result.rows == 0 and len(result.skipped) == 1 and "binary" in result.skipped[0][1]
    rc, out, _ = _import(capsys, tmp_path / "h.sqlite", dev_zero)
    # Not a log at all: exit 2 with the reason (issue 20: it had become exit 0, "0 rows imported").
    assert rc == 2 and "not an nvidia-smi log" in out and "binary" in out


@pytest.mark.parametrize("name", ["nvsmi_utf16le_powershell.csv", "nvsmi_cp1252_degrees.csv"])
def test_utf16_and_cp1252_logs_are_read(name: str) -> None:
    result = parse_nvsmi_csv(HOSTILE / name, now_s=NOW_S)
    assert result.skipped == [] and result.rows == 2
    ((key, (_, columns)),) = result.series.items()
    assert columns["temperature_c"].tolist() == [40, 41] and columns["power_w"].tolist() == [60, 61]
    assert result.info[key]["name"] == "NVIDIA RTX A4000"


def test_utf8_with_a_bom_and_utf16_big_endian(tmp_path: Path) -> None:
    text = f"{HEADER}\n2024/05/14 09:00:00, 0, GPU-bom, 40 °C, 60 W\n"
    for encoding, bom in (("utf-8", b"\xef\xbb\xbf"), ("utf-16-be", b"\xfe\xff")):
        log = tmp_path / f"{encoding}.csv"
        log.write_bytes(bom + text.encode(encoding))
        result = parse_nvsmi_csv(log, now_s=NOW_S)
        assert result.skipped == [] and result.rows == 1, encoding


# --- item 8: an import is linear in the number of GPUs -------------------------------------------


def test_importing_many_gpus_loads_the_stored_gpus_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [HEADER] + [f"2024/05/14 09:00:00, {i}, GPU-{i:04d}, 40, 60 W" for i in range(200)]
    result = parse_nvsmi_csv(rows, now_s=NOW_S)
    loads = 0
    real = HistoryStore._load_gpus

    def counting(self: HistoryStore) -> None:
        nonlocal loads
        loads += 1
        real(self)

    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        monkeypatch.setattr(HistoryStore, "_load_gpus", counting)
        assert import_result(store, result) == 200
        assert len(store.gpus()) == 200
    assert loads <= 3  # once per import (and the check above), not once per GPU


# --- item 9: formulas in the export CSV ---------------------------------------------------------


def test_export_csv_defuses_a_formula_gpu_name_and_keeps_numbers(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    assert _import(capsys, db, HOSTILE / "nvsmi_formula_gpu_name.csv")[0] == 0
    assert cli.main(["export", "--db", str(db), "--from", "2024-05-01", "--to", "2024-06-01"], now_s=NOW_S) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 2
    assert rows[0]["gpu_name"].startswith("'=HYPERLINK(")
    assert rows[0]["temperature_c"] == "40" and rows[0]["power_w"] == "60"


# --- item 10: index-only logs from two machines -------------------------------------------------


def test_index_only_logs_from_two_files_are_not_merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    rc, out, _ = _import(capsys, db, HOSTILE / "nvsmi_index_only_machine_a.csv",
                         HOSTILE / "nvsmi_index_only_machine_b.csv")
    assert rc == 0 and "no uuid" in out
    with HistoryStore.open(db, readonly=True) as store:
        gpus = store.gpus()
    assert sorted(g.name for g in gpus) == ["NVIDIA A10", "NVIDIA H800"]
    assert len({g.uuid for g in gpus}) == 2
    # the same file again adds nothing (the key is stable), and --machine groups logs of one machine
    rc, out, _ = _import(capsys, db, HOSTILE / "nvsmi_index_only_machine_a.csv")
    assert "0 rows imported" in out
    rc, out, _ = _import(capsys, db, HOSTILE / "nvsmi_index_only_machine_a.csv",
                         HOSTILE / "nvsmi_index_only_machine_b.csv", extra=("--machine", "rig1"))
    with HistoryStore.open(db, readonly=True) as store:
        assert len(store.gpus()) == 3  # rig1's GPU 0, A10 and H800 from before


def test_logs_with_a_uuid_are_keyed_on_it_whatever_the_index(tmp_path: Path) -> None:
    result = parse_nvsmi_csv(HOSTILE / "nvsmi_swapped_card_same_index.csv", now_s=NOW_S)
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        assert import_result(store, result) == 4
        gpus = store.gpus()
    assert [(g.index, g.uuid) for g in gpus] == [(0, "GPU-new-4090"), (0, "GPU-old-3090")]


# --- item 12: export's output -----------------------------------------------------------------


@pytest.mark.parametrize("stdout", ["closed", "/dev/full"])
def test_export_to_a_closed_or_full_stdout_exits_cleanly(tmp_path: Path, stdout: str) -> None:
    if stdout == "/dev/full" and not Path(stdout).exists():
        pytest.skip("no /dev/full on this system")
    db = tmp_path / "h.sqlite"
    t0 = 1_790_000_000.0
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(t0 + i) for i in range(3)])
    command = [sys.executable, "-m", "desktop", "export", "--db", str(db), "--from", "2026-09-01T00:00:00+00:00",
               "--to", "2026-09-30T00:00:00+00:00"]
    with open(os.devnull if stdout == "closed" else stdout, "w") as sink:
        done = subprocess.run(command, stdout=sink, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
                              preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None,
                              cwd=Path(__file__).parents[3])
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("rigscope export: "), done.stderr
    assert ("closed" if stdout == "closed" else "No space left") in done.stderr
