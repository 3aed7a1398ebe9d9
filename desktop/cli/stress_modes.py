"""`rigscope stress --per-mode`: the Quick test once in each firmware mode, the runs compared side by side.

On the simulated laptop Rigscope switches the (simulated) msi-ec mode itself; on a real laptop it
writes msi-ec's ``shift_mode`` or ACPI ``platform_profile`` only with ``--switch-modes`` and where the
file is writable (root), otherwise it asks the user to switch and reads the mode back. Each run is the
stress session's (``StressSession.run_next``): the device lock held across the runs, each run's GPU lock,
its verdict against the earlier runs and its save to the history, as any stress run. The mode found is put
back at the end, on Ctrl+C and on SIGTERM (a signal cancels the run in progress and no further mode is
switched), and said on stderr, with --json too (desktop/stress/mode_restore.py). What is left here is the
printing: the table is `rigscope compare`'s, one column per mode.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from advisor.baseline import QUICK_S
from advisor.mode_compare import mode_sentences
from advisor.safetext import printable
from desktop.cli.common import ProgressBar
from desktop.cli.compare import text_report
from desktop.errors import UserError

if TYPE_CHECKING:
    from desktop.sessions.stress import StressOutcome, StressSession
    from desktop.stress.per_mode import ModeRun, ModeSwitch
    from desktop.stress.run_model import Progress, StressConfig

#: The Quick test's length (the Stress page's "Quick 2 min").
QUICK_MINUTES = QUICK_S / 60.0

ProgressLine = Callable[[ProgressBar], Callable[["Progress"], None]]  # Progress: imported when run


#: Signals that stop the runs as Ctrl+C does (the mode found is put back before the process ends).
_STOP_SIGNALS = (signal.SIGINT,) if sys.platform == "win32" else (signal.SIGINT, signal.SIGTERM)


def _tell(text: str) -> None:
    """A line about the machine's state (the mode put back): said with --json too, on stderr."""
    print(f"rigscope stress: {printable(text)}", file=sys.stderr, flush=True)


def _ask(prompt: str) -> None:
    if not sys.stdin.isatty():
        raise UserError(f"{prompt}: no terminal to ask on; run rigscope as root with --switch-modes, "
                        "or from a terminal")
    print(f"{prompt} ", end="", file=sys.stderr, flush=True)
    sys.stdin.readline()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`rigscope stress`'s options for the run per firmware mode."""
    parser.add_argument("--per-mode", nargs="?", const="", default=None, metavar="MODES",
                        help="run the test once in each firmware mode (comma-separated, e.g. turbo,comfort; "
                             "default: every mode the machine has) and compare them; --minutes defaults to "
                             f"{QUICK_MINUTES:g}")
    parser.add_argument("--switch-modes", action="store_true",
                        help="with --per-mode: let Rigscope switch msi-ec / platform_profile itself (needs root); "
                             "otherwise you are asked to switch. The mode found is put back at the end, on Ctrl+C "
                             "and SIGTERM, or by the next stress run after a crash")


