"""A finished stress run as history sees it: judging it, comparing it with earlier runs, saving it.

Shared by the CLI and the GUI Stress page. Saving works while the recorder holds the
history's writer lock: a stress run is one short transaction on its own connection, which
SQLite's WAL mode serialises with the recorder's batched writes (the store's connection
waits up to its busy timeout rather than failing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from advisor.baseline import pick_baseline
from advisor.costs import GpuSpec, find_spec
from advisor.dense_peak import dense_peak, of_peak_clause
from advisor.frame import StressResult
from advisor.thresholds import Thresholds
from advisor.verdict import MIN_STRESS_LOAD_S, Verdict, judge
from advisor.verdict_text import compare_with_baseline, format_duration, shared_run_sentence
from desktop.errors import UserError
from desktop.history.dberrors import problem
from desktop.stress.cpu_noise import judge_cpu_run
from desktop.stress.devices import cpu_model_name
from desktop.stress.run_model import RunResult

log = logging.getLogger(__name__)


def gpu_identity(result: RunResult) -> tuple[str, str, str | None]:
    """(uuid, name, driver) of what was stressed; the CPU stands in for a GPU with --device cpu."""
    if result.gpu is not None and result.config.device != "cpu":
        return result.gpu.uuid, result.gpu.name, result.gpu.driver_version
    return "cpu", cpu_model_name(), None


def to_stress_result(result: RunResult, verdict: Verdict, run_id: int = 0) -> StressResult:
    uuid, name, driver = gpu_identity(result)
    return StressResult(
        run_id=run_id, started_s=result.started_s, ended_s=result.ended_s, gpu_uuid=uuid, gpu_name=name,
        workload=result.config.workload, dtype=result.dtype, unit=result.unit or verdict.unit,
        peak_throughput=_finite(verdict.peak), sustained_throughput=_finite(verdict.sustained),
        throttled=verdict.throttled, errors=result.errors, driver_version=driver, summary=verdict.sentence,
        device=result.config.device, aborted=result.aborted)


def _finite(value: float) -> float:
    return float(value) if np.isfinite(value) else 0.0


def extra_json(result: RunResult, verdict: Verdict) -> str:
    extra: dict[str, Any] = {"status": result.status, "message": result.message, "checks": result.checks,
                             "verdict": verdict.as_dict(), **result.extra}
    return json.dumps(extra, default=str)


def judge_run(result: RunResult, earlier: list[StressResult] | None = None,
              regression_pct: float = Thresholds.stress_regression_pct, specs: Sequence[GpuSpec] = (), *,
              clock_calibration_mhz: float | None = None) -> Verdict:
    """The verdict for a run, compared with its baseline among ``earlier`` runs (any; ``pick_baseline`` chooses);
    a bf16 GEMM on a GPU in ``specs`` also says its share of the dense peak at the limit in force.
    ``clock_calibration_mhz``: the clock the GPU held in its own earlier stress run, the clock reference."""
    trace = result.trace()
    if clock_calibration_mhz is not None:
        trace = replace(trace, sm_clock_calibration_mhz=clock_calibration_mhz)
    verdict = with_dense_peak(judge(trace, min_load_s=MIN_STRESS_LOAD_S, steady_state=True), result, specs)
    if result.config.device == "cpu":  # a drop inside the run's own noise band is not throttling
        verdict = judge_cpu_run(verdict, trace, result.extra.get("warmup_noise_pct"), MIN_STRESS_LOAD_S,
                                other_cores=result.extra.get("other_cpu_cores"), cores=result.extra.get("cpu_cores"))
    if verdict.status == "no_data":  # a few samples: too short to judge, said as such
        verdict = replace(verdict, status="too_short", forecast_unavailable="too few samples under load to fit",
                          sentence=f"Load of {format_duration(result.ended_s - result.started_s)}: too short to "
                                   f"judge (needs {format_duration(MIN_STRESS_LOAD_S)}). {verdict.sentence}")
    if result.aborted:
        verdict = replace(verdict, status="errors" if result.errors else "aborted",
                          sentence=f"Aborted ({result.message}). {verdict.sentence}")
    if shared := shared_run_sentence(result.extra.get("shared_with")):
        verdict = replace(verdict, sentence=f"{verdict.sentence} {shared}")
    if earlier:
        current = to_stress_result(result, verdict)
        # The verdict's unit, not the workload's: a run judged on its clock has no throughput to compare.
        baseline = pick_baseline(earlier, current.workload, current.dtype, current.gpu_uuid, unit=verdict.unit,
                                 before_s=current.started_s)
        verdict = compare_with_baseline(verdict, baseline, regression_pct)
    return verdict


def with_dense_peak(verdict: Verdict, result: RunResult, specs: Sequence[GpuSpec]) -> Verdict:
    """``verdict`` with the dense bf16 peak of the GPU's spec, scaled to the limit the verdict judged against."""
    if (result.config.workload != "gemm" or result.dtype != "bf16" or verdict.unit != "TFLOP/s"
            or result.gpu is None or result.config.device == "cpu" or not np.isfinite(verdict.sustained)):
        return verdict
    spec = find_spec(result.gpu.name, list(specs))
    if spec is None:
        return verdict
    # The limit in force during the run (NVML's enforced limit), not a datasheet stand-in for it.
    limit_w = verdict.power_limit_w if verdict.power_limit_source == "reported" else None
    peak = dense_peak(spec, limit_w)
    return replace(verdict, dense_peak_tflops=peak.tflops, dense_peak_source=peak.source_text(),
                   sentence=f"{verdict.sentence.rstrip('.')}; {of_peak_clause(verdict.sustained, peak)}.")


