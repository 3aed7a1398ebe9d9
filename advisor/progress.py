"""The job's own throughput, read without touching its code: tqdm-style rates in its output, or JSON lines
it appends to the file named in ``RIGSCOPE_PROGRESS``. Pure: bytes and times in, readings out.

tqdm redraws its bar with ``\\r``; the rate is its last field (``[00:05<00:10, 9.85it/s]``, or
``3.21s/it`` when an item takes longer than a second, ``1.23kit/s`` with ``unit_scale``). Only the
newest rate in each chunk of output matters (the job is sampled about once a second), so a chunk is
searched from its end for the last ``/s`` or ``s/`` that reads as a rate: the cost is a memory scan,
whatever the job prints.

The protocol: each line ``{"items": 512, "unit": "samples"}`` says 512 more items were done (a delta
since the line before); an optional ``"time"`` (epoch seconds) says when, else the time it was read.

Whatever the job writes, the run goes on: a line longer than ``MAX_LINE_BYTES`` or nested deeper than
``MAX_DEPTH``, a number of more than ``MAX_NUMBER_CHARS`` characters, not finite or out of range (items
from 0 to ``MAX_ITEMS``, a time within ``MAX_CLOCK_SKEW_S`` of its reading), a unit that is not a short
string: the line is skipped and counted (``bad_lines``), never parsed further. A rate read from the
output is taken only up to ``MAX_RATE`` items per second.

The series it makes (``JobSeries``) is what the history stores with the job (desktop/history/job_model.py
imports it from here).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: The environment variable that names the protocol file for the child.
PROGRESS_ENV = "RIGSCOPE_PROGRESS"
#: A unit/s anywhere in a line is taken only for these units (a tqdm bar's bracket takes any unit):
#: "12 MB/s" in a download log is not the job's throughput.
KNOWN_UNITS = frozenset({
    "it", "its", "item", "items", "sample", "samples", "tok", "toks", "token", "tokens", "img", "imgs", "image",
    "images", "ex", "example", "examples", "batch", "batches", "step", "steps", "seq", "seqs", "sequence",
    "sequences", "frame", "frames", "doc", "docs", "q", "req", "reqs", "query", "queries",
})
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_NUMBER = rb"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)"
#: "<number><prefix?><unit>/s" ending at the match end (searched in a short window before "/s").
_RATE = re.compile(_NUMBER + rb"\s?([kKMGT]?)([A-Za-z_]{1,24})/s$")
#: The number before "s/<unit>" (tqdm's slow form, seconds per item) and the unit after it.
_NUMBER_END = re.compile(_NUMBER + rb"$")
_UNIT = re.compile(rb"[A-Za-z_]{1,24}")
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
_WINDOW = 48
#: A partial line kept between chunks: longer ones are not progress lines.
_MAX_TAIL = 4096
#: At most this many "/s" occurrences are tried per chunk (from its end).
_MAX_TRIES = 16
#: The protocol's limits: a line longer, deeper, with a longer number or a number out of range is skipped.
MAX_LINE_BYTES = 4096
MAX_DEPTH = 4
MAX_NUMBER_CHARS = 32
MAX_ITEMS = 1e15
MAX_CLOCK_SKEW_S = 86400.0
#: A rate over this is not a job's speed (a misread number, or 1e-300 s/it).
MAX_RATE = 1e12


@dataclass(slots=True)
class JobSeries:
    """The job's own throughput over time (items per second in ``JobRecord.throughput_unit``)."""

    time_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    throughput: FloatArray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True, slots=True)
class RateReading:
    """One rate read from the job's output: ``rate`` items per second of ``unit``."""

    time_s: float
    rate: float
    unit: str


def _unit_name(unit: str) -> str:
    return "it" if unit in ("it", "its") else unit


def _is_boundary(byte: int) -> bool:
    return not (48 <= byte <= 57 or 65 <= byte <= 90 or 97 <= byte <= 122 or byte in (46, 95))


def _tqdm_bracket(text: bytes, start: int) -> bool:
    """Whether the rate at ``start`` is the last field of a tqdm bracket: ``[elapsed<left, RATE``."""
    head = text[max(0, start - 40):start]
    return re.search(rb"\[[\d:]+<[\d:?]*,\s*$", head) is not None


