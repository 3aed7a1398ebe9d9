"""`rigscope demo`, `import` and `export` end to end through the CLI entry point."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from desktop import cli
from desktop.history.store import HistoryStore
from desktop.paths import demo_db_path
from tests.unit.history.helpers import snapshot

DATA = Path(__file__).parents[1] / "history" / "data"


def test_demo_writes_a_labelled_database_and_refuses_real_history(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--days", "0.25", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["db"] == str(demo_db_path()) and report["demo"] is True
    assert report["rows"]["gpu_samples"] == 6 * 3600 and report["rows"]["host_samples"] > 0
    assert report["rows"]["gpu_minute"] > 0 and report["rows"]["process_samples"] >= 0
    with HistoryStore.open(demo_db_path(), readonly=True) as store:
        assert store.is_demo
    assert cli.main(["demo", "--days", "0.1"]) == 0  # a demo database is replaced
    assert "demo data" in capsys.readouterr().out
    real = tmp_path / "real.sqlite"
    with HistoryStore.open(real) as store:
        store.write_snapshots([snapshot(1_790_000_000.0)])
    assert cli.main(["demo", "--db", str(real)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert cli.main(["demo", "--gpus", "no-such-gpu"]) == 2
    assert "unknown simulated GPU profile" in capsys.readouterr().err


def test_import_reports_rows_and_skips_and_adds_nothing_twice(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    log = str(DATA / "nvsmi_units_two_gpus.csv")
    assert cli.main(["import", log, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "5 rows imported from 2 GPUs" in out and "2 lines skipped" in out
    assert "line 6:" in out and "line 8: bad value 'lots %'" in out
    assert cli.main(["import", log, "--db", str(db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["files"][0]
    assert (report["rows"], report["imported"], len(report["skipped"])) == (5, 0, 2)
    assert cli.main(["import", str(tmp_path / "missing.csv"), "--db", str(db)]) == 2
    assert "cannot read" in capsys.readouterr().out


def test_export_csv_and_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    t0 = 1_790_000_000.0
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(t0 + i) for i in range(5)])
    args = ["export", "--db", str(db), "--from", "2026-09-01T00:00:00+00:00", "--to", "2026-09-30T00:00:00+00:00"]
    assert cli.main([*args, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 5 and rows[0]["gpu_uuid"] == "GPU-full" and rows[0]["temperature_c"] == "78.3"
    assert rows[0]["time"].startswith("2026-09-21T") and rows[0]["fan_pct"] == "64"
    out = tmp_path / "out.jsonl"
    assert cli.main([*args, "--format", "jsonl", "-o", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["time_s"] for r in records] == [t0 + i for i in range(5)]
    assert records[0]["clock_event_reasons"] == 0x44 and "wrote 5 samples" in capsys.readouterr().err
    assert cli.main([*args[:3], "--from", "yesterday"]) == 2
    assert "cannot read the time" in capsys.readouterr().err
    assert cli.main(["export", "--db", str(tmp_path / "none.sqlite")]) == 2
    capsys.readouterr()
    assert cli.main(["export", "--db", str(db), "--from", "-1h"]) == 0  # the samples are from 2026-09
    assert "no samples between" in capsys.readouterr().err


def test_export_prometheus_is_handed_to_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from desktop.cli import export, serve

    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(serve, "main", lambda args: seen.append(args) or 7)
    args = argparse.Namespace(prometheus=True, listen="127.0.0.1:0")
    assert export.main(args) == 7 and seen == [args]


def test_export_carries_the_power_limit_in_force_at_each_sample(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: a sample is read against the limit then in force; the export says it (the limit moved 80 -> 175 W)."""
    import dataclasses

    from tests.unit.history.helpers import FULL_INFO

    db = tmp_path / "h.sqlite"
    t0 = 1_790_000_000.0
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(t0 + i, info=dataclasses.replace(FULL_INFO, power_limit_enforced_w=80.0))
                               for i in range(2)])
        store.write_snapshots([snapshot(t0 + 2 + i, info=dataclasses.replace(FULL_INFO, power_limit_enforced_w=175.0))
                               for i in range(2)])
    args = ["export", "--db", str(db), "--from", "2026-09-01T00:00:00+00:00", "--to", "2026-09-30T00:00:00+00:00"]
    assert cli.main([*args, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["power_limit_w"] for r in rows] == ["80", "80", "175", "175"]
    out = tmp_path / "out.jsonl"
    assert cli.main([*args, "--format", "jsonl", "-o", str(out)]) == 0
    assert [json.loads(line)["power_limit_w"] for line in out.read_text().splitlines()] == [80, 80, 175, 175]