def run(args: argparse.Namespace, session: StressSession, *, progress_line: ProgressLine) -> int:
    """The runs of ``session``'s request, one per mode (``session.run_next``), in the device lock the caller holds."""
    from advisor.run_compare import compare
    from desktop.sessions.stress_device import simulated_gpus
    from desktop.stress.mode_restore import ModeKeeper
    from desktop.stress.per_mode import SysfsModes, choose_modes, cool_to_start, run_modes, simulated_switch
    from desktop.stress.run_model import RealClock
    from desktop.stress.runner import StressRunner
    from desktop.telemetry.sampler import Sampler, open_gpu_backend

    device = session.device.name
    if device == "cpu":
        raise UserError("--per-mode compares the GPU's firmware modes: use it with --gpu N or --simulate")
    if getattr(args, "output", None) or getattr(args, "baseline", None):
        raise UserError("--per-mode does not write -o records or check --baseline: run those one mode at a time")
    minutes = args.minutes if args.minutes is not None else QUICK_MINUTES
    # Each mode's run: the session's request at the Quick test's length unless --minutes says, checked now
    # (a request the device cannot run is refused before the first mode is switched).
    session.request = replace(session.request, duration_s=minutes * 60.0)
    _ = session.config  # the session's checks (UserError)
    requested = [m.strip() for m in (args.per_mode or "").split(",") if m.strip()]
    bar_holder: list[ProgressBar] = []
    say: Callable[[str], None] = (lambda _text: None) if args.json else (
        lambda text: print(f"rigscope stress: {printable(text)}", file=sys.stderr))

    def new_bar() -> Callable[[Progress], None]:
        for old in bar_holder:
            old.close()
        bar_holder[:] = [ProgressBar(1.0, width=24)]
        return progress_line(bar_holder[0])

    switch: ModeSwitch
    if device == "sim":
        backend = simulated_gpus(session.request.profiles, session.device.nvml_index)
        # The model's own modes, or a (fake) msi-ec tree under RIGSCOPE_SYSFS_ROOT that the laptop follows.
        switch = simulated_switch(backend.machine, allow_write=bool(args.switch_modes))

        def make_runner(config: StressConfig) -> StressRunner:  # each run a reader of the one simulated laptop
            return StressRunner(config, Sampler(backend.view()))
        session.make_runner = make_runner

        def temperature() -> float | None:
            sample = backend.sample(RealClock().now())[0].sample
            return sample.temperature_c if sample is not None else None
        closing: Callable[[], None] = backend.close
    else:
        switch = SysfsModes(allow_write=bool(args.switch_modes))
        watcher = open_gpu_backend()  # each run's runner is the session's own (own_runner: NVML of its own)

        def temperature() -> float | None:
            readings = watcher.sample(RealClock().now())
            sample = readings[0].sample if readings else None
            return sample.temperature_c if sample is not None else None
        closing = watcher.close

    stop = threading.Event()
    asking = [False]

    def run_one(_mode: str) -> StressOutcome:  # session.run_next, with a stop that no new runner misses
        session.on_progress = new_bar()
        session.runner = None
        session.prepare()
        if stop.is_set():
            session.cancel()
        return session.run()

    def handle(_signum: int, _frame: FrameType | None) -> None:
        stop.set()
        session.cancel()
        if asking[0]:  # waiting on the terminal: end the wait (the mode found is still put back)
            raise KeyboardInterrupt

    def ask(prompt: str) -> None:
        asking[0] = True
        try:
            _ask(prompt)
        finally:
            asking[0] = False

    keeper = ModeKeeper(switch, say=_tell)
    previous: dict[int, Any] = {}
    try:
        try:
            modes = choose_modes(requested, switch.available())
        except ValueError as exc:
            raise UserError(str(exc)) from None
        keeper.remember()  # before the first switch; ModesBusy while another run switches modes
        previous = {signum: signal.signal(signum, handle) for signum in _STOP_SIGNALS}
        cool = cool_to_start(temperature, RealClock(), stop)  # the start temperature, read before the first run
        runs = run_modes(modes, switch, run_one, ask=ask, cool_down=cool, say=say, stop=stop)
    finally:
        asking[0] = False  # a second signal from here on only sets stop: the restore is not cut short
        for bar in bar_holder:
            bar.close()
        try:
            keeper.restore()
        finally:
            keeper.close()
            for signum, old in previous.items():
                signal.signal(signum, old)
            closing()
    if not runs:  # stopped before the first run
        return 4
    path = session.request.db_path
    saved = [(r.run_id, r.save_error) for r in runs]
    sentences = mode_sentences([r.figures() for r in runs])
    # One run only (stopped or guarded in the first mode): nothing to set it beside, its own line still said.
    comparison = compare([r.record for r in runs]) if len(runs) >= 2 else None
    if args.json:
        print(json.dumps(_json(runs, saved, sentences, comparison.as_dict() if comparison else None),
                         indent=2, default=str))
    else:
        if comparison is not None:
            print(text_report(comparison, [f"run {rid}" if rid is not None else "not saved" for rid, _ in saved]))
        for run_ in runs:
            print(f"{printable(run_.name)}: {printable(str(run_.result.extra.get('power_limit_line', '')))}; "
                  f"{printable(run_.verdict.sentence)}")
        for sentence in sentences:
            print(printable(sentence) + ".")
    for rid, error in saved:
        if rid is None and error:
            print(f"rigscope stress: a run was not saved to {path}: {error}", file=sys.stderr)
    return 4 if any(r.result.aborted for r in runs) or len(runs) < len(modes) else 0


def _json(runs: list[ModeRun], saved: list[tuple[int | None, str | None]], sentences: list[str],
          comparison: dict[str, Any] | None) -> dict[str, Any]:
    return {"modes": [{"mode": r.mode, "name": r.name, "run_id": rid, "status": r.result.status,
                       "power_limit_line": r.result.extra.get("power_limit_line"),
                       "throughput": r.record.throughput, "unit": r.record.unit,
                       "power_w": r.record.power_w.p50, "temperature_c": r.record.temperature_c.p50,
                       "sm_clock_mhz": r.record.sm_clock_mhz.p50, "verdict": r.verdict.as_dict()}
                      for r, (rid, _error) in zip(runs, saved, strict=True)],
            "sentences": sentences, "comparison": comparison}