def load_earlier(db_path: Path, gpu_uuid: str, workload: str) -> list[StressResult]:
    """Earlier runs from the history (newest first); an empty list when there is no history yet."""
    if not db_path.exists():
        return []
    from desktop.history.store import HistoryStore

    store = HistoryStore.open(db_path, readonly=True)
    try:
        runs: list[StressResult] = store.stress_runs(gpu_uuid=gpu_uuid, workload=workload)
        return runs
    finally:
        store.close()


def save_run(db_path: Path, result: RunResult, verdict: Verdict) -> int:
    """Store the run and its points; returns the run id."""
    from desktop.history.store import HistoryStore

    store = HistoryStore.open(db_path)
    try:
        run_id: int = store.add_stress_run(to_stress_result(result, verdict), extra_json(result, verdict))
        columns: dict[str, npt.ArrayLike] = dict(result.columns)
        columns["throughput"] = result.throughput
        store.add_stress_points(run_id, result.time_s, columns)
        return run_id
    finally:
        store.close()


def save_failure_reason(exc: BaseException) -> str:
    """Why ``save_run`` failed, in one line: a read-only database and a full disk said plainly."""
    text = one_line(str(exc)) or type(exc).__name__
    found = problem(exc)  # the history's one classifier of what the environment did
    if found == "read_only":
        return f"the database is read-only ({text})"
    if found == "disk_full":
        return f"the disk is full ({text})"
    return text if isinstance(exc, UserError) else f"{type(exc).__name__}: {text}"


def one_line(text: str) -> str:
    return " ".join(text.split())


#: The run finished but says nothing yet: still heating up at the end, or too short to judge.
EXIT_INCONCLUSIVE = 7


def exit_code(result: RunResult, verdict: Verdict) -> int:
    """0 passed, 1 throttled, 3 result errors, 4 aborted (guard, cancel, crash), 7 inconclusive (still
    heating up at the end, or too short to judge). 2 is a usage error; the CLI exits 6 when the verdict
    was printed but the run could not be saved (3 still wins)."""
    if result.errors or verdict.errors:
        return 3
    if result.aborted:
        return 4
    if verdict.throttled:
        return 1
    return EXIT_INCONCLUSIVE if verdict.status in ("inconclusive", "too_short", "no_data") else 0
