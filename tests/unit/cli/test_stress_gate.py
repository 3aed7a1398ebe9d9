"""`rigscope stress -o FILE` writes a portable record; `--baseline FILE --max-drop PCT` is the CI gate (exit 5)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.portable import PortableRecord
from advisor.portable_read import parse_record
from desktop.cli import main
from desktop.cli.stress_gate import EXIT_BELOW_BASELINE, Gate, judge_gate
from desktop.stress.portable import write_record


def _record(path: Path) -> PortableRecord:
    return parse_record(path.read_text(encoding="utf-8"))


def test_a_cpu_run_writes_its_record_and_a_faster_baseline_fails_the_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, first = str(tmp_path / "h.sqlite"), tmp_path / "first.json"
    # 6 s runs: on a loaded two-core CI machine a 3 s run once measured no step at all (exit 7, no throughput to gate).
    main(["stress", "--device", "cpu", "--workload", "infer", "--minutes", "0.1", "-o", str(first),
          "--price-per-hour", "0.5", "--db", db])
    assert f"Record written to {first}" in capsys.readouterr().out
    record = _record(first)
    assert record.kind == "stress" and record.workload == "infer" and record.device == "cpu"
    assert record.unit == "steps/s" and record.throughput is not None and record.throughput > 0
    assert record.latency is not None and record.latency.p50_ms is not None  # inference: p50/p95/p99
    assert record.price_per_hour == 0.5 and record.currency
    assert record.environment.torch and record.environment.rigscope
    # A baseline ten times faster than this machine: far beyond any run-to-run noise.
    baseline = tmp_path / "baseline.json"
    assert record.throughput is not None
    write_record(baseline, replace(record, throughput=record.throughput * 10))
    code = main(["stress", "--device", "cpu", "--workload", "infer", "--minutes", "0.1", "--db", db,
                 "--baseline", str(baseline), "--max-drop", "10"])
    out, err = capsys.readouterr()
    assert code == EXIT_BELOW_BASELINE == 5
    said = re.search(r"throughput ([\d.,]+) steps/s is ([\d.]+) % below the baseline's ([\d.,]+) steps/s "
                     r"\(allowed 10 %\)", err)
    assert said is not None, err
    current, drop, base = (float(g.replace(",", "")) for g in said.groups())
    assert base == pytest.approx(record.throughput * 10, rel=0.01)
    assert drop == pytest.approx((1 - current / base) * 100, abs=0.5) and drop > 10
    assert "Baseline gate FAILED" in out


def test_a_run_within_the_allowed_drop_passes_the_gate_and_says_so_in_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, first = str(tmp_path / "h.sqlite"), tmp_path / "sim.json"
    main(["stress", "--device", "sim", "--minutes", "0.03", "-o", str(first), "--db", db])
    capsys.readouterr()
    record = _record(first)
    assert record.unit == "TFLOP/s" and record.environment.simulated and record.environment.power_limit_w
    assert record.energy_j is not None and record.energy_j > 0 and not record.power_w.empty
    baseline = tmp_path / "baseline.json"
    assert record.throughput is not None
    write_record(baseline, replace(record, throughput=record.throughput * 1.02))  # 2 % faster: within 10 %
    code = main(["stress", "--device", "sim", "--minutes", "0.03", "--db", db, "--json",
                 "--baseline", str(baseline), "--max-drop", "10"])
    report = json.loads(capsys.readouterr().out)
    assert code == report["exit_code"] == 7  # too short to judge: the gate passed and does not hide that
    gate = report["gate"]
    assert gate["passed"] and gate["max_drop_pct"] == 10 and 0 < gate["drop_pct"] < 10
    assert gate["unit"] == "TFLOP/s" and "below the baseline's" in gate["sentence"]


def test_the_gate_exit_code_is_in_the_json_report_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, first = str(tmp_path / "h.sqlite"), tmp_path / "sim.json"
    main(["stress", "--device", "sim", "--minutes", "0.03", "-o", str(first), "--db", db])
    record = _record(first)
    assert record.throughput is not None
    baseline = tmp_path / "baseline.json"
    write_record(baseline, replace(record, throughput=record.throughput * 2))
    capsys.readouterr()
    code = main(["stress", "--device", "sim", "--minutes", "0.03", "--db", db, "--json", "--baseline", str(baseline)])
    report = json.loads(capsys.readouterr().out)
    assert code == report["exit_code"] == 5
    assert not report["gate"]["passed"] and report["gate"]["max_drop_pct"] == 5  # the default allowance


@pytest.mark.parametrize(("setup", "args", "message"), [
    (None, ["--baseline", "{tmp}/missing.json"], "no such file"),
    ("{", ["--baseline", "{tmp}/base.json"], "not valid JSON"),
    ('{"format": "other"}', ["--baseline", "{tmp}/base.json"], "not a Rigscope run record"),
    (None, ["--max-drop", "10"], "--max-drop needs --baseline"),
    ("record", ["--baseline", "{tmp}/base.json", "--max-drop", "150"], "percentage from 0"),
    ("record", ["--baseline", "{tmp}/base.json", "--workload", "bandwidth", "--device", "cpu"],
     "use --workload gemm"),
    (None, ["-o", "{tmp}/no/such/folder/run.json"], "does not exist"),
    (None, ["-o", "-"], "-o needs a file name"),
    (None, ["--price-per-hour", "-1"], "--price-per-hour must be"),
])
def test_a_mistake_in_the_options_is_exit_2_before_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str | None, args: list[str], message: str) -> None:
    base = tmp_path / "base.json"
    if setup == "record":
        write_record(base, PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=600.0,
                                          unit="TFLOP/s", throughput=70.0))
    elif setup is not None:
        base.write_text(setup, encoding="utf-8")
    db = tmp_path / "h.sqlite"
    argv = ["stress", "--device", "sim", "--minutes", "0.03", "--db", str(db),
            *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not db.exists()  # refused before the run: nothing ran, nothing was stored


def test_a_baseline_without_throughput_is_refused() -> None:
    gate = judge_gate(PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=1.0, unit="TFLOP/s"),
                      PortableRecord(kind="stress", workload="gemm", started_s=0.0, duration_s=1.0, unit="TFLOP/s",
                                     throughput=50.0), 10.0)
    assert gate.failed and "no sustained throughput" in gate.sentence


def test_the_gate_sentence_reads_as_the_issue_asks() -> None:
    gate = Gate(throughput=812.0, baseline=947.0, unit="it/s", max_drop_pct=10.0, drop_pct=(1 - 812 / 947) * 100)
    assert gate.failed
    assert gate.sentence == "throughput 812 it/s is 14.3 % below the baseline's 947 it/s (allowed 10 %)"


@pytest.mark.parametrize(("body", "field"), [
    (', "throughput": {"unit": "TFLOP/s", "sustained": ' + "9" * 400 + "}}", "throughput.sustained"),
    (', "throughput": {"unit": "TFLOP/s", "sustained": ' + "1" * 4301 + "}}", "throughput.sustained"),
    (', "throughput": {"unit": "TFLOP/s", "sustained": 5e-324}}', "throughput.sustained"),
    (', "throughput": {"sustained": 70, "unit": "TFLOP/s\\udcff"}}', "throughput.unit"),
])
def test_a_hostile_baseline_is_exit_2_naming_the_field_before_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, field: str) -> None:
    base = tmp_path / "base.json"
    base.write_text('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", '
                    '"started_s": 1' + body, encoding="utf-8")
    db = tmp_path / "h.sqlite"
    assert main(["stress", "--device", "sim", "--minutes", "0.03", "--db", str(db), "--json",
                 "--baseline", str(base)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and str(base) in lines[0] and f'"{field}"' in lines[0], captured.err
    assert not db.exists()


def test_a_baseline_without_a_unit_is_refused_before_the_run(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.json"
    write_record(base, PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=600.0, throughput=70.0))
    db = tmp_path / "h.sqlite"
    assert main(["stress", "--device", "sim", "--minutes", "0.03", "--db", str(db), "--baseline", str(base)]) == 2
    assert '"throughput.unit"' in capsys.readouterr().err
    assert not db.exists()  # refused before the run
