"""`rigscope stress` and `rigscope analyze`: the sustained-load test and the throttle verdict from a terminal.

Exit codes of `stress`: 0 passed, 1 throttled, 2 usage error, 3 result errors found,
4 aborted (temperature guard, Ctrl+C, or the workload crashed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from desktop import config as config_mod
from desktop.errors import UserError
from desktop.paths import default_db_path
from desktop.stress.log_verdict import RunVerdict, verdicts_for_log
from desktop.stress.records import exit_code, gpu_identity, judge_run, load_earlier, save_run
from desktop.stress.runner import Progress, RunResult, StressConfig, StressRunner
from desktop.stress.verdict import CAUSE_COUNTER_FIELDS, LOAD_UTIL_PCT, Verdict, format_duration
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

_CUDA = re.compile(r"^cuda(:\d+)?$")


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
    settings, _problems = config_mod.load()
    minutes = args.minutes if args.minutes is not None else settings.stress.default_minutes
    if not minutes or minutes <= 0 or not np.isfinite(minutes):
        raise UserError("--minutes must be a positive number (fractions allowed, e.g. 0.5)")
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


class ProgressBar:
    """One redrawn stderr line: bar, time left, live throughput, temperature and clock."""

    def __init__(self, stream: Any = None) -> None:
        # sys.stderr when called, not when this module was imported (it may have been replaced since).
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self._last_line = 0.0

    def __call__(self, p: Progress) -> None:
        if not self.enabled:
            return
        share = min(1.0, p.elapsed_s / p.duration_s) if p.duration_s else 0.0
        bar = "#" * int(share * 24)
        parts = [f"[{bar:<24}] {share * 100:3.0f} %", f"{format_duration(p.remaining_s)} left"]
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
        self.stream.write("\r" + "  ".join(parts) + "\033[K")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def stress_main(args: argparse.Namespace) -> int:
    device, note = resolve_device(args.device)
    if note and not args.json:
        print(note, file=sys.stderr)
    bar = ProgressBar()
    runner = build_runner(args, device, bar)
    previous = signal.signal(signal.SIGINT, _cancel_handler(runner))
    try:
        result = runner.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
        if runner.sampler is not None:
            runner.sampler.close()
    db_path = Path(args.db) if args.db else default_db_path()
    uuid, _name, _driver = gpu_identity(result)
    earlier = _safe_earlier(db_path, uuid, result.config.workload)
    verdict = judge_run(result, earlier)
    run_id = _safe_save(db_path, result, verdict)
    code = exit_code(result, verdict)
    if args.json:
        print(json.dumps(_json_report(result, verdict, run_id, code, note), default=str, indent=2))
    else:
        print(_text_report(result, verdict, run_id))
    return code


def _cancel_handler(runner: StressRunner) -> Any:
    def handle(_signum: int, _frame: FrameType | None) -> None:
        runner.cancel()
    return handle


def _safe_earlier(db_path: Path, uuid: str, workload: str) -> list[Any]:
    try:
        return load_earlier(db_path, uuid, workload)
    except (UserError, ImportError, AttributeError, OSError) as exc:
        print(f"rigscope stress: cannot read earlier runs from {db_path}: {exc}", file=sys.stderr)
        return []


def _safe_save(db_path: Path, result: RunResult, verdict: Verdict) -> int | None:
    if result.time_s.shape[0] == 0:
        return None
    try:
        return save_run(db_path, result, verdict)
    except (UserError, ImportError, AttributeError, OSError) as exc:
        # The verdict is still worth printing when the history cannot take it.
        print(f"rigscope stress: the run was not saved to {db_path}: {exc}", file=sys.stderr)
        return None


def _text_report(result: RunResult, verdict: Verdict, run_id: int | None) -> str:
    _uuid, name, _driver = gpu_identity(result)
    lines = [f"{result.config.workload} ({result.dtype or 'default'}) on {name} [{result.config.device}], "
             f"{format_duration(result.ended_s - result.started_s)}", verdict.sentence]
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
                 note: str | None) -> dict[str, Any]:
    uuid, name, driver = gpu_identity(result)
    return {"exit_code": code, "run_id": run_id, "status": result.status, "message": result.message,
            "note": note, "workload": result.config.workload, "dtype": result.dtype, "device": result.config.device,
            "gpu": {"uuid": uuid, "name": name, "driver": driver,
                    "nvml_index": result.gpu.index if result.gpu is not None else None},
            "started_s": result.started_s,
            "ended_s": result.ended_s, "errors": result.errors, "checks": result.checks,
            "extra": result.extra, "verdict": verdict.as_dict()}


# --- analyze ---------------------------------------------------------------------------

_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")


def parse_time(text: str, now_s: float) -> float:
    """ISO date/time (local when no zone) or relative "-7d", "-3h", "-30m"."""
    match = _RELATIVE.match(text.strip())
    if match:
        factor = {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
        return now_s - float(match.group(1)) * factor
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise UserError(f"cannot read the time {text!r}: use an ISO date/time or e.g. -2h") from exc
    if when.tzinfo is None:
        when = when.astimezone()
    return when.timestamp()


def analyze_main(args: argparse.Namespace) -> int:
    results = _analyze_file(Path(args.file), args.gpu) if args.file else _analyze_stored(args)
    if args.json:
        none: list[RunVerdict | None] = [None]  # a GPU with no load still gets its entry
        rows = [_run_json(label, run) for label, runs in results for run in (runs or none)]
        print(json.dumps(rows, default=str, indent=2))
    else:
        for label, runs in results:
            print("\n".join(_run_lines(label, runs)))
    return 1 if any(run.verdict.throttled for _label, runs in results for run in runs) else 0


_NO_LOAD = (f"No load in the log (GPU utilization never at or above {LOAD_UTIL_PCT:.0f} % for a few samples); "
            "nothing to judge.")


def _run_lines(label: str, runs: list[RunVerdict]) -> list[str]:
    """One line per run: "GPU 0 NVIDIA H800, run 2 of 3 (10:07:00, 4 min): Held its speed ..."."""
    if not runs:
        return [f"{label}: {_NO_LOAD}"]
    if len(runs) == 1:
        return [f"{label}: {runs[0].verdict.sentence}"]
    starts = [datetime.fromtimestamp(run.start_s) for run in runs]
    # The date only when the runs do not all fall on one day.
    pattern = "%H:%M:%S" if len({s.date() for s in starts}) == 1 else "%Y-%m-%d %H:%M:%S"
    return [f"{label}, run {run.run} of {run.runs} ({start.strftime(pattern)}, "
            f"{format_duration(run.end_s - run.start_s)}): {run.verdict.sentence}"
            for run, start in zip(runs, starts, strict=True)]


def _run_json(label: str, run: RunVerdict | None) -> dict[str, Any]:
    if run is None:
        return {"gpu": label, "run": None, "runs": 0, "status": "no_load", "throttled": False,
                "sentence": _NO_LOAD}
    return {"gpu": label, "run": run.run, "runs": run.runs, "start_s": run.start_s, "end_s": run.end_s,
            **run.verdict.as_dict()}


def _analyze_file(path: Path, gpu: int | None) -> list[tuple[str, list[RunVerdict]]]:
    if not path.exists():
        raise UserError(f"no such file: {path}")
    from desktop.history.nvsmi_csv import parse_nvsmi_csv

    imported = parse_nvsmi_csv(path)
    series = dict(imported.series)
    if not series:
        raise UserError(f"{path} holds no GPU samples (is it `nvidia-smi --query-gpu=... --format=csv` output?)")
    keys = sorted(series)
    if gpu is not None:
        if gpu >= len(keys):
            raise UserError(f"the log has {len(keys)} GPU(s); --gpu {gpu} is not one of them")
        keys = [keys[gpu]]
    out = []
    for key in keys:
        time_s, columns = series[key]
        info = imported.info.get(key, {})
        label = f"GPU {info['index']} {info.get('name', '')}".strip() if "index" in info else str(key)
        out.append((label, verdicts_for_log(np.asarray(time_s), dict(columns),
                                            sm_clock_max_mhz=_number(info.get("sm_clock_max_mhz")),
                                            power_limit_w=_number(info.get("power_limit_enforced_w")))))
    return out


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and np.isfinite(value) else None


def _analyze_stored(args: argparse.Namespace) -> list[tuple[str, list[RunVerdict]]]:
    from desktop.history.query import QUERYABLE
    from desktop.history.store import HistoryStore

    db_path = Path(args.db) if args.db else default_db_path()
    if not db_path.exists():
        raise UserError(f"no history at {db_path}: record some first, or pass an nvidia-smi log FILE")
    now = time.time()
    start = parse_time(args.from_, now) if args.from_ else now - 3600.0
    end = parse_time(args.to, now) if args.to else now
    if end <= start:
        raise UserError("--to must be after --from")
    store = HistoryStore.open(db_path, readonly=True)
    try:
        gpus = store.gpus()
        if args.gpu is not None:
            gpus = [g for g in gpus if g.index == args.gpu]
            if not gpus:
                raise UserError(f"the history has no GPU {args.gpu}")
        metrics = ["utilization_gpu_pct", "sm_clock_mhz", "temperature_c", "power_w", "clock_event_reasons"]
        # NVML's exact time under each throttle cause, where this history stores it.
        metrics += [name for name in CAUSE_COUNTER_FIELDS.values() if name in QUERYABLE]
        out = []
        for info in gpus:
            rows = store.query(info.uuid, metrics, start, end, max_points=100_000)
            out.append((f"GPU {info.index} {info.name}",
                        verdicts_for_log(rows.time_s, dict(rows.columns), sm_clock_max_mhz=info.sm_clock_max_mhz,
                                         power_limit_w=info.power_limit_enforced_w,
                                         temp_slowdown_c=info.temp_slowdown_c)))
        return out
    finally:
        store.close()
