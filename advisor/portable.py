"""The portable run record: one versioned JSON format for `rigscope stress -o` and `rigscope run -o`.

A record carries what it takes to compare runs from different machines (a laptop, a cloud
box): the environment (GPU, driver, CUDA, torch, Rigscope, power limit), the workload and
its precision, throughput with its unit, latency percentiles, clock/temperature/power
percentiles, energy, the verdict and, when given, the machine's price per hour. Pure: this
module turns records into dicts and back (``record_from_dict`` says exactly what is wrong
with a damaged or foreign file); files are read and written by ``desktop.stress.portable``;
comparing records is ``advisor.run_compare.compare``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeAlias

import numpy as np

FORMAT = "rigscope-run"
VERSION = 1
KINDS = ("stress", "job")

# The limits a record file is read under (it may come from anywhere: a colleague, a CI artefact).
#: A record is a few kB; anything much bigger is not one (and is not read into memory whole).
MAX_RECORD_BYTES = 1_000_000
#: A record nests three deep; deeper is not one (and json's own recursion is never reached).
MAX_DEPTH = 32
#: Digits a whole number may have: an epoch second or a count has under 20 (Python refuses 4,301).
MAX_INT_DIGITS = 30
#: Magnitudes a measurement can have (besides 0): beyond them it is garbage, and its ratios overflow.
MIN_MAGNITUDE = 1e-9
MAX_MAGNITUDE = 1e15
#: Characters a text field may have (a verdict sentence is a few hundred).
MAX_TEXT_CHARS = 10_000


class PortableError(ValueError):
    """Not a run record, or a damaged one: the message says what is wrong, in the user's words."""


@dataclass(frozen=True)
class Spread:
    """One signal over the run: 5th, 50th and 95th percentile and the mean (None: never read)."""

    p5: float | None = None
    p50: float | None = None
    p95: float | None = None
    mean: float | None = None

    @classmethod
    def of(cls, values: Iterable[float] | np.ndarray) -> Spread:
        """From samples; NaN (not read) is left out; an all-NaN or empty series gives an empty Spread."""
        array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64)
        array = array[np.isfinite(array)]
        if array.size == 0:
            return cls()
        p5, p50, p95 = (float(v) for v in np.percentile(array, [5.0, 50.0, 95.0]))
        return cls(p5, p50, p95, float(array.mean()))

    @property
    def empty(self) -> bool:
        return self.p50 is None


@dataclass(frozen=True)
class Latency:
    """Per-step latency percentiles (inference), milliseconds."""

    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None


@dataclass(frozen=True)
class Environment:
    """What the run ran on: the facts that explain a gap between two machines."""

    gpu_name: str | None = None
    driver: str | None = None
    #: The CUDA version the driver supports (NVML); ``cuda_runtime`` the one torch was built for.
    cuda_driver: str | None = None
    cuda_runtime: str | None = None
    torch: str | None = None
    rigscope: str | None = None
    #: The enforced power limit during the run, W.
    power_limit_w: float | None = None
    os: str | None = None
    python: str | None = None
    simulated: bool = False


