"""The cells of an nvidia-smi CSV line: numbers with their units scaled to the stored ones, and local timestamps.

``nvsmi_csv`` reads the lines and their layout; this module reads one cell at a time.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

_NUMBER = re.compile(r"^([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(%|[A-Za-z]{1,3}(?:/s)?|°C)?$")
#: Units nvidia-smi prints after values; anything else after a number is not a reading.
_UNITS = frozenset(("", "%", "w", "mw", "kw", "mib", "gib", "kib", "mb", "gb", "kb", "mhz", "ghz", "khz", "c", "°c",
                    "j", "mj", "kb/s", "kib/s", "mb/s", "mib/s", "s", "ms", "us"))
_STAMP = re.compile(r"^(\d{4})[/-](\d{1,2})[/-](\d{1,2})[ T](\d{1,2}):(\d{2}):(\d{2}(?:\.\d+)?)$")
#: Beyond this a value is garbage (and would not fit the store's integer columns).
_LARGEST = 1e15
#: The sane span of a sample's time: nothing was logged by nvidia-smi before 1990; the end is now + 1 day.
EARLIEST_S = datetime(1990, 1, 1, tzinfo=UTC).timestamp()
_LATEST_AFTER_NOW_S = 86400.0
_MISSING = frozenset(("", "n/a", "not supported", "unknown", "unknown error", "insufficient permissions",
                      "gpu is lost", "requested functionality has been deprecated"))


class BadValue(ValueError):
    """A cell that cannot be read; the message becomes the skip reason."""


#: The stored unit of each quantity and each unit's factor to it (``300000 mW`` is 300 W, never 300,000 W).
_SCALES: dict[str, tuple[str, dict[str, float]]] = {
    "power": ("W", {"w": 1.0, "mw": 1e-3, "kw": 1e3}),
    "clock": ("MHz", {"mhz": 1.0, "ghz": 1e3, "khz": 1e-3}),
    "memory": ("MiB", {"mib": 1.0, "gib": 1024.0, "kib": 1 / 1024, "mb": 1e6 / (1 << 20), "gb": 1e9 / (1 << 20),
                       "kb": 1e3 / (1 << 20)}),
    "percent": ("%", {"%": 1.0}),
    "temperature": ("°C", {"c": 1.0, "°c": 1.0}),
}
#: GpuSample / GpuInfo field -> its quantity; power, clocks, memory and percentages cannot be negative.
_QUANTITY: dict[str, str] = {
    "power_w": "power", "power_instant_w": "power", "power_limit_enforced_w": "power",
    "power_limit_default_w": "power", "power_limit_min_w": "power", "power_limit_max_w": "power",
    "sm_clock_mhz": "clock", "mem_clock_mhz": "clock", "sm_clock_max_mhz": "clock", "mem_clock_max_mhz": "clock",
    "vram_used_mib": "memory", "vram_free_mib": "memory", "vram_total_mib": "memory",
    "utilization_gpu_pct": "percent", "utilization_mem_pct": "percent", "fan_pct": "percent",
    "temperature_c": "temperature", "memory_temperature_c": "temperature",
}
_NONNEGATIVE = frozenset(("power", "clock", "memory", "percent"))


def _unit_of(text: str) -> str:
    """The unit after a number (``"300000 mW"`` -> ``"mw"``), ``""`` for none."""
    match = _NUMBER.match(text.strip())
    return (match.group(2) or "").lower() if match else ""


def parse_reading(text: str, name: str, column: str, header_unit: str = "") -> float | None:
    """A cell of GpuSample/GpuInfo field ``name`` (log column ``column``) in the stored unit.

    The unit in the cell, else the one in the header (``power.draw [mW]``), is scaled to the stored
    one; a unit of another quantity is refused, and so is a negative power, clock, memory or percentage."""
    number = parse_number(text)
    quantity = _QUANTITY.get(name)
    if number is None or quantity is None:
        return number
    unit = _unit_of(text) or header_unit
    stored, factors = _SCALES[quantity]
    if unit:
        factor = factors.get(unit)
        if factor is None:
            raise BadValue(f"{column} {text.strip()!r}: unit not one of {quantity} (stored in {stored})")
        number *= factor
    if number < 0 and quantity in _NONNEGATIVE:
        raise BadValue(f"{column} {text.strip()!r}: a {quantity} cannot be negative")
    return number


def is_missing(text: str) -> bool:
    return text.startswith("[") or text.lower() in _MISSING


def parse_number(text: str) -> float | None:
    """``"45 %"``, ``"12.5 W"``, ``"0x0000000000000004"``, ``"P2"``, ``"Active"`` -> float; missing -> None."""
    text = text.strip()
    if is_missing(text):
        return None
    match = _NUMBER.match(text)
    if match and (match.group(2) or "").lower() in _UNITS:
        number = float(match.group(1))
        if not abs(number) < _LARGEST:
            raise BadValue(f"value out of range {text!r}")
        return number
    lower = text.lower()
    if lower.startswith("0x"):
        try:
            number = float(int(lower, 16))
        except ValueError:
            raise BadValue(f"bad hex value {text!r}") from None
        if number >= _LARGEST:
            raise BadValue(f"value out of range {text!r}")
        return number
    if lower in ("active", "enabled", "yes"):
        return 1.0
    if lower in ("not active", "disabled", "no"):
        return 0.0
    if len(lower) >= 2 and lower[0] == "p" and lower[1:].isdigit():
        return float(lower[1:])
    raise BadValue(f"bad value {text!r}")


#: A wall clock that goes back this far inside a repeated hour is its second pass (a DST fall-back).
_FOLD_BACK_S = 60.0


def _hour_bases(y: int, mo: int, d: int, h: int) -> tuple[float, float | None]:
    """The local hour's start; where the hour happens twice (a DST fall-back), also the second one's."""
    first = time.mktime((y, mo, d, h, 0, 0, 0, 0, 1))
    second = time.mktime((y, mo, d, h, 0, 0, 0, 0, 0))
    if second > first and all(time.localtime(t).tm_hour == h for t in (first, second)):
        return first, second
    return time.mktime((y, mo, d, h, 0, 0, 0, 0, -1)), None


class Clock:
    """nvidia-smi timestamps are local time; mktime once per hour keeps a long log fast.

    An hour the clock runs twice (a DST fall-back: 02:00-02:59 in Berlin on the last Sunday of
    October) is placed by the log's order: its stamps are the first pass until the wall clock goes
    back inside it, the second pass after. A log holding only one pass cannot say which; it is
    read as the first and said in ``folds``."""

    def __init__(self, now_s: float) -> None:
        self._hours: dict[tuple[int, int, int, int], tuple[float, float | None]] = {}
        self._latest_s = now_s + _LATEST_AFTER_NOW_S
        self._last_wall: tuple[tuple[int, int, int, int], float] | None = None
        self._second_pass: set[tuple[int, int, int, int]] = set()
        #: Repeated hours met in the log, and whether both passes were seen.
        self.folds: dict[tuple[int, int, int, int], bool] = {}

    def fold_notes(self) -> list[str]:
        return [f"{y:04d}/{mo:02d}/{d:02d} {h:02d}:00-{h:02d}:59 happened twice (a DST change) and the log shows "
                "only one pass: read as the first (summer time)" for (y, mo, d, h), both in self.folds.items()
                if not both]

    def _outside(self, text: str) -> BadValue:
        first = datetime.fromtimestamp(EARLIEST_S, UTC).date().isoformat()
        last = datetime.fromtimestamp(self._latest_s, UTC).date().isoformat()
        return BadValue(f"timestamp {text!r} is outside {first} .. {last} (a wrong clock?)")

    def parse(self, text: str) -> float:
        time_s = self._parse(text.strip())
        if not EARLIEST_S <= time_s <= self._latest_s:
            raise self._outside(text.strip())
        return time_s

    def _place(self, key: tuple[int, int, int, int], bases: tuple[float, float | None], within: float) -> float:
        """The instant ``within`` seconds into the local hour ``key``; in a repeated hour, the pass the log is in."""
        first, second = bases
        last, self._last_wall = self._last_wall, (key, within)
        if second is None:
            return first + within
        if key not in self._second_pass and last is not None and last[0] == key and within < last[1] - _FOLD_BACK_S:
            self._second_pass.add(key)
        self.folds[key] = key in self._second_pass
        return (second if key in self._second_pass else first) + within

    def _hour(self, text: str, key: tuple[int, int, int, int]) -> tuple[float, float | None]:
        """The local hour ``key``'s start(s), checked (a first look at each hour; cached by the caller)."""
        y, mo, d, h = key
        if not (1 <= mo <= 12 and 1 <= d <= 31 and h <= 23):
            raise BadValue(f"bad timestamp {text!r}")
        if not 1990 <= y <= 9998:
            raise self._outside(text)
        try:
            datetime(y, mo, d)
        except ValueError:  # mktime would quietly make 2024/02/30 into 1 March
            raise BadValue(f"bad timestamp {text!r}: no such date") from None
        try:
            return _hour_bases(y, mo, d, h)
        except (OverflowError, ValueError):
            raise BadValue(f"bad timestamp {text!r}") from None

    def _parse(self, text: str) -> float:
        match = _STAMP.match(text)
        if match:
            y, mo, d, h, mi = (int(match.group(i)) for i in range(1, 6))
            key = (y, mo, d, h)
            bases = self._hours.get(key)
            if bases is None:
                bases = self._hours[key] = self._hour(text, key)
            seconds = float(match.group(6))
            if mi > 59 or seconds >= 61:
                raise BadValue(f"bad timestamp {text!r}")
            return self._place(key, bases, mi * 60 + seconds)
        try:
            stamp = datetime.fromisoformat(text)
        except ValueError:
            try:
                stamp = datetime.strptime(text, "%a %b %d %H:%M:%S %Y")
            except ValueError:
                raise BadValue(f"bad timestamp {text!r}") from None
        try:
            return stamp.timestamp()
        except (OverflowError, OSError, ValueError):  # year 1 in a zone east of UTC, and the like
            raise self._outside(text) from None
