"""Issue 34 item 4: units scaled to the stored ones or refused by line, negatives refused, a DST fold kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pytest

from desktop import cli
from desktop.history.nvsmi_csv import parse_nvsmi_csv
from desktop.history.store import HistoryStore

NOW_S = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
HEADER = "timestamp, uuid, power.draw, clocks.sm, utilization.gpu, memory.used, temperature.gpu\n"


def _import(db: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = cli.main(["import", "--db", str(db), str(log)], now_s=NOW_S)
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def _stored(db: Path, metric: str) -> np.ndarray:
    with HistoryStore.open(db, readonly=True) as store:
        (gpu,) = store.gpus()
        return store.query(gpu.uuid, [metric], 0, 2e9, resolution="raw").columns[metric]


def test_300000_mw_is_stored_as_300_w_and_other_units_are_scaled(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "units.csv"
    log.write_text(HEADER
                   + "2024/06/01 10:00:00.000, GPU-u, 300000 mW, 1.5 GHz, 40 %, 2 GiB, 60 C\n"
                   + "2024/06/01 10:00:01.000, GPU-u, 0.3 kW, 1500 MHz, 41 %, 2048 MiB, 61 C\n"
                   + "2024/06/01 10:00:02.000, GPU-u, 300 W, 1500000 kHz, 42 %, 2097152 KiB, 62 °C\n")
    db = tmp_path / "h.sqlite"
    rc, text = _import(db, log, capsys)
    assert rc == 0 and "3 rows imported" in text, text
    assert _stored(db, "power_w").tolist() == [300.0, 300.0, 300.0]
    assert _stored(db, "sm_clock_mhz").tolist() == [1500.0, 1500.0, 1500.0]
    assert _stored(db, "vram_used_mib").tolist() == [2048.0, 2048.0, 2048.0]


def test_a_units_header_is_scaled_too() -> None:
    result = parse_nvsmi_csv("timestamp, uuid, power.draw [mW], clocks.sm [GHz]\n"
                             "2024/06/01 10:00:00, GPU-h, 250000, 1.2\n", now_s=NOW_S)
    ((_, columns),) = result.series.values()
    assert columns["power_w"].tolist() == [250.0] and columns["sm_clock_mhz"].tolist() == [1200.0]


def test_a_wrong_unit_and_negative_readings_are_refused_with_their_line_numbers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "bad.csv"
    log.write_text(HEADER
                   + "2024/06/01 10:00:00.000, GPU-b, 100 W, 1500 MHz, 40 %, 2 GiB, 60 C\n"
                   + "2024/06/01 10:00:01.000, GPU-b, 100 MHz, 1500 MHz, 40 %, 2 GiB, 60 C\n"   # line 3
                   + "2024/06/01 10:00:02.000, GPU-b, -100 W, 1500 MHz, 40 %, 2 GiB, 60 C\n"    # line 4
                   + "2024/06/01 10:00:03.000, GPU-b, 100 W, -5 MHz, 40 %, 2 GiB, 60 C\n"       # line 5
                   + "2024/06/01 10:00:04.000, GPU-b, 100 W, 1500 MHz, -1 %, 2 GiB, 60 C\n"     # line 6
                   + "2024/06/01 10:00:05.000, GPU-b, 100 W, 1500 MHz, 40 W, 2 GiB, 60 C\n"     # line 7
                   + "2024/06/01 10:00:06.000, GPU-b, 101 W, 1500 MHz, 40 %, 2 GiB, -10 C\n")   # a cold room: kept
    db = tmp_path / "h.sqlite"
    rc, text = _import(db, log, capsys)
    assert rc == 0 and "2 rows imported" in text, text
    for line, why in ((3, "unit not one of power"), (4, "cannot be negative"), (5, "cannot be negative"),
                      (6, "cannot be negative"), (7, "unit not one of percent")):
        assert f"line {line}:" in text and why in text.split(f"line {line}:", 1)[1].splitlines()[0], text
    assert _stored(db, "power_w").tolist() == [100.0, 101.0]


@pytest.fixture
def berlin() -> Iterator[ZoneInfo]:
    """The process's local zone (nvidia-smi's timestamps are local time) set to Europe/Berlin."""
    try:
        zone = ZoneInfo("Europe/Berlin")
    except ZoneInfoNotFoundError:
        pytest.skip("no time zone database here")
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    try:
        if "CET" not in time.tzname:  # the C library found no zone file: it would be UTC
            pytest.skip("the C library has no Europe/Berlin zone here")
        yield zone
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


@pytest.mark.skipif(not hasattr(time, "tzset"), reason="time.tzset (POSIX)")
def test_a_berlin_fall_back_log_keeps_1080_of_1080_rows_in_order(
        tmp_path: Path, berlin: ZoneInfo, capsys: pytest.CaptureFixture[str]) -> None:
    # 3 real hours at 10 s from 01:00 CEST on 27 Oct 2024: the wall clock runs 02:00..02:59 twice.
    start = datetime(2024, 10, 26, 23, 0, tzinfo=UTC)
    instants = [start + timedelta(seconds=10 * i) for i in range(1080)]
    log = tmp_path / "berlin.csv"
    with log.open("w") as out:
        out.write("timestamp, uuid, power.draw [W]\n")
        for i, instant in enumerate(instants):
            out.write(f"{instant.astimezone(berlin):%Y/%m/%d %H:%M:%S}.000, GPU-berlin, {100 + i % 500} W\n")
    db = tmp_path / "h.sqlite"
    rc, text = _import(db, log, capsys)
    assert rc == 0 and "1,080 rows imported" in text, text
    with HistoryStore.open(db, readonly=True) as store:
        (gpu,) = store.gpus()
        stored = store.query(gpu.uuid, ["power_w"], 0, 2e9, resolution="raw")
    assert stored.time_s.tolist() == [t.timestamp() for t in instants]
    assert stored.columns["power_w"].tolist() == [float(100 + i % 500) for i in range(1080)]


@pytest.mark.skipif(not hasattr(time, "tzset"), reason="time.tzset (POSIX)")
def test_a_log_of_only_the_repeated_hour_says_it_is_ambiguous(berlin: ZoneInfo) -> None:
    result = parse_nvsmi_csv("timestamp, uuid, power.draw [W]\n"
                             "2024/10/27 02:10:00, GPU-a, 100\n2024/10/27 02:10:10, GPU-a, 101\n", now_s=NOW_S)
    assert result.rows == 2 and len(result.series["GPU-a"][0]) == 2
    assert any("2024/10/27 02:00" in note and "twice" in note for note in result.notes), result.notes



@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_nobody_writes_to_is_one_line_not_a_hang(tmp_path: Path) -> None:
    """Issue 34 item 5: ``open()`` of a FIFO waits for a writer; import must say 'nothing' and exit 2."""
    fifo = tmp_path / "log.csv"
    os.mkfifo(fifo)
    repo = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        done = subprocess.run([sys.executable, "-m", "desktop", "import", "--db", str(tmp_path / "h.sqlite"),
                               str(fifo)], capture_output=True, text=True, env=env, check=False, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("import blocked on a FIFO")
    assert done.returncode == 2 and "not an nvidia-smi log, nothing imported" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="/dev/fd")
def test_a_log_through_a_pipe_is_still_read() -> None:
    """``rigscope import <(nvidia-smi ...)`` hands over /dev/fd/N, a pipe: it streams as before."""
    text = HEADER + "2024/06/01 10:00:00.000, GPU-p, 100 W, 1500 MHz, 40 %, 2 GiB, 60 C\n"
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, text.encode())
        os.close(write_end)
        result = parse_nvsmi_csv(f"/dev/fd/{read_end}", now_s=NOW_S)
    finally:
        os.close(read_end)
    assert result.rows == 1
