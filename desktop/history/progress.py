"""A small progress bar on standard error, shown only when it is a terminal (large imports)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``update(done)`` redraws at most ten times a second; ``close`` ends the line."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(1, total)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self._drawn_at = 0.0
        self._shown = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn_at < 0.1 and done < self.total:
            return
        self._drawn_at = now
        share = min(1.0, done / self.total)
        filled = int(share * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {share * 100:5.1f}%")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
