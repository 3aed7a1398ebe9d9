"""The live charts' storage: a preallocated float64 ring buffer of (time_s, *columns), read without copies.

``RingBuffer(capacity, names)``
    Preallocated float64 storage for ``capacity`` rows of (time_s, *names). ``append(time_s,
    values)`` writes one row (a missing value is NaN); ``view(name, start_s=None)`` returns a
    zero-copy contiguous view of the newest rows (oldest first), optionally only those with
    time >= ``start_s``; ``times(start_s=None)`` the matching time view. ``version`` grows on
    every append, so a painter can skip a frame in which nothing changed.

No Qt here: the plots in ``desktop/ui/widgets/charts.py`` draw from these views, the Stress page keeps
its run in one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class RingBuffer:
    """Fixed-size float64 history of (time_s, *columns), newest last, readable without copies.

    Each row is written twice, at ``slot`` and ``slot + capacity``, so the newest ``n`` rows
    are always one contiguous slice: ``setData`` gets a view, never a concatenation.
    """

    def __init__(self, capacity: int, names: Sequence[str]) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.names = tuple(names)
        self._index = {name: i + 1 for i, name in enumerate(self.names)}
        self._data = np.full((len(self.names) + 1, 2 * capacity), np.nan, dtype=np.float64)
        self._count = 0
        self.version = 0

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    def append(self, time_s: float, values: dict[str, float | None]) -> None:
        slot = self._count % self.capacity
        row = self._data[:, slot]
        row[0] = time_s
        for name, i in self._index.items():
            value = values.get(name)
            row[i] = math.nan if value is None else value
        self._data[:, slot + self.capacity] = row
        self._count += 1
        self.version += 1

    def _bounds(self) -> tuple[int, int]:
        n = len(self)
        if n == 0:
            return 0, 0
        end = (self._count - 1) % self.capacity + 1 + self.capacity
        return end - n, end

    def _first(self, start: int, end: int, start_s: float | None) -> int:
        if start_s is None or start == end:
            return start
        return start + int(np.searchsorted(self._data[0, start:end], start_s, side="left"))

    def times(self, start_s: float | None = None) -> FloatArray:
        start, end = self._bounds()
        return self._data[0, self._first(start, end, start_s):end]

    def view(self, name: str, start_s: float | None = None) -> FloatArray:
        start, end = self._bounds()
        return self._data[self._index[name], self._first(start, end, start_s):end]

    def oldest_s(self) -> float | None:
        start, end = self._bounds()
        return float(self._data[0, start]) if end > start else None

    def latest_s(self) -> float | None:
        start, end = self._bounds()
        return float(self._data[0, end - 1]) if end > start else None

    def clear(self) -> None:
        self._data.fill(np.nan)
        self._count = 0
        self.version += 1
