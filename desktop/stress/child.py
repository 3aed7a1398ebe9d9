"""The stress child's side of the pipe, seen from the parent: reading its JSON lines and stopping it.

Two reader threads (stdout records, the tail of stderr) keep the parent's sampling loop
free; ``stop_child`` terminates and then kills, so the child and its GPU memory are gone
when it returns.
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: After terminate(), how long to wait before kill().
TERMINATE_GRACE_S = 0.4


def stop_child(proc: subprocess.Popen[str]) -> None:
    """Terminate, then kill: the child is gone (and its GPU memory freed) when this returns."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(TERMINATE_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def close_pipes(proc: subprocess.Popen[str]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


@dataclass
class ChildState:
    started: bool = False
    progress_seen: bool = False
    done: bool = False
    throughput: float | None = None
    unit: str = ""
    errors: int = 0
    checks: int = 0
    error: str | None = None
    start_info: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    #: The CUDA device's identity (the child's first record on CUDA), to find its NVML GPU.
    device: dict[str, Any] | None = None
    #: The last check that found wrong elements: their count and the output tiles they fall in.
    mismatch: dict[str, Any] | None = None


class ChildReader:
    """Reads the child's JSON lines (and the tail of its stderr) on two threads."""

    def __init__(self, proc: subprocess.Popen[str], wake: threading.Event) -> None:
        self._proc = proc
        self._wake = wake
        self._points: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._state = ChildState()
        self._stderr: list[str] = []
        self.finished = threading.Event()
        self._threads = [threading.Thread(target=self._read_stdout, name="stress-stdout", daemon=True),
                         threading.Thread(target=self._read_stderr, name="stress-stderr", daemon=True)]
        for thread in self._threads:
            thread.start()

    def snapshot(self) -> ChildState:
        with self._lock:
            s = self._state
            return ChildState(s.started, s.progress_seen, s.done, s.throughput, s.unit, s.errors, s.checks,
                               s.error, dict(s.start_info), dict(s.latency),
                               device=dict(s.device) if s.device is not None else None,
                               mismatch=dict(s.mismatch) if s.mismatch is not None else None)

    def points(self) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._points)

    def stderr_tail(self) -> str:
        with self._lock:
            return "".join(self._stderr)[-2000:].strip()

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        try:
            for line in self._proc.stdout:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    log.debug("stress child said: %s", line.rstrip())
                    continue
                self._apply(record)
        except (OSError, ValueError):
            pass
        finally:
            self.finished.set()
            self._wake.set()

    def _apply(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        with self._lock:
            s = self._state
            if kind == "device":
                s.device = {k: v for k, v in record.items() if k != "type"}
            elif kind == "start":
                s.started = True
                s.unit = str(record.get("unit", ""))
                s.start_info = {k: v for k, v in record.items() if k != "type"}
            elif kind in ("progress", "done"):
                if kind == "progress":
                    s.progress_seen = True
                    s.throughput = float(record["throughput"])
                    self._points.append((float(record.get("t", 0.0)), s.throughput))
                else:
                    s.done = True
                s.errors = int(record.get("errors", s.errors))
                s.checks = int(record.get("checks", s.checks))
                s.latency.update({k: float(v) for k, v in record.items() if k.endswith("_ms")})
                if isinstance(record.get("mismatch"), dict):
                    s.mismatch = record["mismatch"]
            elif kind == "error":
                s.error = str(record.get("message", "the workload failed"))

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        try:
            for line in self._proc.stderr:
                with self._lock:
                    self._stderr.append(line)
                    del self._stderr[:-50]
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        for thread in self._threads:
            thread.join(timeout=2.0)
