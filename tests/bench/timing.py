"""The benchmarks' one timer: the median wall time of a few calls (printed beside budgets, never asserted)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_s(fn: Callable[[], object], repeat: int = 5) -> float:
    """The median of ``repeat`` timed calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
