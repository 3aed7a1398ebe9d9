"""One `rigscope run`: the wrapped job watched from start to end — sampling, its PIDs and GPUs, the guard, history.

``JobRun`` samples the GPUs itself every interval (the guard needs live temperatures, and the process
lists say which GPUs the job's PIDs use) and acts on the guard's decisions. Its parts: ``JobHistory``
(job_history.py) decides where the samples go: when `rigscope run` can take the history's writer lock it
writes the samples too, like the recorder; when the recorder holds it, the recorder's samples are the job's
telemetry and the job row, its events and its series (``JobRows``, job_rows.py) are short transactions beside
it. ``JobProcesses`` (job_processes.py) follows the job's processes, ``JobProgress`` (job_progress.py) reads its
rate, ``JobTrace`` (job_trace.py) keeps the samples the run took for its verdict. On the simulated GPU the
job is the load: full while it runs, idle (its memory still held) while the guard keeps it stopped.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from advisor.frame import held_most
from advisor.guard import GuardSettings, ThermalGuard
from advisor.progress import PROGRESS_ENV, JobSeries
from advisor.wording import count_text
from desktop.history.job_owner import this_process
from desktop.jobs.card import judge_job
from desktop.jobs.job_history import JobHistory
from desktop.jobs.job_processes import JobProcesses
from desktop.jobs.job_progress import JobProgress
from desktop.jobs.job_rows import JobRows
from desktop.jobs.job_trace import JobTrace
from desktop.jobs.model import GuardEvent, JobRecord
from desktop.jobs.wrap import Watchdog, WrappedJob
from desktop.telemetry.host import process_tree
from desktop.telemetry.loop import run_every
from desktop.telemetry.model import GpuInfo, Snapshot
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend

log = logging.getLogger(__name__)
#: VRAM the simulated GPU shows the job holding (a mid-size training run).
SIM_JOB_VRAM_MIB = 6144.0


class JobRun:
    """Runs ``argv`` wrapped, watches it every ``interval_s``, guards it, and keeps its record."""

    def __init__(self, argv: Sequence[str], sampler: Sampler, *, name: str | None = None,
                 history: JobHistory | None = None, gpu_index: int | None = None, guard: GuardSettings | None = None,
                 interval_s: float = 1.0, process_period_s: float = 5.0, progress_path: Path | None = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] | None = None,
                 wait: Callable[[float], None] | None = None,
                 say: Callable[[str], None] = log.warning, env: Mapping[str, str] | None = None,
                 use_pty: bool | None = None, stdout_fd: int = 1, stderr_fd: int = 2, watchdog: bool = True) -> None:
        self.argv = list(argv)
        self.sampler = sampler
        self.history = history
        self.gpu_index = gpu_index
        self.guard = ThermalGuard(guard, clock()) if guard is not None else None
        self.interval_s = interval_s
        self.process_period_s = process_period_s
        self.progress_path = progress_path
        self.clock = clock
        #: Times the job (its duration, from the wrapper's start and exit moments). A ``clock`` passed without it
        #: stands for both (a test's simulated seconds); the wall clock's default is the monotonic clock.
        self.monotonic = monotonic if monotonic is not None else (time.monotonic if clock is time.time else clock)
        self._wait = wait
        self.say = say
        self._env = env
        self._use_pty = use_pty
        self._fds = (stdout_fd, stderr_fd)
        self._want_watchdog = watchdog
        #: The job's rate: what its output and its progress file said.
        self.progress = JobProgress(progress_path)
        self.trace = JobTrace()
        #: The job's PIDs, those that left its session, and the GPUs they use (``processes.gpus``).
        self.processes = JobProcesses(say)
        self.events: list[GuardEvent] = []
        self.pauses: list[tuple[float, float]] = []
        self.record = JobRecord(job_id=0, name=name or _default_name(self.argv), argv=tuple(self.argv),
                                started_s=clock(), guard_c=guard.limit_c if guard else None,
                                source="simulated" if sampler.gpu.source.simulated else "nvml")
        self.job: WrappedJob | None = None
        self.watchdog: Watchdog | None = None
        self._tree_at: float | None = None
        #: The job's own rows in the history (none without one).
        self.rows = JobRows(history, say)
        self.infos: dict[int, GpuInfo] = {info.index: info for info in sampler.gpu.devices()}

    # --- start ---------------------------------------------------------------------------

    def start(self) -> None:
        env = dict(self._env) if self._env is not None else None
        if self.progress_path is not None:
            import os

            env = dict(os.environ) if env is None else env
            env[PROGRESS_ENV] = str(self.progress_path)
            # Inherited by every process the job starts, daemons too: how one that left the session is found.
            self.processes.marker = f"{PROGRESS_ENV}={self.progress_path}".encode("utf-8", "surrogateescape")
        started = self.clock()
        self.record = replace(self.record, started_s=started, owner=this_process(), last_seen_s=started)
        self.job = WrappedJob(self.argv, env=env, on_output=self.progress.on_output, use_pty=self._use_pty,
                              monotonic=self.monotonic, stdout_fd=self._fds[0], stderr_fd=self._fds[1])
        self.processes.pids[self.job.pid] = None
        if self._want_watchdog:
            try:
                with self.job.relay_lock:  # no relay may close between handing its descriptor over and this
                    self.watchdog = Watchdog(self.job)
                    self.job.on_reader_gone = self.watchdog.drop
            except OSError as exc:
                self.say(f"could not start the watchdog ({exc}): if rigscope is killed while the job is paused, "
                         f"continue it yourself with `kill -CONT -{self.job.pgid}`")
        self._set_sim_load(running=True)
        if self.history is not None and self.history.problem:
            self.say(f"the history cannot take the job ({self.history.problem}): the job runs and its card is "
                     "printed, but it is not stored")
            return  # no job row (its id would name nothing `rigscope jobs` can show): the samples, for the card
        self.rows.add(self.record)

    def _note_job_id(self) -> None:
        """``record.job_id`` once the history added the job's row (it is added off the job's path)."""
        if not self.record.job_id and (job_id := self.stored_job_id()):
            self.record = replace(self.record, job_id=job_id)

    def stored_job_id(self) -> int:
        """The job's id in the history once its row was added (0 before, or when it could not be)."""
        return self.rows.stored_job_id()

    # --- each tick -----------------------------------------------------------------------

    def step(self) -> Snapshot:
        """Sample, follow the job's processes, read its progress file, let the guard act."""
        assert self.job is not None
        snapshot = self.sampler.tick()
        if self.history is not None:
            self.history.submit(snapshot)
        self.trace.add(snapshot)
        now = snapshot.time_s
        if self._tree_at is None or now - self._tree_at >= self.process_period_s or snapshot.processes_fresh:
            self._tree_at = now
            self.processes.follow(self.job, snapshot, self.watchdog, guarded=self.guard is not None)
        self.progress.read_file(now)
        self._note_job_id()
        self.record = self.rows.heartbeat(self.record, now, self.interval_s)
        if self.guard is not None and self.job.poll() is None:
            self._guard(snapshot, now)
        return snapshot

    def guard_note(self) -> str | None:
        """For the card: the job's processes the guard could not stop, when there is a guard and were any."""
        return self.processes.guard_note() if self.guard is not None else None

    def watched_gpus(self) -> list[int]:
        """The GPUs the guard watches: --gpu, else the job's own, else every GPU (until its own are known)."""
        if self.gpu_index is not None:
            return [self.gpu_index]
        return list(self.processes.gpus) or sorted(self.infos)

    def _guard(self, snapshot: Snapshot, now: float) -> None:
        assert self.guard is not None and self.job is not None
        watched = set(self.watched_gpus())
        temps = [(r.sample.temperature_c, r.info.index) for r in snapshot.gpus
                 if r.info.index in watched and r.sample is not None and r.sample.temperature_c is not None]
        hottest = max(temps) if temps else None
        if self.guard.paused and self.job.stopped() is False:
            self._continued_elsewhere(now, hottest)
        action = self.guard.update(hottest[0] if hottest else None, now)
        if action is None:
            return
        temp, index = hottest if hottest else (None, None)
        if action == "pause":
            self.job.stop(self._windows_pids())
            self._set_sim_load(running=False)
            limit, resume = self.guard.settings.limit_c, self.guard.settings.resume_c
            self.say(f"paused the job: GPU {index} at {temp:.0f} °C reached the guard of {limit:g} °C; "
                     f"it continues at {resume:g} °C or below")
        else:
            self.job.cont(self._windows_pids())
            self._set_sim_load(running=True)
            self.pauses.append((self.events[-1].time_s if self.events else now, now))
            paused_from, paused_to = self.pauses[-1]
            self.say(f"continued the job: GPU {index} at {temp:.0f} °C (paused {paused_to - paused_from:.0f} s)")
        self._add_event(GuardEvent(now, action, temp, index))

    def _windows_pids(self) -> list[int]:
        """What Windows suspends (it has no sessions: the tree as psutil lists it now); nothing on POSIX."""
        import os

        return process_tree(self.job.pid) if os.name == "nt" and self.job is not None else []

    def _continued_elsewhere(self, now: float, hottest: tuple[float, int] | None) -> None:
        """The guard holds the job paused but /proc shows it running (a forwarded signal's SIGCONT, a
        ``kill -CONT`` from elsewhere): the pause ends here, and the guard decides afresh from this reading."""
        assert self.guard is not None
        self.guard.resumed_elsewhere(now)
        self._set_sim_load(running=True)
        self.pauses.append((self.events[-1].time_s if self.events else now, now))
        temp, index = hottest if hottest else (None, None)
        self.say("the job runs again though the guard had paused it (continued from outside the guard); "
                 "the guard takes it up from here")
        self._add_event(GuardEvent(now, "resume", temp, index))

    def _add_event(self, event: GuardEvent) -> None:
        assert self.guard is not None
        self.events.append(event)
        index = event.gpu_index
        self.rows.add_event(event, self.record.name, self.guard.settings.limit_c,
                            self.infos[index].uuid if index in self.infos else None)

    def _set_sim_load(self, running: bool, *, ended: bool = False) -> None:
        """The job's load on its simulated GPU: full while it runs, none while paused; its memory freed once
        it ended (so the other processes sharing the simulated machine no longer list it)."""
        backend = self.sampler.gpu
        manual = backend.manual if isinstance(backend, SimulatedBackend) else None
        if manual is None or self.job is None:
            return
        index = self.gpu_index if self.gpu_index is not None else 0
        # Its pid, name and command: the job's process, on every simulated machine of this user that shares the load.
        manual.set(index, 1.0 if running else 0.0, vram_mib=0.0 if ended else SIM_JOB_VRAM_MIB, name=self.record.name,
                   pid=self.job.pid,
                   command=shlex.join(self.argv), started_s=self.record.started_s)

    # --- the loop and the end ------------------------------------------------------------

    def forward(self, sig: int) -> None:
        """A signal for rigscope goes to the job; a stopped job is continued so that it can act on it."""
        if self.job is None:
            return
        self.job.send_signal(sig)
        if self.guard is not None and self.guard.paused:
            self.job.cont(self._windows_pids())  # the next step reads it back: the guard takes it up from there

    def hold(self, stop: bool) -> None:
        """Stop the job with rigscope (Ctrl+Z), or continue it when rigscope continues (unless the guard holds it)."""
        if self.job is None:
            return
        if stop:
            self.job.stop(self._windows_pids())
        elif self.guard is None or not self.guard.paused:
            self.job.cont(self._windows_pids())

    def run(self) -> int:
        """Start (unless started), watch until the job ends, finish; the job's exit code.

        A step every ``interval_s`` through ``run_every``, the recorder's loop: the wait after each step is the
        job's (``job.wait``: its end wakes it at once) or the injected ``wait``; once the job ended no step follows."""
        if self.job is None:
            self.start()
        assert self.job is not None
        job = self.job
        wait = self._wait if self._wait is not None else job.wait
        ended = threading.Event()

        def tick() -> None:
            if job.poll() is not None:
                ended.set()  # the loop stops here, before another step
            else:
                self.step()

        run_every(self.interval_s, tick, ended, sleep=wait)
        self.finish()
        return int(job.poll() or 0)

    def finish(self) -> JobRecord:
        """After the job ended: pass on its last output, close the watchdog, store the record and series."""
        assert self.job is not None
        code = self.job.poll()
        ended = self.job.finish_output()
        if self.watchdog is not None:
            # A process the job left (a daemon) still writes to its output: the watchdog passes it on from here.
            self.watchdog.close(done=True, relay=not ended)
        end = self.ended_at()
        self._set_sim_load(running=False, ended=True)
        if self.guard is not None and self.guard.paused and self.events:
            self.pauses.append((self.events[-1].time_s, end))
        if bad_lines := self.progress.finish(end):
            self.say(f"{count_text(bad_lines, 'line')} in {PROGRESS_ENV} were not "
                     '{"items": N, "unit": "..."} and were skipped')
        _series, unit = self.series()
        paused_s = self.guard.total_paused_s(end) if self.guard is not None else 0.0
        self._note_job_id()
        gpus = self.processes.gpus
        self.record = replace(self.record, ended_s=end, exit_code=code, pids=tuple(self.processes.pids),
                              gpu_uuids=tuple(u for u in gpus.values() if u), gpu_indices=tuple(gpus),
                              throughput_unit=unit, paused_s=paused_s, events=tuple(self.events))
        return self.record

    def ended_at(self) -> float:
        """When the job ended, on ``clock``: its start plus its duration as the wrapper timed it (the moment its
        process exited, whatever rigscope did after); now, where that moment is unknown."""
        duration = self.job.duration_s if self.job is not None else None
        if duration is None:
            return self.clock()
        return self.record.started_s + duration

    def series(self) -> tuple[JobSeries, str | None]:
        """The job's throughput at its samples' times, and its unit (None: it said no rate)."""
        return self.progress.series(self.trace.time_s, self.pauses)

    def primary_gpu(self) -> int | None:
        """The GPU the verdict is judged on: --gpu, else the job's first, else the only one."""
        if self.gpu_index is not None:
            return self.gpu_index
        if self.processes.gpus:
            return next(iter(self.processes.gpus))
        return next(iter(sorted(self.infos)), None)

    def verdict(self) -> dict[str, Any] | None:
        """The throttle verdict on the job's own throughput (the SM clock when it reported none), as a dict."""
        index = self.primary_gpu()
        if index is None:
            return None
        time_s, columns = self.trace.arrays(index)
        series, unit = self.series()
        info = self.infos.get(index)
        # The limit over most of the job (each sample's is in ``columns``), not the one read last.
        limit_w = held_most(columns["power_limit_w"]) if "power_limit_w" in columns else None
        if limit_w is None and info is not None:
            limit_w = info.power_limit_enforced_w
        return judge_job(time_s, columns, series.throughput if unit is not None else None, unit or "",
                         pauses=self.pauses, sm_clock_max_mhz=info.sm_clock_max_mhz if info else None,
                         power_limit_w=limit_w,
                         temp_slowdown_c=info.temp_slowdown_c if info else None).as_dict()

    def store_end(self, series: JobSeries) -> Future[None] | None:
        """The finished record and its series into the history (None without one), after the writes asked for
        before: not waited for here (``JobHistory.writes.settle`` does, time-boxed)."""
        return self.rows.store_end(self.record, series)

    def settle_history(self, series: JobSeries, deadline: float) -> None:
        """At the end: wait until ``deadline`` (``time.monotonic``) for the job's rows and samples to be written;
        what the history did not take by then (a write lock held elsewhere) is kept aside and said, not lost."""
        self.rows.settle(self.record, series, deadline, self.clock)


def _default_name(argv: Sequence[str]) -> str:
    """``python train.py --lr 3e-4`` -> ``train.py``, ``python -m pkg.train`` -> ``pkg.train``,
    ``python3 -c 'print(1)'`` -> itself (the code shortened to fit 60 characters), else the program."""
    from pathlib import PurePath

    program = PurePath(argv[0]).name if argv else "job"
    if not program.startswith("python") or len(argv) < 2:
        return program or "job"
    rest = list(argv[1:])
    for flag in ("-m", "-c"):
        if flag in rest:
            at = rest.index(flag)
            if at + 1 >= len(rest):
                return f"{program} {flag}"
            if flag == "-m":
                return rest[at + 1][:60]
            # "python3 -c 'print(1)'": the code's start, on one line ("python3 -c" named every such job alike).
            code = " ".join(rest[at + 1].split())
            room = 60 - len(program) - 6
            return f"{program} -c '{code if len(code) <= room else code[:room - 1] + '…'}'"
    scripts = [w for w in rest if not w.startswith("-")]
    return PurePath(scripts[0]).name if scripts else program
