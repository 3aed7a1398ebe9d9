"""Run records side by side: throughput, latency, work-per-joule and cost ratios against the first
record, and the environment facts that differ (driver, CUDA, torch, precision, power limit
flagged: they explain a throughput gap).

Pure: the records come from ``advisor.portable`` (the format, parsing and validation); their
text is ``advisor.compare_text``; ``rigscope compare`` and the Compare dialog show it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from advisor.portable import Latency, PortableRecord, finite_json

#: Environment facts that explain a throughput gap: flagged when they differ between records.
EXPLAINING: dict[str, str] = {
    "dtype": "precision", "driver": "NVIDIA driver", "cuda_driver": "CUDA (driver)",
    "cuda_runtime": "CUDA (torch build)", "torch": "PyTorch", "power_limit_w": "power limit",
}
#: Shown beside them, not flagged: the GPU is what is being compared; the rest rarely explains a gap.
CONTEXT: dict[str, str] = {
    "gpu_name": "GPU", "device": "device", "rigscope": "Rigscope", "os": "system", "python": "Python",
}
#: Power limits closer than this share are the same limit (drivers round, boards differ by a watt).
POWER_LIMIT_TOLERANCE = 0.05


@dataclass(frozen=True)
class Difference:
    """One environment fact across the records (``values`` in record order, None: unknown)."""

    key: str
    label: str
    values: tuple[str | None, ...]
    #: Some known value differs from the first record's.
    differs: bool
    #: It differs and is a fact that explains a throughput gap (``EXPLAINING``).
    flagged: bool


@dataclass(frozen=True)
class Column:
    """One record in a comparison, with its ratios against the first record (the reference)."""

    record: PortableRecord
    #: Throughput / the first record's (same unit only); None when either is unknown.
    throughput_ratio: float | None = None
    #: Latency percentile / the first record's (above 1: slower).
    latency_ratios: Latency | None = None
    #: Work per joule: sustained throughput / mean power, in the unit's work per J (e.g. TFLOP/J).
    work_per_joule: float | None = None
    work_per_joule_ratio: float | None = None
    #: What one unit of work costs at the record's price per hour, in its currency.
    cost_per_unit: float | None = None
    cost_ratio: float | None = None


@dataclass(frozen=True)
class Comparison:
    """Records side by side: the first is the reference every ratio is taken against."""

    columns: tuple[Column, ...]
    differences: tuple[Difference, ...]
    #: What keeps ratios from being computed (different workloads or units, different currencies).
    notes: tuple[str, ...] = ()
    #: False for a CPU run beside a GPU run: no ratio, nothing flagged as explaining the gap.
    comparable: bool = True

    @property
    def records(self) -> tuple[PortableRecord, ...]:
        return tuple(c.record for c in self.columns)

    @property
    def flagged(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.flagged)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form; every number finite (a ratio that would not be is None)."""
        data: dict[str, Any] = finite_json({
            "reference": 0,
            "records": [{"label": c.record.label, "record": c.record.as_dict(),
                         "throughput_ratio": c.throughput_ratio,
                         "latency_ratios": None if c.latency_ratios is None else {
                             "p50": c.latency_ratios.p50_ms, "p95": c.latency_ratios.p95_ms,
                             "p99": c.latency_ratios.p99_ms},
                         "work_per_joule": c.work_per_joule, "work_per_joule_ratio": c.work_per_joule_ratio,
                         "work_per_joule_unit": work_per_joule_unit(c.record.unit),
                         "cost_per_unit": c.cost_per_unit, "cost_unit": work_unit(c.record.unit),
                         "cost_ratio": c.cost_ratio} for c in self.columns],
            "differences": [{"key": d.key, "label": d.label, "values": list(d.values), "differs": d.differs,
                             "flagged": d.flagged} for d in self.differences],
            "notes": list(self.notes),
            "comparable": self.comparable,
        })
        return data


#: The note for records that ran on a CPU and on a GPU.
NOT_COMPARABLE = "a CPU and a GPU run: not comparable"


def device_kind(device: str | None) -> str | None:
    """ "cpu" or "gpu" (cuda:N, the simulated GPU); None when the record does not say."""
    if not device:
        return None
    return "cpu" if device.strip().lower() == "cpu" else "gpu"


def work_unit(unit: str | None) -> str | None:
    """What one unit of throughput counts: "TFLOP/s" -> "TFLOP", "it/s" -> "it"; None when unknown."""
    if not unit:
        return None
    return unit[:-2] if unit.endswith("/s") else f"{unit}·s"


