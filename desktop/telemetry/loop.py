"""One fixed-interval loop (``run_every``) for everything that samples on a schedule.

The recorder, the Prometheus exporter's own sampler, `rigscope sample`, `rigscope run`'s job loop,
the window's sampler thread and the simulated stress run (on the run's own clock) all tick through it,
so they keep time the same way.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

#: ``interval_s``: a fixed number of seconds, or a callable read before each wait (the window's
#: sampler lets Settings change the interval while it runs).
Interval = float | Callable[[], float]


def run_every(interval_s: Interval, tick: Callable[[], object], stop: threading.Event, *,
              clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] | None = None,
              max_ticks: int | None = None) -> int:
    """Call ``tick()`` now and then every ``interval_s`` on a fixed schedule until ``stop`` is set;
    returns the number of ticks done.

    Tick *n* is due at ``start + n * interval_s``: the time a tick takes does not push the
    later ones back, so the loop does not drift. When a tick overruns (a slow disk, a stalled
    driver, a machine that slept), the slots it missed are skipped, never made up: the next
    tick is the next slot still ahead, so a late loop never bursts to catch up. The wait is
    ``stop.wait`` unless ``sleep`` is given, so setting ``stop`` ends the loop at once (within
    the tick in progress); a tick that sets ``stop`` is the last, with no wait after it, whatever
    ``sleep`` is. ``max_ticks`` ends it after that many ticks, without a last wait.
    Exceptions from ``tick`` propagate to the caller. ``clock`` and ``sleep`` are injectable
    for tests (a fake clock that ``sleep`` advances).
    """
    wait = stop.wait if sleep is None else sleep
    done = 0
    next_at = clock()
    while not stop.is_set() and (max_ticks is None or done < max_ticks):
        tick()
        done += 1
        if max_ticks is not None and done >= max_ticks:
            break
        step_s = interval_s() if callable(interval_s) else interval_s
        next_at += step_s
        now = clock()
        if next_at <= now and step_s > 0:  # overran: skip to the next slot still ahead
            next_at += (math.floor((now - next_at) / step_s) + 1) * step_s
        elif next_at <= now:  # an interval of 0: as fast as tick() allows
            next_at = now
        if next_at > now and not stop.is_set():  # a tick that set ``stop`` ends the loop without a wait
            wait(next_at - now)
    return done
