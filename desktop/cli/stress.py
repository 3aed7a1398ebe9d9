"""`rigscope stress`: the sustained-load test and its throttle verdict from a terminal.

Exit codes: 0 passed, 1 throttled, 2 usage error (or another run holds the device), 3 result
errors found, 4 aborted (temperature guard, Ctrl+C or SIGTERM, or the workload crashed), 6 the
verdict was printed but the run could not be saved to the history database (or the -o record not
written), 7 inconclusive (the temperature was still rising at the end, or the run was too short to
judge); 5 with --baseline: the throughput fell more than --max-drop below the baseline record's
(desktop.cli.stress_gate).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import signal
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from advisor.safetext import printable
from advisor.verdict_model import Verdict
from advisor.verdict_text import format_duration
from desktop.cli import stress_gate, stress_modes
from desktop.cli.common import ProgressBar, db_path, load_settings
from desktop.errors import UserError
from desktop.history.lock import DeviceLock, GpuClaims
from desktop.stress.records import (
    exit_code,
    gpu_identity,
    judge_run,
    load_earlier,
    one_line,
    save_failure_reason,
    save_run,
)
from desktop.stress.run_model import Progress, RunResult, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

_CUDA = re.compile(r"^cuda(:\d+)?$")
#: The run finished and its verdict was printed, but the history database could not store it.
EXIT_NOT_SAVED = 6
#: The longest run accepted: a day.
MAX_MINUTES = 1440.0
#: A temperature guard below this is below room temperature: every run would stop at once.
MIN_GUARD_C = 30.0
#: Without a terminal, a stress run writes one progress line this often.
PROGRESS_LINE_EVERY_S = 60.0
#: Signals that stop a run as Ctrl+C does: the child is stopped and the run stored as aborted.
_STOP_SIGNALS = (signal.SIGINT,) if sys.platform == "win32" else (signal.SIGINT, signal.SIGTERM)


def resolve_device(requested: str | None) -> tuple[str, str | None]:
    """(device, note): cuda:0 when an NVIDIA GPU answers, else the simulated GPU, said out loud."""
    if requested:
        if requested not in ("cpu", "sim") and not _CUDA.match(requested):
            raise UserError(f"unknown device {requested!r}: use cuda:0, cpu or sim")
        return (requested if requested != "cuda" else "cuda:0"), None
    backend = open_gpu_backend()
    try:
        simulated = backend.source.simulated
        reason = backend.source.fallback_reason
    finally:
        backend.close()
    if simulated:
        return "sim", (f"no NVIDIA GPU here ({reason}); running on the simulated GPU — "
                       "use --device cpu for a real CPU run")
    return "cuda:0", None


def _need_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise UserError("PyTorch is not installed: `pip install rigscope[stress]`, or use --device sim")


def build_runner(args: argparse.Namespace, device: str, on_progress: Any) -> StressRunner:
    settings, _problems = load_settings()
    minutes = args.minutes if args.minutes is not None else settings.stress.default_minutes
    if not minutes or minutes <= 0 or not np.isfinite(minutes):
        raise UserError("--minutes must be a positive number (fractions allowed, e.g. 0.5)")
    if minutes > MAX_MINUTES:
        raise UserError(f"--minutes {minutes:g} is beyond a day: at most {MAX_MINUTES:g} minutes")
    if args.guard_c is not None and not (np.isfinite(args.guard_c) and args.guard_c >= MIN_GUARD_C):
        raise UserError(f"--guard-c {args.guard_c:g} °C is below room temperature: the run would stop at once "
                        f"(use {MIN_GUARD_C:g} °C or more, or leave it out for the GPU's own limit)")
    if device == "cpu" and args.dtype == "tf32":
        raise UserError("tf32 is a GPU precision; on the CPU use fp32, bf16 or fp16")
    sampler: Sampler | None = None
    if device == "sim":
        if args.workload != "gemm":
            raise UserError("the simulated GPU models GEMM throughput only: use --workload gemm with --device sim")
        sampler = Sampler(SimulatedBackend(parse_profile_list(None)))
    elif device.startswith("cuda"):
        _need_torch()
        backend = open_gpu_backend()
        if backend.source.simulated:
            backend.close()
            raise UserError(f"no NVIDIA GPU answers here ({backend.source.fallback_reason}); try --device cpu or sim")
        # Which NVML GPU cuda:N is (and whether CUDA has an N) only the workload child can say:
        # the runner maps it from the child's first record, and refuses when it cannot.
        sampler = Sampler(backend)
    else:
        _need_torch()
    stress = settings.stress
    config = StressConfig(workload=args.workload, device=device, dtype=args.dtype, duration_s=minutes * 60.0,
                          guard_c=args.guard_c, guard_offset_c=stress.guard_offset_c,
                          guard_absolute_c=stress.guard_temperature_c)
    return StressRunner(config, sampler, on_progress=on_progress)


def _progress_line(bar: ProgressBar) -> Callable[[Progress], None]:
    """The runner's progress as the bar: time left, live throughput, temperature and clock."""
    def show(p: Progress) -> None:
        parts = [f"{format_duration(p.remaining_s)} left"]
        if p.phase == "starting":
            parts.append("starting the workload…")
        if p.throughput is not None:
            parts.append(f"{p.throughput:.3g} {p.unit}")
        if p.temperature_c is not None:
            parts.append(f"{p.temperature_c:.0f} °C")
        if p.sm_clock_mhz is not None:
            parts.append(f"{p.sm_clock_mhz:.0f} MHz")
        if p.errors:
            parts.append(f"{p.errors} ERRORS")
        share = min(1.0, p.elapsed_s / p.duration_s) if p.duration_s else 0.0
        bar.update(share, "  ".join(parts))
    return show