def rate_in(text: bytes) -> tuple[float, str] | None:
    """The last rate in ``text`` (one chunk of output, any lines), as (items per second, unit); None when none."""
    per_second = _last_rate(text)
    per_item = _last_inverse(text, per_second[0] if per_second else -1)
    best = per_item or per_second
    return None if best is None else (best[1], best[2])


def _accept(text: bytes, start: int, unit: str) -> bool:
    """A number starting at ``start`` is a whole token, and its unit is known or it sits in a tqdm bracket."""
    if start > 0 and not _is_boundary(text[start - 1]):
        return False
    return unit in KNOWN_UNITS or _tqdm_bracket(text, start)


def _last_rate(text: bytes) -> tuple[int, float, str] | None:
    """(position, rate, unit) of the last "<n><unit>/s"."""
    end = len(text)
    for _ in range(_MAX_TRIES):
        pos = text.rfind(b"/s", 0, end)
        if pos < 0:
            return None
        end = pos
        if pos + 2 < len(text) and not _is_boundary(text[pos + 2]):
            continue
        low = max(0, pos - _WINDOW)
        match = _RATE.search(text, low, pos + 2)
        if match is None:
            continue
        unit = match.group(3).decode("ascii")
        if not _accept(text, match.start(), unit):
            continue
        rate = float(match.group(1)) * _PREFIX[match.group(2).decode("ascii")]
        if _rate_ok(rate):
            return pos, rate, _unit_name(unit)
    return None


def _last_inverse(text: bytes, after: int) -> tuple[int, float, str] | None:
    """(position, rate, unit) of the last "<n>s/<unit>" past ``after``."""
    end = len(text)
    for _ in range(_MAX_TRIES):
        pos = text.rfind(b"s/", 0, end)
        if pos <= after:
            return None
        end = pos
        number = _NUMBER_END.search(text, max(0, pos - _WINDOW), pos)
        unit_match = _UNIT.match(text, pos + 2)
        if number is None or unit_match is None:
            continue
        if unit_match.end() < len(text) and not _is_boundary(text[unit_match.end()]):
            continue
        unit = unit_match.group(0).decode("ascii")
        if not _accept(text, number.start(), unit):
            continue
        seconds = float(number.group(1))
        if seconds > 0 and _rate_ok(1.0 / seconds):
            return pos, 1.0 / seconds, _unit_name(unit)
    return None


def _rate_ok(rate: float) -> bool:
    return math.isfinite(rate) and 0.0 <= rate <= MAX_RATE


class OutputProgress:
    """Reads rates from the job's output as it passes through, chunk by chunk, split anywhere."""

    def __init__(self) -> None:
        self._tail = b""
        self.readings: list[RateReading] = []

    def feed(self, chunk: bytes, time_s: float) -> None:
        """Parse what ``chunk`` completes (lines end at ``\\r`` or ``\\n``); keep the unfinished rest."""
        cut = max(chunk.rfind(b"\r"), chunk.rfind(b"\n"))
        if cut < 0:
            self._tail = (self._tail + chunk)[-_MAX_TAIL:] if len(self._tail) + len(chunk) <= _MAX_TAIL else b""
            return
        done = self._tail + chunk[:cut] if self._tail else chunk[:cut]
        rest = chunk[cut + 1:]
        self._tail = rest if len(rest) <= _MAX_TAIL else b""
        self._read(done, time_s)

    def finish(self, time_s: float) -> None:
        """The output ended: what was left unfinished counts too (a last bar without a newline)."""
        if self._tail:
            self._read(self._tail, time_s)
            self._tail = b""

    def _read(self, text: bytes, time_s: float) -> None:
        if b"\x1b" in text[-512:]:
            text = _ANSI.sub(b"", text[-4096:])
        found = rate_in(text)
        if found is not None:
            self.readings.append(RateReading(time_s, found[0], found[1]))


@dataclass(frozen=True, slots=True)
class ItemsReading:
    """The protocol: ``items`` more were done at ``time_s``."""

    time_s: float
    items: float
    unit: str


