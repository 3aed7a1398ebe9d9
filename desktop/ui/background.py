"""Work off the GUI thread: the history reads and advice behind the Advisor, Costs and History pages.

Loading and summarising a stored week takes ~0.15 s, advice over weeks ~0.4 s, more on a slow
disk or a busy machine; on the GUI thread that would freeze the window. ``Loader`` runs the
function on a worker thread (SQLite connections are opened there, inside the function) and
hands the result or the error back on the GUI thread through a queued signal. Only the newest
request's answer is delivered: a week picked while another loads replaces it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)


class Loader(QObject):
    """One page's background loads; ``busy`` while the newest one runs."""

    #: request number, result, error text ("" when none)
    _finished = Signal(int, object, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._serial = 0
        self._callbacks: dict[int, tuple[Callable[[Any], None], Callable[[str], None]]] = {}
        self._finished.connect(self._deliver)

    @property
    def busy(self) -> bool:
        return self._serial in self._callbacks

    def run(self, work: Callable[[], Any], on_result: Callable[[Any], None], on_error: Callable[[str], None]) -> None:
        """Call ``work()`` on a worker thread, then ``on_result(value)`` or ``on_error(text)`` here."""
        self._serial += 1
        serial = self._serial
        self._callbacks[serial] = (on_result, on_error)
        threading.Thread(target=self._work, args=(serial, work), name="rigscope-loader", daemon=True).start()

    def _work(self, serial: int, work: Callable[[], Any]) -> None:
        try:
            result, error = work(), ""
        except Exception as exc:  # shown on the page, never a traceback in the user's face
            log.exception("loading in the background failed")
            result, error = None, f"{type(exc).__name__}: {exc}"
        try:
            self._finished.emit(serial, result, error)
        except RuntimeError:  # the page was closed meanwhile
            pass

    def _deliver(self, serial: int, result: object, error: str) -> None:
        on_result, on_error = self._callbacks.pop(serial)
        if serial != self._serial:
            return  # superseded by a newer request
        if error:
            on_error(error)
        else:
            on_result(result)
