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
import json
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from advisor.safetext import printable
from desktop.cli import stress_gate, stress_modes
from desktop.cli.common import ProgressBar, add_db, add_json, add_simulate, db_path, load_settings
from desktop.config import StressSettings
from desktop.errors import UserError

if TYPE_CHECKING:
    from advisor.verdict_model import Verdict
    from desktop.sessions.stress import StressRequest, StressSession
    from desktop.stress.run_model import Progress, RunResult

#: Without a terminal, a stress run writes one progress line this often.
PROGRESS_LINE_EVERY_S = 60.0
#: Signals that stop a run as Ctrl+C does: the child is stopped and the run stored as aborted.
_STOP_SIGNALS = (signal.SIGINT,) if sys.platform == "win32" else (signal.SIGINT, signal.SIGTERM)


def request_from(args: argparse.Namespace) -> StressRequest:
    """The command's options as the session's request (--minutes in seconds; the database path)."""
    from desktop.sessions.stress import StressRequest

    minutes = getattr(args, "minutes", None)
    device, simulate = getattr(args, "device", None), getattr(args, "simulate", None)
    if simulate is not None:
        if device not in (None, "sim"):
            raise UserError(f"--simulate runs on the simulated GPU: leave out --device {device}")
        device = "sim"
    gpu = getattr(args, "gpu", None)
    if gpu is not None and gpu < 0:
        raise UserError(f"--gpu {gpu}: a GPU's NVML index is 0 or more (rigscope doctor lists them)")
    return StressRequest(workload=getattr(args, "workload", "gemm"), device=device, gpu_index=gpu,
                         profiles=simulate or None,
                         dtype=getattr(args, "dtype", None), duration_s=minutes * 60.0 if minutes is not None else None,
                         guard_c=getattr(args, "guard_c", None), db_path=db_path(args))


def _say(text: str) -> None:
    print(f"rigscope stress: {text}", file=sys.stderr)


def _progress_line(bar: ProgressBar) -> Callable[[Progress], None]:
    """The runner's progress as the bar: time left, live throughput, temperature and clock."""
    from advisor.verdict_text import format_duration

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


HELP = "run a sustained-load test and give a throttle verdict"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=None, metavar="M",
                        help=f"duration (fractions allowed; default {StressSettings().default_minutes:g})")
    parser.add_argument("--workload", choices=("gemm", "bandwidth", "train", "infer"), default="gemm",
                        help="what to run (default gemm)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "tf32", "fp32"), default=None,
                        help="GEMM precision (default: the fastest the device supports)")
    parser.add_argument("--gpu", type=int, default=None, metavar="N",
                        help="the GPU to test, by its NVML index as `rigscope doctor` and `run --gpu` number it "
                             "(default 0)")
    add_simulate(parser)
    parser.add_argument("--device", default=None, metavar="DEV",
                        help="cuda:N | cpu | sim (default: cuda:0, else sim); an alias kept for --gpu N (cuda:N) "
                             "and --simulate (sim), and the way to run on the CPU")
    parser.add_argument("--guard-c", type=float, default=None, metavar="C", help="stop above this GPU temperature")
    stress_gate.add_arguments(parser)  # the portable record and the CI gate
    stress_modes.add_arguments(parser)  # the Quick test once per firmware mode
    add_db(parser)
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.sessions.stress import StressSession
    from desktop.stress.mode_restore import restore_left_over

    # A `--per-mode` run killed outright left the firmware in its last mode: put the one it found back first
    # (a run in Eco would measure Eco), and say so.
    restore_left_over(lambda text: _say(printable(text)))
    settings, _problems = load_settings()
    session = StressSession(request_from(args), settings=settings.stress, on_warning=_say,
                            regression_pct=settings.advisor.stress_regression_pct)
    note = session.device.note
    if note and not args.json:
        print(note, file=sys.stderr)
    # One run per device: a second would measure the first's load (and both would become baselines).
    with session.device_lock():
        if getattr(args, "per_mode", None) is not None:  # the Quick test once per firmware mode (stress_modes)
            return stress_modes.run(args, session, progress_line=_progress_line)
        return _run(args, session)


def _run(args: argparse.Namespace, session: StressSession) -> int:
    # On a terminal a redrawn bar; without one (a log, a CI job) one plain line per minute.
    from desktop.sessions.stress import EXIT_NOT_SAVED

    bar = ProgressBar(1.0, width=24, line_every_s=PROGRESS_LINE_EVERY_S)
    options = stress_gate.prepare(args)  # -o, --baseline: a mistake is exit 2 before the run, not after
    session.on_progress = _progress_line(bar)
    session.prepare()
    handler = _cancel_handler(session)
    previous = {signum: signal.signal(signum, handler) for signum in _STOP_SIGNALS}
    try:
        result = session.run_test()
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        bar.close()
    outcome = session.finish(result)
    verdict, run_id, save_error = outcome.verdict, outcome.run_id, outcome.save_error
    gate = stress_gate.finish(options, result, verdict) if options.wanted else None
    code = stress_gate.exit_code(outcome.exit_code, gate, not_saved=EXIT_NOT_SAVED)
    try:
        if args.json:
            report = _json_report(result, verdict, run_id, code, session.device.note, save_error=save_error)
            print(json.dumps(stress_gate.add_to_json(report, options, gate), default=str, indent=2))
        else:
            print(_text_report(result, verdict, run_id) + stress_gate.text_lines(options, gate))
    finally:
        stress_gate.say_problems(gate)
        if save_error is not None:
            _say(f"the run was not saved to {session.request.db_path}: {save_error}")
    return code


def _cancel_handler(session: StressSession) -> Any:
    def handle(_signum: int, _frame: FrameType | None) -> None:
        session.cancel()
    return handle


def _text_report(result: RunResult, verdict: Verdict, run_id: int | None) -> str:
    from advisor.verdict_text import format_duration
    from desktop.stress.records import gpu_identity

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
    from desktop.stress.records import gpu_identity

    uuid, name, driver = gpu_identity(result)
    return {"exit_code": code, "run_id": run_id, "saved": run_id is not None, "save_error": save_error,
            "status": result.status, "message": result.message,
            "note": note, "workload": result.config.workload, "dtype": result.dtype, "device": result.config.device,
            "gpu": {"uuid": uuid, "name": name, "driver": driver,
                    "nvml_index": result.gpu.index if result.gpu is not None else None},
            "started_s": result.started_s,
            "ended_s": result.ended_s, "errors": result.errors, "checks": result.checks,
            "extra": result.extra, "verdict": verdict.as_dict(),
            # Where the temperature settles (advisor.forecast): a forecast, never a measurement; null with the reason.
            "forecast": verdict.forecast.as_json() if verdict.forecast is not None else None,
            "forecast_unavailable": verdict.forecast_unavailable if verdict.forecast is None else None}
