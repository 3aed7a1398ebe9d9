"""The stress baseline: the best of the last ten usable runs of the same workload, dtype and GPU."""

from __future__ import annotations

import dataclasses

from advisor.baseline import BASELINE_RUNS, SUSTAINED_S, pick_baseline, usable, usable_as_baseline
from advisor.frame import StressResult

T0 = 1_793_620_800.0  # 2026-11-02 12:00 UTC
DAY_S = 86400.0


def run(run_id: int, days_ago: float, sustained: float, **changes: object) -> StressResult:
    start = T0 - days_ago * DAY_S
    result = StressResult(run_id=run_id, started_s=start, ended_s=start + 600, gpu_uuid="GPU-A", gpu_name="RTX",
                          workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=sustained,
                          sustained_throughput=sustained, throttled=False, errors=0, driver_version="560.35",
                          summary="", device="cuda:0")
    return dataclasses.replace(result, **changes)


def test_the_best_of_the_last_ten_usable_runs() -> None:
    oldest_best = run(1, 40, 200.0)  # best of all, but eleven newer usable runs push it out
    recent = [run(10 + i, 30 - i, 160.0 if i == 5 else 150.0) for i in range(11)]
    assert len(recent) > BASELINE_RUNS
    chosen = pick_baseline([oldest_best, *recent], "gemm", "bf16", "GPU-A")
    assert chosen is not None and chosen.run_id == 15 and chosen.sustained_throughput == 160.0
    # with a window of twelve the old best is back in
    wide = pick_baseline([oldest_best, *recent], "gemm", "bf16", "GPU-A", last=12)
    assert wide is not None and wide.run_id == 1


def test_other_devices_kinds_aborted_and_failed_runs_never_count() -> None:
    base = run(1, 20, 150.0)
    others = [run(2, 10, 300.0, aborted=True), run(3, 9, 300.0, errors=2), run(4, 8, 400.0, gpu_uuid="GPU-B"),
              run(5, 7, 500.0, dtype="fp16"), run(6, 6, 600.0, workload="bandwidth"), run(7, 5, 0.0),
              run(8, 4, 700.0, unit="steps/s"), run(9, 3, float("nan"))]
    assert [usable(r) for r in others] == [False, False, True, True, True, False, True, False]
    assert pick_baseline([base, *others], "gemm", "bf16", "GPU-A", unit="TFLOP/s") == base
    assert pick_baseline([base, *others], "gemm", "bf16", "GPU-B") == others[2]
    assert pick_baseline(others[:2], "gemm", "bf16", "GPU-A") is None


def test_only_runs_before_the_one_judged() -> None:
    earlier, later = run(1, 10, 150.0), run(2, 1, 170.0)
    assert pick_baseline([earlier, later], "gemm", "bf16", "GPU-A", before_s=later.started_s) == earlier
    assert pick_baseline([earlier, later], "gemm", "bf16", "GPU-A", before_s=earlier.started_s) is None
    assert pick_baseline([earlier, later], "gemm", "bf16", "GPU-A") == later


def test_ties_go_to_the_newest_run() -> None:
    older, newer = run(1, 10, 150.0), run(2, 5, 150.0)
    assert pick_baseline([older, newer], "gemm", "bf16", "GPU-A") == newer
    assert pick_baseline([newer, older], "gemm", "bf16", "GPU-A") == newer


def test_short_and_inconclusive_runs_are_never_the_baseline() -> None:
    sustained = run(1, 10, 150.0)
    quick = run(2, 5, 200.0, ended_s=T0 - 5 * DAY_S + 120)  # a Quick 2 min run: faster, not heat-soaked
    heating = run(3, 4, 210.0, summary="Inconclusive: not at thermal steady state (still rising 3.0 °C/min)")
    assert usable(quick) and not usable_as_baseline(quick) and not usable_as_baseline(heating)
    assert usable_as_baseline(sustained) and sustained.ended_s - sustained.started_s == SUSTAINED_S
    assert pick_baseline([sustained, quick, heating], "gemm", "bf16", "GPU-A") == sustained
    assert pick_baseline([quick, heating], "gemm", "bf16", "GPU-A") is None