@dataclass(frozen=True)
class PortableRecord:
    """One run (a stress test or the user's job), portable between machines."""

    kind: str  # stress | job
    #: The workload (gemm, bandwidth, train, infer) or, for a job, its name.
    workload: str
    started_s: float
    duration_s: float
    environment: Environment = field(default_factory=Environment)
    #: The machine's name (its host name unless the user gave another).
    machine: str | None = None
    #: cuda:0 | cpu | sim for a stress run; the GPU indices for a job ("0,1"); None: unknown.
    device: str | None = None
    dtype: str | None = None
    #: Throughput unit (TFLOP/s, GB/s, steps/s, it/s, tok/s, ...); None when nothing was measured.
    unit: str | None = None
    #: The sustained throughput (the run's steady level), and the best level it reached.
    throughput: float | None = None
    peak_throughput: float | None = None
    latency: Latency | None = None
    sm_clock_mhz: Spread = field(default_factory=Spread)
    temperature_c: Spread = field(default_factory=Spread)
    power_w: Spread = field(default_factory=Spread)
    #: Energy the GPU drew over the run, J.
    energy_j: float | None = None
    #: passed | throttled | errors | aborted | inconclusive | too_short | ... (the verdict's status).
    verdict: str | None = None
    verdict_sentence: str = ""
    throttled: bool | None = None
    errors: int = 0
    #: What an hour of this machine costs (`--price-per-hour`), in ``currency``.
    price_per_hour: float | None = None
    currency: str | None = None

    @property
    def label(self) -> str:
        """How a comparison names this record: its machine and GPU."""
        gpu = self.environment.gpu_name or "unknown GPU"
        if self.environment.simulated and "simulated" not in gpu.lower():
            gpu += " (simulated)"
        return f"{self.machine} · {gpu}" if self.machine else gpu

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``FORMAT``, ``VERSION``): plain types only, None for what is unknown (a NaN or
        infinite number too), text as valid UTF-8 (``utf8_text``)."""
        env = {f.name: getattr(self.environment, f.name) for f in fields(Environment)}
        data: dict[str, Any] = finite_json({
            "format": FORMAT, "version": VERSION, "kind": self.kind, "workload": self.workload,
            "started_s": self.started_s, "duration_s": self.duration_s, "machine": self.machine,
            "device": self.device, "dtype": self.dtype,
            "throughput": {"sustained": self.throughput, "peak": self.peak_throughput, "unit": self.unit},
            "latency_ms": None if self.latency is None else {
                "p50": self.latency.p50_ms, "p95": self.latency.p95_ms, "p99": self.latency.p99_ms},
            "sm_clock_mhz": _spread_dict(self.sm_clock_mhz), "temperature_c": _spread_dict(self.temperature_c),
            "power_w": _spread_dict(self.power_w), "energy_j": self.energy_j,
            "verdict": {"status": self.verdict, "sentence": self.verdict_sentence, "throttled": self.throttled,
                        "errors": self.errors},
            "price_per_hour": self.price_per_hour, "currency": self.currency,
            "environment": env,
        })
        return data

    def to_json(self) -> str:
        """The JSON text (``as_dict``): UTF-8 text only, no ``NaN`` or ``Infinity``."""
        return json.dumps(self.as_dict(), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def _spread_dict(spread: Spread) -> dict[str, float | None]:
    return {"p5": spread.p5, "p50": spread.p50, "p95": spread.p95, "mean": spread.mean}


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """``text`` with each lone surrogate written out as ``advisor.safetext`` shows it (``\\xff`` for the byte a
    surrogate-escaped name held): a job named ``train\\xff`` writes a record every reader accepts."""
    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
    return _SURROGATE.sub(escape, text)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def finite_json(value: Any) -> Any:
    """``value`` (dicts, lists, numbers, text) as JSON can carry it: every NaN or infinite float as None,
    every text as valid UTF-8 (``utf8_text``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def finite_or_none(value: float | None) -> float | None:
    """``value`` as a float, or None when it is missing, NaN or infinite."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def energy_joules(time_s: np.ndarray, power_w: np.ndarray | None, energy_mj: np.ndarray | None = None) -> float | None:
    """Energy over a run: the driver's energy counter where it was read (exact), else power integrated over time."""
    times = np.asarray(time_s, dtype=np.float64)
    if energy_mj is not None:
        counter = np.asarray(energy_mj, dtype=np.float64)
        ok = np.isfinite(counter)
        if ok.sum() >= 2:
            first, last = counter[ok][0], counter[ok][-1]
            if last >= first:  # a counter that went back was reset (driver reload): not usable
                return float(last - first) / 1000.0
    if power_w is None:
        return None
    power = np.asarray(power_w, dtype=np.float64)
    ok = np.isfinite(power) & np.isfinite(times)
    if ok.sum() < 2:
        return None
    return float(np.trapezoid(power[ok], times[ok]))


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unreadable:
    """A value no record field can take (a 400-digit integer, NaN): refused by the field that reads it."""

    what: str


def _parse_int(text: str) -> int | _Unreadable:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else _Unreadable(f"a {digits}-digit integer")


def _parse_float(text: str) -> float | _Unreadable:
    value = float(text)
    return value if math.isfinite(value) else _Unreadable(text if len(text) <= 20 else text[:17] + "...")


#: JSON strings (with their escapes), taken out before the brackets are counted.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str) -> int:
    """How deep ``text``'s JSON arrays and objects nest (brackets inside strings do not count), without parsing it."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if not brackets:
        return 0
    codes = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


#: Reads Rigscope's other JSON about one run as a record, None when it is not such JSON
#: (``advisor.portable_legacy.legacy_record``; handed in, since that module builds on this one).
LegacyReader: TypeAlias = Callable[[dict[str, Any]], "PortableRecord | None"]


def parse_record_bytes(data: bytes, legacy: LegacyReader | None = None) -> PortableRecord:
    """A record from a file's bytes: at most ``MAX_RECORD_BYTES``, UTF-8 (a BOM allowed), then ``parse_record``."""
    if len(data) > MAX_RECORD_BYTES:
        raise PortableError(f"not a Rigscope run record (over {MAX_RECORD_BYTES // 1000} kB)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PortableError(f"not a Rigscope run record (not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                            f"{exc.start})") from None
    return parse_record(text, legacy)


def parse_record(text: str, legacy: LegacyReader | None = None) -> PortableRecord:
    """A record from its JSON text; PortableError (one line, naming the field) when it is not a valid record.

    Read under limits, so that no file makes it fail any other way: nesting (``MAX_DEPTH``, checked before
    parsing), whole numbers' digits (``MAX_INT_DIGITS``), finite numbers of a measurable magnitude, valid
    UTF-8 text of bounded length; a value no field reads (a long number under an unknown key) is harmless.
    """
    if not _is_utf8(text):
        raise PortableError("not a Rigscope run record (not UTF-8 text: it holds a lone surrogate)")
    if len(text) > MAX_RECORD_BYTES:
        raise PortableError(f"not a Rigscope run record (over {MAX_RECORD_BYTES // 1000} kB)")
    if nesting_depth(text) > MAX_DEPTH:
        raise PortableError(f"not a Rigscope run record (nested deeper than {MAX_DEPTH} levels)")
    try:
        data = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_Unreadable)
    except json.JSONDecodeError as exc:
        raise PortableError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                            "is the file complete?") from None
    except RecursionError:
        raise PortableError("not a Rigscope run record (nested too deeply)") from None
    return record_from_dict(data, legacy)


