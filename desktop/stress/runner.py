"""The stress runner: starts the workload child, samples telemetry meanwhile, and stops it on cancel or heat.

The workload runs in ``python -m desktop.stress.workloads`` (torch never enters this
process); its JSON lines are read on a thread. The parent samples the GPU once a second,
stops the child within a second of ``cancel()`` (terminate, then kill) and within two
seconds of the temperature guard being crossed. On CUDA it watches the GPU the child names in
its first record (desktop.stress.devices: CUDA's device order is not NVML's) and refuses to go
on when no NVML GPU matches it, or when an explicit guard is at or above shutdown (UserErrors).
For the simulated GPU there is no child: the runner sets the simulator's load and reads
throughput from its clock model, ticking through the one fixed-interval loop
(desktop.telemetry.loop.run_every) on the run's clock, which also lets tests run a ten-minute
test on an injected clock in milliseconds. In the window that is the window's own simulated machine (a second
reader of it, ``SimulatedBackend.view``), so the Dashboard, the alerts and the Processes page
see the test's load, heat and process. No Qt here: progress goes to a plain callback, which the stress session
(desktop/sessions/stress.py) passes on to the CLI and the GUI worker. What a run is (its config, clocks,
progress and result) lives in desktop.stress.run_model; its trace (the samples as arrays) in
desktop.stress.trace; the child's command line and records in desktop.stress.child_protocol; the
runner made per run over a backend of its own in desktop.stress.runner_factory.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from advisor.envelope import envelope_summary
from advisor.guard import GuardRefused, GuardSource, RunWatch, check_guard_above_current, guard_temperature
from desktop.errors import UserError
from desktop.stress.child import ChildReader, close_pipes, stop_child
from desktop.stress.child_protocol import child_command
from desktop.stress.cpu_noise import warmup_noise_pct
from desktop.stress.devices import CudaIdentity, DeviceMappingError, map_cuda_device
from desktop.stress.run_model import Clock, Progress, RealClock, RunResult, StressConfig
from desktop.stress.trace import TraceRecorder, child_trace
from desktop.telemetry.envelope import explain_gpu
from desktop.telemetry.host import cpu_use, other_cores
from desktop.telemetry.loop import run_every
from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading, GpuSample, Snapshot
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend

log = logging.getLogger(__name__)

#: How long the child may take to import torch and allocate before it counts as hung.
START_TIMEOUT_S = 120.0


#: How near the duration the simulated run's last sample may land and end it: clock times are epoch seconds,
#: whose float steps (about 0.24 µs today) can leave a last wait too small to move the clock at all.
DURATION_SLACK_S = 1e-3


class StressRunner:
    """Runs one stress test; ``run()`` blocks (call it off the GUI thread), ``cancel()`` is thread-safe."""

    def __init__(self, config: StressConfig, sampler: Sampler | None = None, *, clock: Clock | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 on_child_started: Callable[[int], None] | None = None,
                 on_start: Callable[[GpuInfo | None, float | None], None] | None = None,
                 owns_sampler: bool = False) -> None:
        self.config = config
        self.sampler = sampler
        #: Close the sampler (and its backend's NVML session) at the end of ``run()``.
        self.owns_sampler = owns_sampler
        self.clock: Clock = clock or RealClock()
        self.on_progress = on_progress
        self.on_child_started = on_child_started
        #: Called once with the GPU under test and the guard temperature (for chart limit lines).
        self.on_start = on_start
        #: Called with the NVML GPU as soon as it is known, before the samples are watched: the session
        #: takes its per-GPU lock there (raising DeviceBusy refuses the run and ends the child).
        self.claim: Callable[[GpuInfo], None] | None = None
        self._cancel = threading.Event()
        # Set by cancel() and by the child's exit: either wakes the sampling loop at once.
        self._wake = threading.Event()
        self._guard_c: float | None = config.guard_c
        #: Whether the first sample's temperature was checked against the guard.
        self._start_checked = False
        self.child_pid: int | None = None
        #: The GPU under test and its NVML index, once known (sim: at once; cuda: from the child).
        self.gpu: GpuInfo | None = None
        self._watch_index: int | None = None
        #: The unknown-temperature, HBM and foreign-process watch (advisor.guard).
        self.watch = RunWatch(own_pids={os.getpid()})
        #: Called with a warning for the user (foreign compute processes on the GPU at the start).
        self.on_warning: Callable[[str], None] | None = None

    def cancel(self) -> None:
        self._cancel.set()
        self._wake.set()

    @property
    def guard_c(self) -> float | None:
        return self._guard_c

    def _gpu_info(self) -> GpuInfo | None:
        if self.sampler is None:
            return None
        for info in self.sampler.gpu.devices():
            if info.index == self.config.gpu_index:
                return info
        return None

    def _arm(self, info: GpuInfo | None) -> None:
        """Watch ``info`` from now on: its samples, its guard (an explicit one checked against shutdown)."""
        cfg = self.config
        if info is not None and self.claim is not None:
            self.claim(info)
        try:
            self._guard_c = guard_temperature(info, cfg.guard_c, cfg.guard_offset_c, cfg.guard_absolute_c)
        except GuardRefused as exc:  # advisor's refusal, said to the user (exit 2)
            raise UserError(str(exc)) from None
        self.gpu = info
        self._watch_index = info.index if info is not None else None
        if self.on_start is not None:
            self.on_start(info, self._guard_c)

    def _watched_config(self) -> StressConfig:
        """The config, its target the NVML GPU watched: the one found for the child's CUDA device, whose ordinal
        (the device the child ran on, ``device``) is kept; the UUID and bus id are the watched GPU's own."""
        target = self.config.target
        if self.gpu is None or self.gpu.index == target.nvml_index:
            return self.config
        watched = replace(target, nvml_index=self.gpu.index, uuid=None, bus_id=None).known_as(self.gpu)
        return replace(self.config, target=watched)

    def _reading(self, snapshot: Snapshot | None) -> GpuReading | None:
        if snapshot is None or self._watch_index is None:
            return None
        reading = snapshot.reading(self._watch_index)
        return reading if reading is not None and reading.state is DeviceState.OK else None

    def _sample(self, snapshot: Snapshot | None) -> GpuSample | None:
        reading = self._reading(snapshot)
        return reading.sample if reading is not None else None

    def _limit_w(self, snapshot: Snapshot | None) -> float | None:
        reading = self._reading(snapshot)
        return reading.info.power_limit_enforced_w if reading is not None else None

    def _guard_stop(self, snapshot: Snapshot | None, now_s: float) -> str | None:
        """Why the guard stops the run now (GPU or HBM too hot, temperature unknown), or None; also
        notes foreign processes on the GPU."""
        if self._watch_index is None:
            return None  # the CPU, or a CUDA GPU not mapped yet: nothing watched
        if snapshot is not None and snapshot.processes_fresh:
            for label in self.watch.note_processes(snapshot.processes, self._watch_index):
                self._warn(f"another compute process is using this GPU ({label}): its load is measured too")
        reading = self._reading(snapshot)
        sample = reading.sample if reading is not None else None
        temperature_c = sample.temperature_c if sample is not None else None
        if reading is not None and self.config.guard_c is None and reading.info != self.gpu:
            # Limits re-read by the backend (T.Limit margin, AC/battery): the guard follows the current ones.
            cfg = self.config
            self.gpu = reading.info
            self._guard_c = guard_temperature(reading.info, None, cfg.guard_offset_c, cfg.guard_absolute_c)
        if not self._start_checked and temperature_c is not None:
            # A guard the GPU is already at would stop the run at its first sample: refuse it instead.
            self._start_checked = True
            cfg = self.config
            source: GuardSource = ("explicit" if cfg.guard_c is not None
                                   else "setting" if cfg.guard_absolute_c > 0 else "default")
            try:
                check_guard_above_current(self.gpu, self._guard_c, temperature_c, source=source)
            except GuardRefused as exc:
                raise UserError(str(exc)) from None
        if self._guard_c is not None and temperature_c is not None and temperature_c >= self._guard_c:
            return f"stopped by the temperature guard: {temperature_c:.0f} °C >= {self._guard_c:.0f} °C"
        hbm = self.watch.memory_too_hot(reading.memory_temperature_c if reading is not None else None, self.gpu)
        if hbm is not None:
            return hbm
        if self._guard_c is not None:
            return self.watch.unknown_temperature(temperature_c, now_s)
        return None

    def _warn(self, text: str) -> None:
        log.warning("%s", text)
        if self.on_warning is not None:
            self.on_warning(text)

    def _report(self, elapsed_s: float, throughput: float | None, unit: str, sample: GpuSample | None, *,
                errors: int = 0, checks: int = 0, phase: str = "running") -> None:
        if self.on_progress is None:
            return
        self.on_progress(Progress(elapsed_s, self.config.duration_s, throughput, unit,
                                  sample.temperature_c if sample else None, sample.sm_clock_mhz if sample else None,
                                  sample.power_w if sample else None, errors, checks, phase, self.clock.now()))

    def run(self) -> RunResult:
        """Run the test; raises a UserError (DeviceMappingError, the guard's refusal, a claim's DeviceBusy) when it
        must not start."""
        try:
            if self.config.device == "sim":
                info = self._gpu_info()
                self._arm(info)
                return self._run_simulated(info)
            if not self._maps_cuda():
                self._arm(None)  # the CPU, or CUDA without telemetry: nothing to watch
            return self._run_child()
        finally:
            if self.owns_sampler and self.sampler is not None:
                self.sampler.close()

    def _maps_cuda(self) -> bool:
        return self.sampler is not None and self.config.device.startswith("cuda")

    def _map_child_device(self, record: dict[str, Any]) -> None:
        """The child named its CUDA device: watch the NVML GPU with its UUID or PCI address (or refuse)."""
        assert self.sampler is not None
        identity = CudaIdentity.from_record(record)
        info = map_cuda_device(identity, self.sampler.gpu.devices())
        target = self.config.target
        if not target.is_gpu(info):
            raise DeviceMappingError(
                f"cuda:{identity.index} is NVML GPU {info.index} ({info.name}, {info.uuid or 'no UUID'}), not "
                f"{target.label()} that was picked ({target.uuid or target.bus_id}); CUDA_VISIBLE_DEVICES="
                f"{identity.visible_devices!r} renumbers CUDA's GPUs: the test is not run on the wrong one")
        self._arm(info)

    # --- simulated GPU ------------------------------------------------------------------

    def _run_simulated(self, info: GpuInfo | None) -> RunResult:
        sampler = self.sampler
        backend = sampler.gpu if sampler is not None else None
        manual = backend.manual if isinstance(backend, SimulatedBackend) else None
        if sampler is None or not isinstance(backend, SimulatedBackend) or manual is None:
            raise ValueError("device 'sim' needs a sampler over a SimulatedBackend with a manual load")
        cfg = self.config
        vram_mib = (info.vram_total_mib or 8192.0) * 0.8 if info else 8192.0
        recorder = TraceRecorder()
        started = self.clock.now()
        # No child here: the simulated test's process is this one (the window routes "End process" on
        # a simulated GPU to the simulator, which answers that Cancel stops the test).
        manual.set(cfg.gpu_index, 1.0, vram_mib, "rigscope-stress", os.getpid(),
                   command=f"rigscope stress --device sim --seconds {cfg.duration_s:g}", started_s=started)
        # The one fixed-interval loop (telemetry.loop.run_every) on the run's clock: the tick ends the run (guard,
        # duration: ``ended``), a cancel during the wait ends it before another sample; the last wait is cut short
        # so that the last sample lands on the duration.
        ended = threading.Event()
        status, message = "completed", "finished"
        elapsed_s = 0.0

        def tick() -> None:
            nonlocal elapsed_s, status, message
            snapshot = sampler.tick()
            sample = self._sample(snapshot)
            throughput = backend.throughput_tflops(cfg.gpu_index)
            now = self.clock.now()
            recorder.add(now, throughput, sample, self._limit_w(snapshot))
            elapsed_s = now - started
            self._report(elapsed_s, throughput, "TFLOP/s", sample)
            stop = self._guard_stop(snapshot, now)
            if stop is not None:
                status, message = "guard", stop
                ended.set()
            elif elapsed_s >= cfg.duration_s - DURATION_SLACK_S:
                ended.set()

        def wait(seconds: float) -> None:
            nonlocal status, message
            # At most one interval: the real run's clock is the wall clock, and a step back (NTP) must not
            # stop the samples, and the guard with them, for as long as the step.
            self.clock.sleep(min(seconds, cfg.interval_s), self._cancel)
            if self._cancel.is_set():
                status, message = "cancelled", "cancelled"
                ended.set()

        try:
            run_every(lambda: min(cfg.interval_s, cfg.duration_s - elapsed_s), tick, ended, clock=self.clock.now,
                      sleep=wait)
        finally:
            manual.set(cfg.gpu_index, 0.0)
        time_s, throughput_arr, columns = recorder.arrays()
        return RunResult(status, message, cfg, started, self.clock.now(), "TFLOP/s", cfg.dtype or "bf16",
                         time_s, throughput_arr, columns, gpu=info,
                         extra={"guard_c": self._guard_c, "simulated": True, **self.watch.extra(),
                                **self._envelope_extra(info)})

    def _envelope_extra(self, info: GpuInfo | None) -> dict[str, Any]:
        """The laptop's power envelope at the end of the run and the one line on the GPU's limit, kept with it."""
        if self.sampler is None or info is None:
            return {}
        latest = next((i for i in self.sampler.gpu.devices() if i.index == info.index), info)
        envelope = self.sampler.envelope.read()
        return envelope_summary(envelope, explain_gpu(latest, envelope))

    # --- child process ------------------------------------------------------------------

    def child_command(self) -> list[str]:
        return child_command(self.config, os.getpid())

    def _run_child(self) -> RunResult:
        cfg = self.config
        armed = not self._maps_cuda()
        # The child dies with the thread that started it (PR_SET_PDEATHSIG): start and wait on this same thread.
        # CUDA numbers GPUs fastest-first unless told otherwise; NVML (and the GPU picker) by PCI bus:
        # ask CUDA for the bus order so cuda:N is the GPU the user picked (the mapping still checks by UUID).
        env = {**os.environ}
        env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        proc = subprocess.Popen(self.child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, bufsize=1, env=env)
        self.child_pid = proc.pid
        self.watch.own_pids.add(proc.pid)
        if self.on_child_started is not None:
            self.on_child_started(proc.pid)
        reader = ChildReader(proc, self._wake)
        recorder = TraceRecorder()
        launched = self.clock.now()
        cpu_before = cpu_use(proc.pid) if cfg.device == "cpu" else None  # the others' load on its cores
        cpu_after, ended = None, launched  # the last reading while the child lived
        started: float | None = None
        status, message = "completed", "finished"
        try:
            while True:
                snapshot = self.sampler.tick() if self.sampler is not None else None
                sample = self._sample(snapshot)
                now = self.clock.now()
                if cpu_before is not None and (reading := cpu_use(proc.pid)) is not None:
                    cpu_after, ended = reading, now
                state = reader.snapshot()
                if not armed and state.device is not None:
                    self._map_child_device(state.device)  # raises when no NVML GPU matches
                    armed = True
                    sample = self._sample(snapshot)
                if state.started and started is None:
                    started = now
                if state.progress_seen:
                    recorder.add(now, state.throughput, sample, self._limit_w(snapshot))
                elapsed = now - started if started is not None else 0.0
                self._report(elapsed, state.throughput, state.unit, sample, errors=state.errors,
                             checks=state.checks, phase="running" if state.progress_seen else "starting")
                stop = self._guard_stop(snapshot, now)
                if stop is not None:
                    status, message = "guard", stop
                    break
                if reader.finished.is_set() or proc.poll() is not None:
                    proc.wait()
                    reader.finished.wait(2.0)
                    state = reader.snapshot()
                    if not armed and state.device is not None:
                        self._map_child_device(state.device)  # a refusal explains an early exit best
                    if state.error or not state.done:
                        status = "crashed"
                        message = state.error or (f"the workload exited with code {proc.returncode}: "
                                                  f"{reader.stderr_tail()}")
                    break
                if started is None and now - launched > START_TIMEOUT_S:
                    status, message = "crashed", "the workload did not start within two minutes"
                    break
                if started is not None and elapsed > cfg.duration_s + 30.0:
                    status, message = "crashed", "the workload stopped reporting"
                    break
                self.clock.sleep(cfg.interval_s, self._wake)
                if self._cancel.is_set():
                    status, message = "cancelled", "cancelled"
                    break
        finally:
            stop_child(proc)
            reader.close()
            close_pipes(proc)
        state = reader.snapshot()
        time_s, throughput_arr, columns = recorder.arrays()
        if self.sampler is None and started is not None:
            time_s, throughput_arr, columns = child_trace(started, reader.points())
        extra: dict[str, Any] = {"guard_c": self._guard_c, **state.start_info, **state.latency, **self.watch.extra()}
        if self.gpu is not None:
            extra["nvml_index"] = self.gpu.index
            extra.update(self._envelope_extra(self.gpu))
        if state.mismatch is not None:  # the wrong elements' count and output tiles of the last failed check
            extra["mismatch"] = state.mismatch
        if cfg.device == "cpu":  # the CPU shares its cores: its verdict reads drops against this (stress.cpu_noise)
            extra["warmup_noise_pct"] = warmup_noise_pct(time_s, throughput_arr)
            extra["other_cpu_cores"] = other_cores(cpu_before, cpu_after, ended - launched)
            extra["cpu_cores"] = cpu_before.cores if cpu_before is not None else None
        return RunResult(status, message, self._watched_config(), started if started is not None else launched,
                         self.clock.now(), state.unit, str(state.start_info.get("dtype", cfg.dtype or "")), time_s,
                         throughput_arr, columns, errors=state.errors, checks=state.checks, gpu=self.gpu, extra=extra)
