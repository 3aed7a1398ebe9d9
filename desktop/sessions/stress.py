"""One stress test from the request to the outcome, for `rigscope stress` and the Stress page alike.

``StressSession`` owns the whole sequence: it resolves the device and the GPU once (one ``GpuTarget``:
NVML index, CUDA ordinal, UUID and bus id, desktop/stress/devices.py; carried as the run's config's
``target`` to the runner and its child), checks the
request, builds the runner, holds the device lock and the per-GPU locks (``gpu_locks``) while the
test runs, reads the earlier runs on the same GPU, judges the run against them, stores it in the
history and gives the outcome with its exit code. Progress goes to plain callbacks (``on_progress``,
``on_start``, ``on_phase``, ``on_warning``); no Qt here. The command line prints what they say
(desktop/cli/stress.py; ``--per-mode`` runs ``run_next`` once per firmware mode, desktop/cli/stress_modes.py)
and the window turns them into signals (desktop/ui/stress_work.py), which runs the test (``run_test``) on a
QThread and the judging (``finish``, the same call as the command line's) on a worker of its own. The window's
runners come from ``window_runners`` over the backend it shows, and its device from ``device_for`` that backend
(desktop/sessions/stress_device.py, with ``resolve_device`` and the command line's ``own_runner``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from advisor.costs import GpuSpec
from advisor.frame import StressResult
from advisor.guard import MIN_GUARD_C
from advisor.thresholds import Thresholds
from advisor.verdict_model import Verdict
from desktop.config import MAX_STRESS_MINUTES, StressSettings
from desktop.errors import UserError
from desktop.sessions.gpu_locks import DeviceLock, GpuClaims
from desktop.sessions.stress_device import RunnerFactory, own_runner, resolve_device
from desktop.stress.devices import GpuTarget
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
from desktop.telemetry.model import GpuInfo

log = logging.getLogger(__name__)

#: The run finished and its verdict was given, but the history database could not store it.
EXIT_NOT_SAVED = 6
#: Rows in the Stress page's table of earlier runs.
TABLE_RUNS = 50


@dataclass(frozen=True)
class StressRequest:
    """What the user asked for, as given: the command's options or the Stress page's controls."""

    workload: str = "gemm"
    #: ``cuda``/``cuda:N``, ``cpu`` or ``sim``; None: cuda:0 when an NVIDIA GPU answers, else the simulated GPU.
    device: str | None = None
    #: The NVML GPU picked (``--gpu N``, the Stress page's picker); None: the one the device names.
    gpu_index: int | None = None
    #: The simulated GPU's profiles (``--simulate=PROFILES``; None: the default laptop).
    profiles: str | None = None
    dtype: str | None = None
    #: None: the settings' default length.
    duration_s: float | None = None
    guard_c: float | None = None
    #: Where earlier runs are read and this one is stored; None: neither (a window without a history).
    db_path: Path | None = None


def stress_config(request: StressRequest, device: GpuTarget, settings: StressSettings | None = None) -> StressConfig:
    """The run's config, checked (UserError: a length, guard or precision the device cannot run)."""
    stress = settings or StressSettings()
    duration_s = request.duration_s if request.duration_s is not None else stress.default_minutes * 60.0
    if not duration_s or duration_s <= 0 or not math.isfinite(duration_s):
        raise UserError("--minutes must be a positive number (fractions allowed, e.g. 0.5)")
    if duration_s > MAX_STRESS_MINUTES * 60.0:
        raise UserError(f"--minutes {duration_s / 60.0:g} is beyond a day: at most {MAX_STRESS_MINUTES:g} minutes")
    guard_c = request.guard_c
    if guard_c is not None and not math.isfinite(guard_c):
        raise UserError(f"--guard-c {guard_c:g}: a temperature must be a finite number of °C "
                        f"(e.g. 83; {MIN_GUARD_C:g} °C or more, or leave it out for the GPU's own limit)")
    if guard_c is not None and guard_c < MIN_GUARD_C:
        raise UserError(f"--guard-c {guard_c:g} °C is below room temperature: the run would stop at once "
                        f"(use {MIN_GUARD_C:g} °C or more, or leave it out for the GPU's own limit)")
    if device.name == "cpu" and request.dtype == "tf32":
        raise UserError("tf32 is a GPU precision; on the CPU use fp32, bf16 or fp16")
    if device.simulated and request.workload != "gemm":
        raise UserError("the simulated GPU models GEMM throughput only: use --workload gemm with --simulate")
    return StressConfig(workload=request.workload, target=device, dtype=request.dtype, duration_s=duration_s,
                        guard_c=guard_c, guard_offset_c=stress.guard_offset_c,
                        guard_absolute_c=stress.guard_temperature_c)