def record_from_dict(data: object, legacy: LegacyReader | None = None) -> PortableRecord:
    """Validate and read a record's JSON form. Every problem names the field and what it should be."""
    if not isinstance(data, dict):
        raise PortableError(f"not a Rigscope run record (a JSON {_json_type(data)}, expected an object)")
    if "format" not in data and legacy is not None and (older := legacy(data)) is not None:
        return older
    if data.get("format") != FORMAT:
        found = data.get("format")
        what = f'"format" is {_show(found)}' if "format" in data else 'no "format" field'
        raise PortableError(f'not a Rigscope run record ({what}; expected "{FORMAT}")')
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PortableError(f'damaged record: "version" must be a whole number from 1, not {_show(version)}')
    if version > VERSION:
        raise PortableError(f"written by a newer Rigscope (record version {version}; this one reads up to "
                            f"{VERSION}): upgrade Rigscope to read it")
    r = _Reader(data)
    kind = r.text("kind", required=True)
    if kind not in KINDS:
        raise PortableError(f'damaged record: "kind" must be one of {", ".join(KINDS)}, not {_show(kind)}')
    env = _Reader(r.obj("environment"), "environment.")
    environment = Environment(
        gpu_name=env.text("gpu_name"), driver=env.text("driver"), cuda_driver=env.text("cuda_driver"),
        cuda_runtime=env.text("cuda_runtime"), torch=env.text("torch"), rigscope=env.text("rigscope"),
        power_limit_w=env.number("power_limit_w", low=0.0), os=env.text("os"), python=env.text("python"),
        simulated=env.flag("simulated") or False)
    throughput = _Reader(r.obj("throughput"), "throughput.")
    latency_data = r.maybe_obj("latency_ms")
    latency = None
    if latency_data is not None:
        lat = _Reader(latency_data, "latency_ms.")
        latency = Latency(lat.number("p50", low=0.0), lat.number("p95", low=0.0), lat.number("p99", low=0.0))
    verdict = _Reader(r.obj("verdict"), "verdict.")
    return PortableRecord(
        kind=kind, workload=r.text("workload", required=True) or "",
        started_s=r.number("started_s", required=True) or 0.0, duration_s=r.number("duration_s", low=0.0) or 0.0,
        environment=environment, machine=r.text("machine"), device=r.text("device"), dtype=r.text("dtype"),
        unit=throughput.text("unit"), throughput=throughput.number("sustained", low=0.0),
        peak_throughput=throughput.number("peak", low=0.0), latency=latency,
        sm_clock_mhz=r.spread("sm_clock_mhz"), temperature_c=r.spread("temperature_c"), power_w=r.spread("power_w"),
        energy_j=r.number("energy_j", low=0.0), verdict=verdict.text("status"),
        verdict_sentence=verdict.text("sentence") or "", throttled=verdict.flag("throttled"),
        errors=int(verdict.number("errors", low=0.0) or 0),
        price_per_hour=r.number("price_per_hour", low=0.0), currency=r.text("currency"))


