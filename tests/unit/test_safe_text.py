"""Names from outside, printed or written to CSV: no escape sequences, no bidi tricks, no formulas (issue 12)."""

from __future__ import annotations

import csv
import dataclasses
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.safetext import neutralise_bidi, printable
from desktop import cli, config
from desktop.advice import compute_advice
from desktop.cli import sample
from desktop.cli.advise import format_advice
from desktop.cli.doctor import render as render_doctor
from desktop.csvsafe import CsvWriter, safe_cell
from desktop.telemetry.doctor import collect
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from tests.unit.advisor.demo_frame import TWO_GPUS, demo_week_frame
from tests.unit.history.helpers import FULL_PROCESS, snapshot

HOSTILE_DIR = Path(__file__).parents[1] / "fixtures" / "hostile"
#: An OSC sequence that retitles the terminal, a BEL, and a right-to-left override.
NASTY = "bench\x1b]0;pwned\x07\u202eyp.py"
RAW = ("\x1b", "\x07", "\u202e")


def _clean(text: str) -> bool:
    return not any(ch in text for ch in RAW)


def test_printable_escapes_controls_and_bidi_but_keeps_text() -> None:
    assert printable("train.py — 87 °C") == "train.py — 87 °C"
    assert printable(NASTY) == "bench\\x1b]0;pwned\\x07\\u202eyp.py"
    assert printable("a\nb\tc\x9bd") == "a\\x0ab\\x09c\\x9bd"
    assert printable("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"
    assert neutralise_bidi("x\u2066y\u202az") == "x\\u2066y\\u202az"


@pytest.mark.parametrize(("value", "cell"), [
    ("=1+2", "'=1+2"), ("+1+2", "'+1+2"), ("-1+2", "'-1+2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\t=1", "'\t=1"), ("\r=1", "'\r=1"), ("-5", "-5"), ("+3.5e2", "+3.5e2"), ("plain", "plain"),
    (-5, -5), (2.5, 2.5), (None, ""), (float("nan"), ""), ("a\u202eb", "a\\u202eb"),
])
def test_safe_cell(value: object, cell: object) -> None:
    assert safe_cell(value) == cell


def test_csv_writer_round_trips_through_a_reader() -> None:
    out = io.StringIO()
    writer = CsvWriter(out)
    writer.writerow(["=HYPERLINK(\"x\")", -3, 1.5, None, "a,b"])
    writer.writerow(["x\rgpu,0,forged", "line\nbreak", 'say "hi"'])  # a CR must not start a row of its own
    rows = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert rows == [["'=HYPERLINK(\"x\")", "-3", "1.5", "", "a,b"], ["x\rgpu,0,forged", "line\nbreak", 'say "hi"']]
    assert out.getvalue().count("\n") == 3  # two rows, and the LF inside the quoted cell


def test_advise_prints_no_escape_sequence() -> None:
    frame = demo_week_frame(TWO_GPUS)
    procs = frame.processes
    assert procs is not None
    names = tuple(NASTY if n == "bench.py" else n for n in procs.names)
    first = frame.gpus[0]
    gpus = (dataclasses.replace(first, meta=dataclasses.replace(first.meta, name=NASTY)), *frame.gpus[1:])
    frame = dataclasses.replace(frame, gpus=gpus, processes=dataclasses.replace(procs, names=names))
    text = format_advice(compute_advice(frame, config.Settings()))
    assert "bench\\x1b]0;pwned" in text and _clean(text)


def test_sample_and_doctor_print_no_escape_sequence() -> None:
    proc = dataclasses.replace(FULL_PROCESS, name=NASTY, user=NASTY)
    snap = snapshot(1_790_000_000.0, processes=(proc,))
    reading = snap.gpus[0]
    snap = dataclasses.replace(snap, gpus=(dataclasses.replace(
        reading, info=dataclasses.replace(reading.info, name=NASTY)),))
    text = sample.render(snap)
    assert "pwned" in text and _clean(text)
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    try:
        report = collect(backend)
    finally:
        backend.close()
    report["gpus"][0]["name"] = NASTY
    text = render_doctor(report)
    assert "pwned" in text and _clean(text)


def test_import_report_prints_no_escape_sequence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log\x1b]0;pwned\x07.csv"
    log.write_bytes((HOSTILE_DIR / "nvsmi_escape_sequences_in_names.csv").read_bytes())
    now_s = datetime(2024, 6, 1, tzinfo=UTC).timestamp()
    assert cli.main(["import", "--db", str(tmp_path / "h.sqlite"), str(log)], now_s=now_s) == 0
    out = capsys.readouterr().out
    assert "line 3: " in out and "pwned" in out and _clean(out)