@dataclass(frozen=True)
class StressOutcome:
    """A judged run: its verdict against the earlier runs, where it was stored, and the exit code."""

    result: RunResult
    verdict: Verdict
    earlier: list[StressResult] = field(default_factory=list)
    #: The stored run's id; None when not stored (no history, no samples, or it could not take it).
    run_id: int | None = None
    #: Why the history could not store the run (None: stored, or nothing to store).
    save_error: str | None = None
    #: 0 passed, 1 throttled, 3 result errors, 4 aborted, 6 not saved, 7 inconclusive (desktop.stress.records).
    exit_code: int = 0


def read_earlier(db_path: Path | None, result: RunResult, warn: Callable[[str], None]) -> list[StressResult]:
    """The earlier runs on the GPU and workload of ``result``; none (and ``warn`` says why) when unreadable."""
    if db_path is None:
        return []
    uuid, _name, _driver = gpu_identity(result)
    try:
        return load_earlier(db_path, uuid, result.config.workload)
    except Exception as exc:  # a missing or locked history must not hide the verdict
        warn(f"cannot read earlier runs from {db_path}: {one_line(str(exc))}")
        return []


def calibration_clock(db_path: Path | None, result: RunResult) -> float | None:
    """The clock the run's GPU held at full load in its own newest usable stress run (its effective-load
    calibration, ``desktop.history.calibration``): the verdict's clock reference where there is one."""
    if db_path is None or result.gpu is None or result.config.device == "cpu":
        return None
    from desktop.history.calibration import load_calibration

    calibration = load_calibration(db_path, result.gpu)  # unreadable history: None (no such reference)
    return calibration.full_clock_mhz if calibration is not None else None


def save_safely(db_path: Path | None, result: RunResult, verdict: Verdict) -> tuple[int | None, str | None]:
    """(run id, None) once stored; (None, why) when the history cannot take it; (None, None): nothing to store."""
    if db_path is None or result.time_s.shape[0] == 0:
        return None, None
    try:
        return save_run(db_path, result, verdict), None
    except Exception as exc:  # any failure to store: the verdict is still given, and this says why
        return None, save_failure_reason(exc)


def gpu_specs(warn: Callable[[str], None]) -> list[GpuSpec]:
    """The GPU spec table for the verdict's dense peak; none (and a warning) when the user's copy is malformed."""
    from desktop.advice import load_gpu_specs

    try:
        return load_gpu_specs()
    except UserError as exc:
        warn(f"no dense peak in the verdict: {exc}")
        return []


def judge_and_save(db_path: Path | None, result: RunResult, *, warn: Callable[[str], None] = log.warning,
                   phase: Callable[[str], None] = lambda _phase: None,
                   regression_pct: float = Thresholds.stress_regression_pct) -> StressOutcome:
    """Judge ``result`` against the earlier runs on its GPU, store it, and say the exit code.

    ``regression_pct``: the user's ``[advisor] stress_regression_pct``, so the verdict's "below your
    baseline" and the advisor's stress-regression rule draw the line at the same drop."""
    phase("judging")
    earlier = read_earlier(db_path, result, warn)
    verdict = judge_run(result, earlier, regression_pct, gpu_specs(warn),
                        clock_calibration_mhz=calibration_clock(db_path, result))
    phase("saving")
    run_id, save_error = save_safely(db_path, result, verdict)
    code = exit_code(result, verdict)
    if save_error is not None and code != 3:  # wrong results still take precedence
        code = EXIT_NOT_SAVED
    return StressOutcome(result, verdict, earlier, run_id, save_error, code)


def list_runs(db_path: Path | None) -> list[StressResult]:
    """The newest stored runs, for the Stress page's table; none without a database."""
    if db_path is None or not db_path.exists():
        return []
    from desktop.history.store import HistoryStore

    with HistoryStore.open(db_path, readonly=True) as store:
        return store.stress_runs()[:TABLE_RUNS]


