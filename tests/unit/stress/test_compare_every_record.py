"""`rigscope compare` reads every JSON Rigscope writes about one run: the portable record, the Stress page's export
from before it wrote that record, and `rigscope jobs show ID --json`; a newer record says which version it is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from desktop import cli
from desktop.stress.devices import GpuTarget
from desktop.stress.portable import read_record, record_from_job
from desktop.stress.records import judge_run
from desktop.stress.report import run_json
from desktop.stress.run_model import RunResult, StressConfig
from desktop.telemetry.model import GpuInfo
from tests.unit.cli.jobs_history import END, write_job_history

T0 = 1_795_000_000.0


def _result() -> RunResult:
    time_s = T0 + np.arange(120.0)
    return RunResult(status="completed", message="finished",
                     config=StressConfig(workload="gemm", target=GpuTarget.cuda(0)),
                     started_s=T0, ended_s=T0 + 120.0, unit="TFLOP/s", dtype="bf16", time_s=time_s,
                     throughput=np.full(120, 60.0),
                     columns={"power_w": np.full(120, 149.0), "sm_clock_mhz": np.full(120, 1900.0),
                              "temperature_c": np.full(120, 70.0), "clock_event_reasons": np.full(120, 4.0)},
                     gpu=GpuInfo(index=0, uuid="GPU-A", name="RTX 4090 Laptop", power_limit_enforced_w=150.0))


def test_the_stress_pages_old_export_is_read_as_a_record(tmp_path: Path) -> None:
    result = _result()
    verdict = judge_run(result)
    old = tmp_path / "old-export.json"
    old.write_text(run_json(result, verdict, 7))  # what "Export JSON…" wrote before it wrote the record
    record = read_record(old)
    assert record.kind == "stress" and record.workload == "gemm" and record.unit == "TFLOP/s"
    assert record.throughput == pytest.approx(verdict.sustained) and record.throttled == verdict.throttled
    assert record.power_w.p50 == 149.0 and record.energy_j == pytest.approx(149.0 * 119.0)
    assert record.verdict_sentence == verdict.sentence and record.duration_s == 120.0


def test_jobs_show_json_is_read_with_the_figures_of_the_run_record(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)
    capsys.readouterr()
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db), "--json"], now_s=END + 60) == 0
    shown = tmp_path / "job-show.json"
    shown.write_text(capsys.readouterr().out)
    record = read_record(shown)
    data = json.loads(shown.read_text())
    from desktop.jobs.model import JobRecord

    job = JobRecord(job_id=job_id, name=data["name"], argv=tuple(data["argv"]), started_s=data["started_s"],
                    ended_s=data["ended_s"], exit_code=data["exit_code"], gpu_indices=tuple(data["gpu_indices"]),
                    throughput_unit=data["throughput_unit"])
    written = record_from_job(job, data["card"])  # what `rigscope run -o` writes from the same card
    for name in ("kind", "workload", "duration_s", "unit", "throughput", "energy_j", "verdict", "verdict_sentence",
                 "throttled", "device"):
        assert getattr(record, name) == getattr(written, name), name
    assert record.power_w.mean == written.power_w.mean and record.energy_j == pytest.approx(24000.0)
    assert cli.main(["compare", str(shown), str(shown)]) == 0


def test_a_record_of_a_newer_version_says_which_version_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": "rigscope-run", "version": 9, "kind": "stress"}))
    assert cli.main(["compare", str(newer), str(newer)]) != 0
    assert "record version 9; this one reads up to 1" in capsys.readouterr().err
