"""The portable run record: one versioned JSON format for `rigscope stress -o` and `rigscope run -o`.

A record carries what it takes to compare runs from different machines (a laptop, a cloud
box): the environment (GPU, driver, CUDA, torch, Rigscope, power limit), the workload and
its precision, throughput with its unit, latency percentiles, clock/temperature/power
percentiles, energy, the verdict and, when given, the machine's price per hour. Pure: this
module turns records into dicts; reading one back from a file's bytes, under limits, with one line
saying exactly what is wrong with a damaged or foreign file, is ``advisor.portable_read``; files are
read and written by ``desktop.stress.portable``; comparing records is ``advisor.run_compare.compare``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

FORMAT = "rigscope-run"
VERSION = 1
KINDS = ("stress", "job")

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