@dataclass
class ProtocolProgress:
    """Reads the JSON lines a job appends to its ``RIGSCOPE_PROGRESS`` file; call ``feed`` with what is new."""

    readings: list[ItemsReading] = field(default_factory=list)
    #: Lines that were not a progress record (said once by the caller, not fatal).
    bad_lines: int = 0
    _tail: bytes = b""
    #: The line being read is already over the limit: skipped up to its end.
    _overlong: bool = False

    def feed(self, data: bytes, time_s: float) -> None:
        lines = data.split(b"\n")
        rest = lines.pop()
        for line in lines:
            if self._overlong:
                self._overlong = False
                self.bad_lines += 1
                continue
            self._line(self._tail + line if self._tail else line, time_s)
            self._tail = b""
        if not self._overlong:
            self._tail += rest
            if len(self._tail) > MAX_LINE_BYTES:
                self._tail, self._overlong = b"", True

    def finish(self, time_s: float) -> None:
        if self._overlong:
            self.bad_lines += 1
        elif self._tail.strip():
            self._line(self._tail, time_s)
        self._tail, self._overlong = b"", False

    def _line(self, line: bytes, time_s: float) -> None:
        if not line.strip():
            return
        reading = parse_protocol_line(line, time_s)
        if reading is None:
            self.bad_lines += 1
            return
        if self.readings and reading.time_s < self.readings[-1].time_s:  # the series needs times in order
            reading = ItemsReading(self.readings[-1].time_s, reading.items, reading.unit)
        self.readings.append(reading)


def parse_protocol_line(line: bytes, time_s: float) -> ItemsReading | None:
    """One protocol line read at ``time_s``, or None when it is not a progress record within the limits."""
    if len(line) > MAX_LINE_BYTES or _too_deep(line):
        return None
    try:
        record = json.loads(line, parse_int=_number, parse_float=_number, parse_constant=_no_constant)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    items = _finite(record.get("items"))
    when = _finite(record.get("time", time_s))
    unit = record.get("unit") or "items"
    if items is None or when is None or not isinstance(unit, str):
        return None
    if not (0.0 <= items <= MAX_ITEMS and abs(when - time_s) <= MAX_CLOCK_SKEW_S):
        return None
    return ItemsReading(when, items, unit[:24])


def _too_deep(line: bytes) -> bool:
    """Nested deeper than ``MAX_DEPTH`` (brackets inside strings do not count)."""
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _number(text: str) -> float:
    """A JSON number as a float; a longer one than ``MAX_NUMBER_CHARS`` is refused before any conversion."""
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError("number too long")
    return float(text)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _finite(value: object) -> float | None:
    """A finite number from a JSON value: a number, or a short numeric string ("1e3"); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if len(value) > MAX_NUMBER_CHARS:
            return None
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def throughput_series(sample_times_s: Iterable[float], rates: list[RateReading], items: list[ItemsReading],
                      paused: Iterable[tuple[float, float]] = ()) -> tuple[JobSeries, str | None]:
    """The job's throughput at each sample time, and its unit ("samples/s"); (empty series, None) when none was read.

    The protocol wins over rates read from the output when both exist. A sample's value is items done since the
    previous sample over the time between (protocol), or the newest rate read up to it (output); NaN before the
    first reading, while the job was paused (``paused``: (from, to) spans) and for a stale rate (none read for
    30 s: the job stopped printing, its speed is unknown).
    """
    times = np.asarray(list(sample_times_s), dtype=np.float64)
    values = np.full(times.shape, np.nan)
    unit: str | None = None
    if items:
        unit = f"{items[-1].unit}/s"
        when = np.array([r.time_s for r in items])
        done = np.cumsum([r.items for r in items])
        cum = np.concatenate(([0.0], done))
        idx = np.searchsorted(when, times, side="right")  # items read up to each sample
        counted = cum[idx]
        for i in range(1, times.shape[0]):
            dt = times[i] - times[i - 1]
            if dt > 0 and idx[i] > 0:
                values[i] = (counted[i] - counted[i - 1]) / dt
    elif rates:
        unit = f"{rates[-1].unit}/s"
        when = np.array([r.time_s for r in rates])
        rate = np.array([r.rate for r in rates])
        idx = np.searchsorted(when, times, side="right") - 1
        ok = idx >= 0
        values[ok] = rate[idx[ok]]
        stale = ok & (times - when[np.clip(idx, 0, None)] > STALE_RATE_S)
        values[stale] = np.nan
    for start, end in paused:
        values[(times >= start) & (times <= end)] = np.nan
    if unit is None:
        return JobSeries(), None
    return JobSeries(time_s=times, throughput=values), unit


#: A rate read from the output is the job's speed for this long at most without a newer one.
STALE_RATE_S = 30.0
