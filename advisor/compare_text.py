"""A comparison of run records as rows of text: one table for `rigscope compare` and the Compare dialog.

Every number carries its unit; ratios ("0.85×") are against the first record. Pure text:
the terminal escapes its cells (``desktop.cli.common.text_table``), the dialog shows them as
plain text.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.portable import PortableRecord, Spread
from advisor.run_compare import Column, Comparison, work_per_joule_unit, work_unit

#: Cost is shown per this many units of work (a TFLOP or a step costs a millionth of a cent).
COST_PER = 1_000_000
UNKNOWN = "—"


@dataclass(frozen=True)
class Row:
    """One line of the table: its label, one cell per record, and whether it is a flagged difference."""

    section: str  # result | environment
    label: str
    cells: tuple[str, ...]
    flagged: bool = False
    differs: bool = False


def number(value: float | None, unit: str = "") -> str:
    """``value`` with a sensible number of digits and its unit; "—" when unknown."""
    if value is None:
        return UNKNOWN
    size = abs(value)
    if size >= 1000:
        text = f"{value:,.0f}"
    elif size >= 100:
        text = f"{value:.0f}"
    elif size >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".rstrip()


def duration(seconds: float) -> str:
    if seconds < 60:
        return number(seconds, "s")
    return number(seconds / 60.0, "min") if seconds < 5400 else number(seconds / 3600.0, "h")


def ratio(value: float | None) -> str:
    return "" if value is None else f" ({value:.2f}×)"


def _throughput(column: Column, peak: bool = False) -> str:
    record = column.record
    value = record.peak_throughput if peak else record.throughput
    if value is None:
        return UNKNOWN
    return number(value, record.unit or "") + ("" if peak else ratio(column.throughput_ratio))


def _latency(column: Column, which: str) -> str:
    latency = column.record.latency
    value = getattr(latency, f"{which}_ms") if latency is not None else None
    shown = getattr(column.latency_ratios, f"{which}_ms") if column.latency_ratios is not None else None
    return UNKNOWN if value is None else number(value, "ms") + ratio(shown)


def _spread(spread: Spread, unit: str) -> str:
    if spread.empty:
        return UNKNOWN
    return f"{number(spread.p50, unit)} (p5 {number(spread.p5)}, p95 {number(spread.p95)})"


def _energy(record: PortableRecord) -> str:
    if record.energy_j is None:
        return UNKNOWN
    if record.energy_j >= 3.6e6:
        return number(record.energy_j / 3.6e6, "kWh")
    return number(record.energy_j / 1000.0, "kJ") if record.energy_j >= 1000 else number(record.energy_j, "J")


def _work_per_joule(column: Column) -> str:
    if column.work_per_joule is None:
        return UNKNOWN
    return number(column.work_per_joule, work_per_joule_unit(column.record.unit) or "") + ratio(
        column.work_per_joule_ratio)


def _price(record: PortableRecord) -> str:
    if record.price_per_hour is None:
        return UNKNOWN
    return f"{record.price_per_hour:.2f} {record.currency or ''}/h".replace(" /h", "/h")


def _cost(column: Column) -> str:
    if column.cost_per_unit is None:
        return UNKNOWN
    record = column.record
    currency = record.currency or ""
    return (f"{number(column.cost_per_unit * COST_PER, currency)} per 1M {work_unit(record.unit)}"
            + ratio(column.cost_ratio))


def _verdict(record: PortableRecord) -> str:
    status = record.verdict or UNKNOWN
    return f"{status}, {record.errors} errors" if record.errors else status


def _workload(record: PortableRecord) -> str:
    kind = "" if record.kind == "stress" else f"{record.kind}: "
    return f"{kind}{record.workload}" + (f" ({record.dtype})" if record.dtype else "")


def rows(comparison: Comparison) -> list[Row]:
    """The result rows (throughput, latency, telemetry, energy, cost), then every environment fact."""
    cols = comparison.columns
    records = [c.record for c in cols]
    out = [
        Row("result", "workload", tuple(_workload(r) for r in records)),
        Row("result", "duration", tuple(duration(r.duration_s) for r in records)),
        Row("result", "verdict", tuple(_verdict(r) for r in records)),
        Row("result", "throughput (sustained)", tuple(_throughput(c) for c in cols)),
        Row("result", "throughput (peak)", tuple(_throughput(c, peak=True) for c in cols)),
    ]
    if any(r.latency is not None for r in records):
        out += [Row("result", f"latency {p}", tuple(_latency(c, p) for c in cols)) for p in ("p50", "p95", "p99")]
    out += [
        Row("result", "SM clock", tuple(_spread(r.sm_clock_mhz, "MHz") for r in records)),
        Row("result", "temperature", tuple(_spread(r.temperature_c, "°C") for r in records)),
        Row("result", "power", tuple(_spread(r.power_w, "W") for r in records)),
        Row("result", "energy", tuple(_energy(r) for r in records)),
        Row("result", "work per joule", tuple(_work_per_joule(c) for c in cols)),
        Row("result", "price", tuple(_price(r) for r in records)),
        Row("result", "cost of work", tuple(_cost(c) for c in cols)),
    ]
    for difference in comparison.differences:
        out.append(Row("environment", difference.label, tuple(v or UNKNOWN for v in difference.values),
                       flagged=difference.flagged, differs=difference.differs))
    return out


def flagged_sentence(comparison: Comparison) -> str:
    """One line naming the flagged differences, or saying there are none."""
    flagged = comparison.flagged
    if not comparison.comparable:
        return "No ratio is computed: the records ran on different kinds of device."
    if not flagged:
        return "No driver, CUDA, PyTorch, precision or power-limit difference between the records."
    parts = [f"{d.label} {' vs '.join(v or UNKNOWN for v in d.values)}" for d in flagged]
    return "Differences that can explain a gap: " + "; ".join(parts) + "."
