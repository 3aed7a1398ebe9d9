"""The stress verdict and the advisor's regression rule measure a run against the same baseline run."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from advisor.frame import HistoryFrame, StressResult
from advisor.rules import run_rules
from desktop.stress.devices import GpuTarget
from desktop.stress.records import judge_run, load_earlier, save_run, to_stress_result
from desktop.stress.run_model import RunResult, StressConfig
from desktop.telemetry.model import GpuInfo
from tests.unit.advisor.test_baseline import DAY_S, T0, run

# The same crafted runs as the advisor's own baseline test.
earlier_run = run


def crafted_history() -> list[StressResult]:
    """Twelve usable runs on GPU A (the best of them too old to count), and better ones that must not count."""
    usable = [earlier_run(1, 40, 200.0), *(earlier_run(10 + i, 30 - i, 160.0 if i == 5 else 150.0) for i in range(11))]
    ignored = [earlier_run(2, 10, 300.0, aborted=True), earlier_run(3, 9, 300.0, errors=2),
               earlier_run(4, 8, 400.0, gpu_uuid="GPU-B", device="cuda:1"), earlier_run(5, 7, 500.0, dtype="fp16")]
    return usable + ignored


def current_run(sustained: float) -> RunResult:
    time_s = T0 + np.arange(120.0)
    config = StressConfig(workload="gemm", target=GpuTarget.cuda(0), dtype="bf16")
    return RunResult(status="completed", message="", config=config, started_s=T0, ended_s=T0 + 120, unit="TFLOP/s",
                     dtype="bf16", time_s=time_s, throughput=np.full(120, sustained), columns={},
                     gpu=GpuInfo(index=0, uuid="GPU-A", name="RTX"))


def test_verdict_and_advisor_pick_the_same_baseline() -> None:
    history = crafted_history()
    baseline = next(r for r in history if r.run_id == 15)  # the best of the last ten usable runs on GPU A
    result = current_run(144.0)  # 10 % below it

    verdict = judge_run(result, history)
    when = datetime.fromtimestamp(baseline.started_s, tz=UTC).astimezone()
    assert verdict.comparison.startswith(f"10 % below your baseline from {when.day} {when.strftime('%b')}")

    current = to_stress_result(result, verdict, run_id=99)
    frame = HistoryFrame(start_s=T0 - 50 * DAY_S, end_s=T0 + 600, gpus=(), stress_results=(*history, current))
    [rec] = [r for r in run_rules(frame) if r.rule_id == "stress_regression"]
    assert rec.time_ranges[0] == (baseline.started_s, baseline.ended_s)
    assert rec.evidence_value("Baseline gemm bf16 (sustained)") == baseline.sustained_throughput
    assert rec.evidence_value("Drop against the baseline") == pytest.approx(10.0)


def test_an_aborted_run_is_no_one_s_baseline_once_stored() -> None:
    result = dataclasses.replace(current_run(400.0), status="guard", message="guard at 95 C")
    stored = to_stress_result(result, judge_run(result))
    assert stored.aborted
    history = [earlier_run(1, 10, 150.0), stored]
    later = dataclasses.replace(current_run(140.0), started_s=T0 + DAY_S, ended_s=T0 + DAY_S + 120,
                                time_s=T0 + DAY_S + np.arange(120.0))
    assert judge_run(later, history).comparison.startswith("7 % below your baseline")  # 140 vs 150, not 400
    frame = HistoryFrame(start_s=T0 - 50 * DAY_S, end_s=T0 + 2 * DAY_S, gpus=(),
                         stress_results=(*history, to_stress_result(later, judge_run(later, history), run_id=3)))
    [rec] = [r for r in run_rules(frame) if r.rule_id == "stress_regression"]
    assert rec.evidence_value("Baseline gemm bf16 (sustained)") == 150.0


def test_the_history_remembers_which_runs_were_aborted(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    aborted = dataclasses.replace(current_run(400.0), status="cancelled", message="cancelled")
    save_run(db, aborted, judge_run(aborted))
    finished = dataclasses.replace(current_run(150.0), started_s=T0 + DAY_S)
    save_run(db, finished, judge_run(finished))
    assert [(r.sustained_throughput, r.aborted) for r in load_earlier(db, "GPU-A", "gemm")] == [(150.0, False),
                                                                                                (400.0, True)]
