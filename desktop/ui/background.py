"""Work off the GUI thread: history reads, advice, stress-run records and service changes behind the pages.

Loading and summarising a stored week takes ~0.15 s, advice over weeks ~0.4 s, a 7-day
dashboard window or ``systemctl`` more, and a slow disk or a busy machine any of them much
more; on the GUI thread that would freeze the window. ``Loader`` runs the function on a
worker thread (SQLite connections are opened there, inside the function) and hands the
result or the error back on the GUI thread through a queued signal. Only the newest
request's answer is delivered: a week picked while another loads replaces it.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)

#: Every job still on a worker thread, for the tests' check that none is left behind.
_jobs: set[threading.Thread] = set()
_jobs_lock = threading.Lock()
_job_numbers = itertools.count(1)


def running_jobs() -> list[str]:
    """The thread names of the background jobs that have not finished yet (of every ``Loader``)."""
    with _jobs_lock:
        return sorted(t.name for t in _jobs if t.is_alive())


class Loader(QObject):
    """One page's background loads; ``busy`` while the newest one runs.

    ``one_at_a_time``: a request made while another runs waits for it (replacing any request
    already waiting) instead of running beside it; for work that shares one database
    connection, where a stale read would only slow the newest one down.
    """

    #: request number, result, error text ("" when none)
    _finished = Signal(int, object, str)

    def __init__(self, parent: QObject | None = None, *, name: str = "loader", one_at_a_time: bool = False) -> None:
        super().__init__(parent)
        self._name = f"rigscope-{name}"
        self._one_at_a_time = one_at_a_time
        self._serial = 0
        self._callbacks: dict[int, tuple[Callable[[Any], None], Callable[[str], None]]] = {}
        #: Started jobs whose answer has not come back yet, by request number.
        self._threads: dict[int, threading.Thread] = {}
        self._waiting: tuple[int, Callable[[], Any]] | None = None
        self._finished.connect(self._deliver)

    @property
    def busy(self) -> bool:
        return self._serial in self._callbacks

    def run(self, work: Callable[[], Any], on_result: Callable[[Any], None], on_error: Callable[[str], None]) -> None:
        """Call ``work()`` on a worker thread, then ``on_result(value)`` or ``on_error(text)`` here."""
        self._serial += 1
        serial = self._serial
        self._callbacks[serial] = (on_result, on_error)
        if self._one_at_a_time and self._threads:
            self._drop_waiting()
            self._waiting = (serial, work)
            return
        self._start(serial, work)

    def discard(self) -> None:
        """Forget the outstanding request: its answer, when it comes, is dropped; a waiting one never runs."""
        self._drop_waiting()
        self._serial += 1

    def wait(self, timeout_s: float) -> bool:
        """Block until this loader's started jobs end (at most ``timeout_s`` each); True when none is left."""
        self._drop_waiting()
        for thread in list(self._threads.values()):
            thread.join(timeout_s)
        return not any(t.is_alive() for t in self._threads.values())

    def _drop_waiting(self) -> None:
        if self._waiting is not None:
            self._callbacks.pop(self._waiting[0], None)
            self._waiting = None

    def _start(self, serial: int, work: Callable[[], Any]) -> None:
        thread = threading.Thread(target=self._work, args=(serial, work), name=f"{self._name}-{next(_job_numbers)}",
                                  daemon=True)
        self._threads[serial] = thread
        with _jobs_lock:
            _jobs.add(thread)
        thread.start()

    def _work(self, serial: int, work: Callable[[], Any]) -> None:
        try:
            try:
                result, error = work(), ""
            except Exception as exc:  # shown on the page, never a traceback in the user's face
                log.exception("loading in the background failed")
                result, error = None, f"{type(exc).__name__}: {exc}"
            try:
                self._finished.emit(serial, result, error)
            except RuntimeError:  # the page was closed meanwhile
                pass
        finally:
            with _jobs_lock:
                _jobs.discard(threading.current_thread())

    def _deliver(self, serial: int, result: object, error: str) -> None:
        self._threads.pop(serial, None)
        callbacks = self._callbacks.pop(serial, None)
        if self._waiting is not None and not self._threads:
            waiting_serial, work = self._waiting
            self._waiting = None
            self._start(waiting_serial, work)
        if callbacks is None or serial != self._serial:
            return  # superseded by a newer request, or discarded
        on_result, on_error = callbacks
        if error:
            on_error(error)
        else:
            on_result(result)
