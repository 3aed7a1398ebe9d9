"""The wrapped job as a process: spawned in its own session and process group, its output passed through.

Standard input is the job's own (inherited, untouched). Standard output and error go through
rigscope, byte for byte, so their rates can be read on the way (advisor/progress.py), over a
pseudo-terminal where rigscope's own stream is a terminal, else a pipe (``desktop.jobs.streams``).

The job runs in a session of its own: Ctrl+C at the terminal reaches rigscope, which forwards
SIGINT (and SIGTERM, SIGHUP) to the job's whole process group, and stopping the group with
SIGSTOP stops DataLoader workers with their parent. Its exit code is the job's, 128 + N when it
died of signal N, as a shell reports it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from desktop.jobs.streams import Relay, open_relays
from desktop.telemetry import owned

#: ``on_output(stream, chunk, time_s)``: stream 1 is the job's standard output, 2 its standard error.
OutputHook = Callable[[int, bytes, float], None]
_CHUNK = 1 << 16
#: After the job exits, what it (or a child that kept its output open) still writes is passed on this long.
DRAIN_S = 2.0
#: Signals forwarded to the job's process group (those that exist here).
FORWARDED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
WATCHDOG = Path(__file__).with_name("watchdog.py")


def exit_code_of(returncode: int) -> int:
    """A Popen return code as a shell reports it: death by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class WrappedJob:
    """A started job: its pid and process group, its output relayed, signals and stop/continue for it."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 on_output: OutputHook | None = None, use_pty: bool | None = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 stdout_fd: int = 1, stderr_fd: int = 2) -> None:
        """``use_pty``: None decides from rigscope's own streams (a terminal gets a pty); False: pipes only.
        ``monotonic`` times the job (``started_mono``, ``exited_mono``: its duration), ``clock`` its output."""
        if not argv:
            raise ValueError("no command to run")
        self.argv = list(argv)
        self._on_output = on_output
        self._clock = clock
        wiring = open_relays(stdout_fd, stderr_fd, use_pty)
        relays, close_after = wiring.relays, wiring.close_after
        self.uses_pty = any(r.pty for r in relays)
        kwargs: dict[str, object] = {}
        if os.name == "posix":
            kwargs["start_new_session"] = True
        else:
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined,unused-ignore]
        # The job's own time: taken around the process (this, and the exit watcher's moment), never around
        # what rigscope does before or after it (a history write that waits for a lock held elsewhere).
        self._monotonic = monotonic
        self.started_mono: float = monotonic()
        try:
            self.process = subprocess.Popen(self.argv, stdin=None, stdout=wiring.child_out, stderr=wiring.child_err,
                                            env=dict(env) if env is not None else None, **kwargs)  # type: ignore[call-overload]
        except BaseException:
            for fd in close_after + [r.src for r in relays]:
                os.close(fd)
            raise
        finally:
            for fd in close_after:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.pid: int = self.process.pid
        #: The job's process group (its own session's): where forwarded signals go.
        self.pgid: int = self.pid
        #: The job's session, known by its first process's start time (Linux): what SIGSTOP/SIGCONT go to,
        #: member by member as they are now. None where /proc cannot be read (then: the process group).
        self.session: owned.Session | None = owned.Session(self.pid) if owned.supported() else None
        self.started_s = clock()
        self._relays = relays
        #: When the job's first process exited (``monotonic``), taken by the exit watcher as it happens;
        #: None while it runs (or where the moment could not be seen: then when ``poll`` first saw it).
        self.exited_mono: float | None = None
        self._exit_seen = threading.Event()
        threading.Thread(target=self._watch_exit, name="rigscope-run-exit", daemon=True).start()
        #: Called with a relay's source descriptor when its reader went away (the watchdog closes its copy).
        self.on_reader_gone: Callable[[int], None] | None = None
        #: Held while a relay closes early, and while its descriptors are handed to the watchdog.
        self.relay_lock = threading.Lock()
        self.hook_errors = 0
        #: The processes the last ``stop`` reached (their identities: read back, never signalled from here).
        self._held: list[owned.Member] = []
        self._threads = [threading.Thread(target=self._pump, args=(r,), name=f"rigscope-run-relay-{r.stream}",
                                          daemon=True) for r in relays]
        for thread in self._threads:
            thread.start()
        self._returncode: int | None = None

    # --- output --------------------------------------------------------------------------

    def _pump(self, relay: Relay) -> None:
        src, dst, hook, clock = relay.src, relay.dst, self._on_output, self._clock
        broken = False
        while True:
            try:
                data = os.read(src, _CHUNK)
            except OSError:  # EIO: the pty's last writer is gone
                break
            if not data:
                break
            if not broken:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(dst, view):]
                except BrokenPipeError:
                    # The reader went away (`| head -1`): the job's next write must fail as it would unwrapped,
                    # so this end closes (and the watchdog's copy: ``on_reader_gone``) instead of draining forever.
                    with self.relay_lock:
                        relay.closed = True
                        os.close(src)
                        if self.on_reader_gone is not None:
                            self.on_reader_gone(src)
                    break
                except OSError:  # our own output failed otherwise (a full disk): keep draining, the job must not block
                    broken = True
            if hook is not None:
                try:
                    hook(relay.stream, data, clock())
                except Exception as exc:  # a reader's bug must not stop the relay: the job would block on its output
                    self.hook_errors += 1
                    if self.hook_errors == 1:
                        import logging

                        logging.getLogger(__name__).warning("reading the job's output failed: %r", exc)

    def relay_descriptors(self) -> list[tuple[int, int]]:
        """(source, destination) of each open output relay: what the watchdog takes over if rigscope dies."""
        return [(r.src, r.dst) for r in self._relays if not r.closed]

    # --- signals -------------------------------------------------------------------------

    def send_signal(self, sig: int) -> None:
        """Forward ``sig`` to the job's process group (on Windows: Ctrl+Break for SIGINT, else terminate).

        Only while the job's first process is not reaped (its PID, and so its group's, cannot have been
        handed out again) and, where /proc says, is still the process we started."""
        if not self._leader_ours():
            return
        if os.name == "posix":
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                pass
        elif sig == signal.SIGINT:
            self.process.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined,unused-ignore]
        else:
            self.process.terminate()

    def _leader_ours(self) -> bool:
        if self._returncode is not None or self.process.returncode is not None:
            return False
        return self.session is None or self.session.ours()

    def stop(self, pids: Sequence[int] = ()) -> list[int]:
        """Stop the job: SIGSTOP to each live member of its session, checked as it is sent (no /proc: its
        process group; Windows: suspend ``pids``). The PIDs stopped (empty without /proc)."""
        return self._stop_or_continue(True, pids)

    def cont(self, pids: Sequence[int] = ()) -> list[int]:
        """Continue what ``stop`` stopped: SIGCONT to each live member of the job's session that is stopped."""
        return self._stop_or_continue(False, pids)

    def stopped(self) -> bool | None:
        """Whether the job is stopped now, read from /proc: every process the last ``stop`` reached that is still
        that process is stopped (or stopping); without one, every member. None: unknown (no /proc, ended).

        Only those it reached: a member that could not be signalled (another user's, a setuid helper) would
        otherwise read as "continued from elsewhere" at every look."""
        if self.session is None or self.poll() is not None:
            return None
        if not self._held:
            return self.session.stopped()
        proc = self.session.proc
        alive = [now for m in self._held
                 if (now := owned.read_stat(m.pid, proc)) is not None and now.start_ticks == m.start_ticks]
        return all(owned.is_stopped(m, proc) for m in alive) if alive else self.session.stopped()

    def members(self) -> list[owned.Member]:
        """The live members of the job's session now (empty when it ended or /proc cannot be read)."""
        if self.session is None or not self._leader_ours():
            return []
        return self.session.members()

    def _stop_or_continue(self, stop: bool, pids: Sequence[int]) -> list[int]:
        if self.poll() is not None:
            return []
        if os.name != "posix":
            from desktop.telemetry.host import resume_processes, suspend_processes

            (suspend_processes if stop else resume_processes)([self.pid, *pids])
            return []
        sig = signal.SIGSTOP if stop else signal.SIGCONT
        if self.session is None:  # no /proc (macOS): the group, whose id is ours while the leader is unreaped
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                pass
            return []
        if not self.session.ours():
            return []
        proc = self.session.proc
        skip = None if stop else (lambda m: not owned.is_stopped(m, proc))
        sent = self.session.signal(sig, skip=skip)
        self._held = sent if stop else []
        return [m.pid for m in sent]

    # --- life ----------------------------------------------------------------------------

    def _watch_exit(self) -> None:
        """Take the moment the job's first process exits, as it exits, without reaping it (``WNOWAIT``: its PID,
        and so its group's, stays ours until ``poll`` reaps it): the job's end does not wait for rigscope's loop."""
        try:
            waitid = getattr(os, "waitid", None)
            if waitid is not None:
                waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            else:  # Windows (no reaping there: the handle stays valid), or a POSIX without waitid
                self.process.wait()
            self.exited_mono = self._monotonic()
        except OSError:  # ECHILD: reaped elsewhere first; ``poll`` takes the moment it saw the end
            pass
        finally:
            self._exit_seen.set()

    def poll(self) -> int | None:
        """The job's exit code (128 + N for signal N) once it ended, else None."""
        if self._returncode is None and self._exit_seen.is_set():
            rc = self.process.poll()
            if rc is not None:
                self._returncode = exit_code_of(rc)
                if self.exited_mono is None:
                    self.exited_mono = self._monotonic()
        return self._returncode

    def wait(self, timeout_s: float | None = None) -> int | None:
        if not self._exit_seen.wait(timeout_s):
            return None
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return self.poll()

    @property
    def duration_s(self) -> float | None:
        """Seconds from the job's start to its first process's exit (``monotonic``); None while it runs."""
        return None if self.exited_mono is None else max(0.0, self.exited_mono - self.started_mono)

    def finish_output(self, drain_s: float = DRAIN_S) -> bool:
        """After the job ended: wait for its output to be passed on (at most ``drain_s`` for what a child that
        outlived it keeps open); True when every stream ended. The relay descriptors are closed when it did."""
        deadline = time.monotonic() + drain_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        done = not any(t.is_alive() for t in self._threads)
        if done:
            for relay in self._relays:
                if not relay.closed:
                    relay.closed = True
                    try:
                        os.close(relay.src)
                    except OSError:
                        pass
        return done