def work_per_joule_unit(unit: str | None) -> str | None:
    work = work_unit(unit)
    return f"{work}/J" if work else None


def _finite(value: float) -> float | None:
    """A quotient that overflowed (a tiny reference) or underflowed to 0 is no figure: None."""
    return value if math.isfinite(value) and value != 0 else None


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference <= 0:
        return None
    return 0.0 if value == 0 else _finite(value / reference)


def _work_per_joule(record: PortableRecord) -> float | None:
    power = record.power_w.mean
    if record.throughput is None or power is None or power <= 0:
        return None
    return 0.0 if record.throughput == 0 else _finite(record.throughput / power)


def _cost_per_unit(record: PortableRecord) -> float | None:
    if record.price_per_hour is None or not record.throughput:
        return None
    return 0.0 if record.price_per_hour == 0 else _finite(record.price_per_hour / 3600.0 / record.throughput)


def _environment_value(record: PortableRecord, key: str) -> str | None:
    if key in ("dtype", "device"):
        value: object = getattr(record, key)
    else:
        value = getattr(record.environment, key)
    if value is None:
        return None
    if key == "power_limit_w":
        return f"{float(value):.0f} W"  # type: ignore[arg-type]
    return str(value)


def _differs(key: str, records: tuple[PortableRecord, ...]) -> bool:
    if key == "power_limit_w":
        limits = [r.environment.power_limit_w for r in records]
        first = limits[0]
        if first is None:
            return False
        return any(v is not None and abs(v - first) > POWER_LIMIT_TOLERANCE * first for v in limits[1:])
    values = [_environment_value(r, key) for r in records]
    return values[0] is not None and any(v is not None and v != values[0] for v in values[1:])


def compare(records: Iterable[PortableRecord]) -> Comparison:
    """Records side by side against the first: throughput and latency ratios, work per joule, cost per
    unit of work, and the environment facts that differ (those that explain a gap flagged)."""
    runs = tuple(records)
    if len(runs) < 2:
        raise ValueError("a comparison needs two or more records")
    first = runs[0]
    notes: list[str] = []
    # A CPU's rate beside a GPU's is no ratio (0.00×), and no precision or CUDA difference explains it.
    kinds = {device_kind(r.device) for r in runs} - {None}
    comparable = len(kinds) < 2
    if not comparable:
        notes.append(NOT_COMPARABLE)
    same_unit = comparable and all(r.unit == first.unit and r.unit is not None for r in runs)
    if comparable and not same_unit:
        units = ", ".join(sorted({r.unit or "none" for r in runs}))
        notes.append(f"the records measure different things ({units}): throughput is not compared")
    workloads = {r.workload for r in runs}
    if len(workloads) > 1:
        notes.append(f"different workloads ({', '.join(sorted(workloads))}): ratios compare unlike work")
    currencies = {r.currency for r in runs if r.price_per_hour is not None}
    same_currency = len(currencies) <= 1
    if not same_currency:
        notes.append(f"prices in different currencies ({', '.join(sorted(c or '?' for c in currencies))}): "
                     "cost is not compared")
    reference_wpj = _work_per_joule(first)
    reference_cost = _cost_per_unit(first)
    columns = []
    for run in runs:
        wpj, cost = _work_per_joule(run), _cost_per_unit(run)
        latency = None
        if run.latency is not None and first.latency is not None:
            latency = Latency(_ratio(run.latency.p50_ms, first.latency.p50_ms),
                              _ratio(run.latency.p95_ms, first.latency.p95_ms),
                              _ratio(run.latency.p99_ms, first.latency.p99_ms))
        columns.append(Column(
            run, throughput_ratio=_ratio(run.throughput, first.throughput) if same_unit else None,
            latency_ratios=latency if same_unit else None, work_per_joule=wpj,
            work_per_joule_ratio=_ratio(wpj, reference_wpj) if same_unit else None, cost_per_unit=cost,
            cost_ratio=_ratio(cost, reference_cost) if same_unit and same_currency else None))
    differences = []
    for key, label in (*EXPLAINING.items(), *CONTEXT.items()):
        values = tuple(_environment_value(r, key) for r in runs)
        if all(v is None for v in values):
            continue
        differs = _differs(key, runs)
        differences.append(Difference(key, label, values, differs, comparable and differs and key in EXPLAINING))
    return Comparison(tuple(columns), tuple(differences), tuple(notes), comparable)