def main(args: argparse.Namespace) -> int:
    device, note = resolve_device(args.device)
    if note and not args.json:
        print(note, file=sys.stderr)
    # One run per device: a second would measure the first's load (and both would become baselines).
    lock = DeviceLock(device)
    try:
        lock.acquire()
    except OSError as exc:  # an unwritable data folder: run, but say no lock guards it
        print(f"rigscope stress: cannot create the device lock {lock.lock_path} ({exc.strerror or exc}); "
              "another run on this device would not be refused", file=sys.stderr)
    try:
        if getattr(args, "per_mode", None) is not None:  # the Quick test once per firmware mode (stress_modes)
            return stress_modes.run(args, device, build_runner=build_runner, progress_line=_progress_line,
                                    save=_safe_save)
        return _run(args, device, note)
    finally:
        lock.release()


def _run(args: argparse.Namespace, device: str, note: str | None) -> int:
    # On a terminal a redrawn bar; without one (a log, a CI job) one plain line per minute.
    bar = ProgressBar(1.0, width=24, line_every_s=PROGRESS_LINE_EVERY_S)
    options = stress_gate.prepare(args)  # -o, --baseline: a mistake is exit 2 before the run, not after
    runner = build_runner(args, device, _progress_line(bar))
    claims = GpuClaims()
    if device != "sim":  # the simulated GPU is this process's own: nobody else loads it
        runner.claim = claims.claim
    handler = _cancel_handler(runner)
    previous = {signum: signal.signal(signum, handler) for signum in _STOP_SIGNALS}
    try:
        result = runner.run()
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        bar.close()
        if runner.sampler is not None:
            runner.sampler.close()
        claims.release()
    path = db_path(args)
    uuid, _name, _driver = gpu_identity(result)
    earlier = _safe_earlier(path, uuid, result.config.workload)
    verdict = judge_run(result, earlier)
    run_id, save_error = _safe_save(path, result, verdict)
    code = exit_code(result, verdict)
    if save_error is not None and code != 3:  # wrong results still take precedence
        code = EXIT_NOT_SAVED
    outcome = stress_gate.finish(options, result, verdict) if options.wanted else None
    code = stress_gate.exit_code(code, outcome, not_saved=EXIT_NOT_SAVED)
    try:
        if args.json:
            report = _json_report(result, verdict, run_id, code, note, save_error=save_error)
            print(json.dumps(stress_gate.add_to_json(report, options, outcome), default=str, indent=2))
        else:
            print(_text_report(result, verdict, run_id) + stress_gate.text_lines(options, outcome))
    finally:
        stress_gate.say_problems(outcome)
        if save_error is not None:
            print(f"rigscope stress: the run was not saved to {path}: {save_error}", file=sys.stderr)
    return code


def _cancel_handler(runner: StressRunner) -> Any:
    def handle(_signum: int, _frame: FrameType | None) -> None:
        runner.cancel()
    return handle


def _safe_earlier(path: Path, uuid: str, workload: str) -> list[Any]:
    try:
        return load_earlier(path, uuid, workload)
    except (UserError, ImportError, AttributeError, OSError, sqlite3.Error) as exc:
        print(f"rigscope stress: cannot read earlier runs from {path}: {one_line(str(exc))}", file=sys.stderr)
        return []


def _safe_save(path: Path, result: RunResult, verdict: Verdict) -> tuple[int | None, str | None]:
    """(run id, None) once stored; (None, why) when the history cannot take it; (None, None): no samples."""
    if result.time_s.shape[0] == 0:
        return None, None
    try:
        return save_run(path, result, verdict), None
    except Exception as exc:  # any failure to store: the verdict is still printed, and this says why
        return None, save_failure_reason(exc)


def _text_report(result: RunResult, verdict: Verdict, run_id: int | None) -> str:
    _uuid, name, _driver = gpu_identity(result)
    lines = [f"{result.config.workload} ({result.dtype or 'default'}) on {name} [{result.config.device}], "
             f"{format_duration(result.ended_s - result.started_s)}", verdict.sentence]
    if result.extra.get("power_limit_line"):  # why the limit was where it was (the laptop's envelope)
        lines.append(f"Power limit: {printable(str(result.extra['power_limit_line']))}.")
    if verdict.comparison:
        lines.append(verdict.comparison[0].upper() + verdict.comparison[1:] + ".")
    if result.checks:
        lines.append(f"Result checks: {result.checks}, errors: {result.errors}.")
    latency = {k: v for k, v in result.extra.items() if k.endswith("_ms")}
    if latency:
        lines.append("Latency: " + ", ".join(f"{k[:-3]} {v:.2f} ms" for k, v in sorted(latency.items())))
    if run_id is not None:
        lines.append(f"Saved as run {run_id}.")
    return "\n".join(lines)


def _json_report(result: RunResult, verdict: Verdict, run_id: int | None, code: int,
                 note: str | None, *, save_error: str | None = None) -> dict[str, Any]:
    uuid, name, driver = gpu_identity(result)
    return {"exit_code": code, "run_id": run_id, "saved": run_id is not None, "save_error": save_error,
            "status": result.status, "message": result.message,
            "note": note, "workload": result.config.workload, "dtype": result.dtype, "device": result.config.device,
            "gpu": {"uuid": uuid, "name": name, "driver": driver,
                    "nvml_index": result.gpu.index if result.gpu is not None else None},
            "started_s": result.started_s,
            "ended_s": result.ended_s, "errors": result.errors, "checks": result.checks,
            "extra": result.extra, "verdict": verdict.as_dict()}