def spawn_watchdog(job: WrappedJob) -> subprocess.Popen[bytes]:
    """Start the watchdog (desktop/jobs/watchdog.py) for ``job``: it continues the job and takes over its
    output if rigscope ends without saying ``done``. Its own session: Ctrl+C and a closed terminal leave it."""
    argv = [sys.executable, "-I", "-S", str(WATCHDOG), "--pgid", str(job.pgid)]
    if job.session is not None:
        argv += ["--leader", f"{job.session.sid}:{job.session.leader_start_ticks}"]
    pass_fds: tuple[int, ...] = ()
    kwargs: dict[str, object] = {}
    if os.name == "posix":
        for src, dst in job.relay_descriptors():
            argv += ["--relay", f"{src}:{dst}"]
        pass_fds = tuple(src for src, _ in job.relay_descriptors())
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined,unused-ignore]
    process: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
        argv, stdin=subprocess.PIPE, stdout=None, stderr=None, pass_fds=pass_fds, **kwargs)
    return process


class Watchdog:
    """rigscope's end of the watchdog's pipe: ``done`` at a normal end, ``relay`` when what the job left behind
    still writes, ``drop`` for an output whose reader went away; the job's PIDs on Windows only."""

    def __init__(self, job: WrappedJob) -> None:
        self.process = spawn_watchdog(job)

    def tell_pids(self, pids: Sequence[int]) -> None:
        """Windows only (no sessions there): the PIDs to resume if rigscope dies."""
        if os.name == "nt":
            self._say("pids " + " ".join(str(p) for p in pids))

    def drop(self, src: int) -> None:
        self._say(f"drop {src}")

    def close(self, done: bool = True, relay: bool = False) -> None:
        """End the watchdog: ``done`` (the job ended) lets it go quietly, else it resumes the job first;
        ``relay`` (the job ended, a process it left keeps its output open): it passes that output on until it
        ends, so that process is not killed by a broken pipe when rigscope exits."""
        if relay:
            # The pipe stays open until rigscope's own end (the kernel closes it): the watchdog starts reading the
            # job's output only then, so rigscope's relay and the watchdog never read it at the same time (their
            # chunks could pass each other). It lives as long as that output: not ours to wait for.
            self._say("relay")
            return
        if done:
            self._say("done")
        stdin = self.process.stdin
        if stdin is not None:
            try:
                stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            pass  # still relaying for a job that outlived us: it ends with that job

    def _say(self, line: str) -> None:
        stdin = self.process.stdin
        if stdin is None:
            return
        try:
            stdin.write(line.encode() + b"\n")
            stdin.flush()
        except OSError:
            pass
