"""Reading a portable run record (``advisor.portable``) back from a file's bytes, under limits.

A record file may come from anywhere (a colleague, a CI artefact, an attacker): it is read under
limits on its size, nesting, digits, magnitudes and text, so that no file makes the reader fail any
other way than ``PortableError``, one line in the user's words naming the field and what it should
be. Pure: the bytes are handed in (``desktop.stress.portable`` reads the file). Rigscope's older
JSON about one run is read by ``advisor.portable_legacy``, handed in as ``legacy``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from advisor.portable import FORMAT, KINDS, VERSION, Environment, Latency, PortableRecord, Spread

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


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    r = FieldReader(data)
    kind = r.text("kind", required=True)
    if kind not in KINDS:
        raise PortableError(f'damaged record: "kind" must be one of {", ".join(KINDS)}, not {_show(kind)}')
    env = FieldReader(r.obj("environment"), "environment.")
    environment = Environment(
        gpu_name=env.text("gpu_name"), driver=env.text("driver"), cuda_driver=env.text("cuda_driver"),
        cuda_runtime=env.text("cuda_runtime"), torch=env.text("torch"), rigscope=env.text("rigscope"),
        power_limit_w=env.number("power_limit_w", low=0.0), os=env.text("os"), python=env.text("python"),
        simulated=env.flag("simulated") or False)
    throughput = FieldReader(r.obj("throughput"), "throughput.")
    latency_data = r.maybe_obj("latency_ms")
    latency = None
    if latency_data is not None:
        lat = FieldReader(latency_data, "latency_ms.")
        latency = Latency(lat.number("p50", low=0.0), lat.number("p95", low=0.0), lat.number("p99", low=0.0))
    verdict = FieldReader(r.obj("verdict"), "verdict.")
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


class FieldReader:
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
        reader = FieldReader(self.obj(key), f"{self.prefix}{key}.")
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