class StressSession:
    """One stress test: ``prepare`` (device, checks, runner), ``run_test`` (locks and the test; it blocks),
    ``finish`` (earlier runs, verdict, history, exit code); ``run`` does all three, ``run_next`` all three again
    on a new runner (one per firmware mode). ``cancel`` is thread-safe.

    ``make_runner`` builds the runner for the checked config (default: ``own_runner``; the window passes
    its own, on a reader of its machine). ``lock_simulated``: take the device lock on the simulated GPU
    too (the command line does; the window's simulated GPU is its own machine, which no other process loads).
    """

    def __init__(self, request: StressRequest, *, make_runner: RunnerFactory | None = None,
                 settings: StressSettings | None = None, lock_simulated: bool = True,
                 lock_folder: Path | None = None, regression_pct: float = Thresholds.stress_regression_pct,
                 on_progress: Callable[[Progress], None] | None = None,
                 on_start: Callable[[GpuInfo | None, float | None], None] | None = None,
                 on_phase: Callable[[str], None] | None = None,
                 on_warning: Callable[[str], None] | None = None) -> None:
        self.request = request
        self.make_runner: RunnerFactory = make_runner or (lambda config: own_runner(config, request.profiles))
        self.settings = settings
        #: How far below its baseline a run is called slower (the advisor's threshold, from Settings).
        self.regression_pct = regression_pct
        self.lock_simulated = lock_simulated
        self.lock_folder = lock_folder
        self.on_progress = on_progress
        self.on_start = on_start
        #: Called with "running", "judging", "saving" and "done" as the session gets there.
        self.on_phase = on_phase
        #: Called with a sentence for the user: a lock that cannot be made, earlier runs that cannot be read.
        self.on_warning = on_warning
        #: Where the test runs: resolved once, here (the default device asks NVML whether a GPU answers).
        self.device = resolve_device(request.device, request.gpu_index)
        self.runner: StressRunner | None = None
        self._lock: DeviceLock | None = None

    @classmethod
    def for_runner(cls, runner: StressRunner, *, db_path: Path | None = None, lock_simulated: bool = True,
                   lock_folder: Path | None = None) -> StressSession:
        """A session over a runner built elsewhere (the device is the runner's own)."""
        cfg = runner.config
        session = cls(StressRequest(workload=cfg.workload, device=cfg.device, gpu_index=cfg.gpu_index,
                                    dtype=cfg.dtype, duration_s=cfg.duration_s, guard_c=cfg.guard_c, db_path=db_path),
                      make_runner=lambda _config: runner, lock_simulated=lock_simulated, lock_folder=lock_folder)
        session.device = cfg.target
        session.runner = runner
        session.on_progress, session.on_start = runner.on_progress, runner.on_start  # its own, kept
        return session

    @property
    def config(self) -> StressConfig:
        """The checked config of this request on the resolved device."""
        return stress_config(self.request, self.device, self.settings)

    def _warn(self, text: str) -> None:
        if self.on_warning is not None:
            self.on_warning(text)
        else:
            log.warning("%s", text)

    def _phase(self, phase: str) -> None:
        if self.on_phase is not None:
            self.on_phase(phase)

    def _progress(self, progress: Progress) -> None:
        if self.on_progress is not None:
            self.on_progress(progress)

    def _started(self, info: GpuInfo | None, guard_c: float | None) -> None:
        if self.on_start is not None:
            self.on_start(info, guard_c)

    def prepare(self) -> StressRunner:
        """Check the request and build the runner (UserError, or the factory's ValueError: it cannot start)."""
        if self.runner is None:
            self.runner = self.make_runner(self.config)
        self.runner.on_progress = self._progress
        self.runner.on_start = self._started
        return self.runner

    @contextmanager
    def device_lock(self) -> Iterator[None]:
        """Hold the device's lock (DeviceBusy: another test runs on it); entered again inside, a no-op."""
        if self._lock is not None or (self.device.simulated and not self.lock_simulated):
            yield
            return
        lock = DeviceLock(self.device.name, self.lock_folder)
        try:
            lock.acquire()
        except OSError as exc:  # an unwritable data folder: run, but say no lock guards it
            self._warn(f"cannot create the device lock {lock.lock_path} ({exc.strerror or exc}); "
                       "another run on this device would not be refused")
            yield
            return
        self._lock = lock
        try:
            yield
        finally:
            self._lock = None
            lock.release()

    def run_test(self) -> RunResult:
        """Run the test under the device lock, taking the GPU's own lock once the runner knows it; blocks."""
        runner = self.prepare()
        with self.device_lock():
            claims = GpuClaims(self.lock_folder)
            if not self.device.simulated:  # the simulated GPU is this process's own: nobody else loads it
                runner.claim = claims.claim
            self._phase("running")
            try:
                return runner.run()
            finally:
                claims.release()

    def cancel(self) -> None:
        if self.runner is not None:
            self.runner.cancel()

    def finish(self, result: RunResult) -> StressOutcome:
        """Judge the run against the earlier ones, store it, and give the outcome with its exit code."""
        outcome = judge_and_save(self.request.db_path, result, warn=self._warn, phase=self._phase,
                                 regression_pct=self.regression_pct)
        self._phase("done")
        return outcome

    def run(self) -> StressOutcome:
        """The whole test: checks, locks, the run, the verdict, the history and the exit code."""
        with self.device_lock():
            self.prepare()
            result = self.run_test()
        return self.finish(result)

    def run_next(self) -> StressOutcome:
        """One more whole test of this request on a new runner from ``make_runner``: its own GPU locks, judged
        against the earlier runs (the one before it too) and stored as any. `rigscope stress --per-mode` runs
        one per firmware mode this way, inside the device lock it holds across them (``device_lock``)."""
        self.runner = None
        return self.run()