class _Reader:
    """Typed access to one JSON object's fields; errors name the field by its dotted path."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "") -> None:
        self.data, self.prefix = data, prefix

    def _bad(self, key: str, expected: str) -> PortableError:
        return PortableError(f'damaged record: "{self.prefix}{key}" must be {expected}, '
                             f"not {_show(self.data.get(key))}")

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or (required and not value):
            raise self._bad(key, "text")
        if not _is_utf8(value):
            raise self._bad(key, "valid UTF-8 text (it holds a lone surrogate)")
        if len(value) > MAX_TEXT_CHARS:
            raise PortableError(f'damaged record: "{self.prefix}{key}" must be text of at most {MAX_TEXT_CHARS:,} '
                                f"characters, not {len(value):,}")
        return value

    def number(self, key: str, *, required: bool = False, low: float | None = None) -> float | None:
        value = self.data.get(key)
        if value is None and not required:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._bad(key, "a number")
        if low is not None and value < low:
            raise self._bad(key, f"a number from {low:g}")
        if value != 0 and not MIN_MAGNITUDE <= abs(value) <= MAX_MAGNITUDE:
            raise self._bad(key, f"0 or a number from {MIN_MAGNITUDE:g} to {MAX_MAGNITUDE:g} in size")
        return float(value)

    def flag(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._bad(key, "true or false")
        return value

    def obj(self, key: str) -> dict[str, Any]:
        """The object at ``key``; an empty one when it is missing or null."""
        return self.maybe_obj(key) or {}

    def maybe_obj(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self._bad(key, "an object")
        return value

    def spread(self, key: str) -> Spread:
        reader = _Reader(self.obj(key), f"{self.prefix}{key}.")
        return Spread(*(reader.number(name) for name in ("p5", "p50", "p95", "mean")))


def _json_type(value: object) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "true/false"}.get(
        type(value), "null" if value is None else type(value).__name__)


def _show(value: object) -> str:
    """A found value for a message, cut short (a damaged file may hold anything)."""
    if value is None:
        return "missing"
    if isinstance(value, _Unreadable):
        return value.what
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, str | int | float | bool) else _json_type(value)
    return text if len(text) <= 40 else text[:37] + "..."
