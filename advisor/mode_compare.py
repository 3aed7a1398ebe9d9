"""Firmware modes side by side: what each mode's sustained throughput costs in power and heat.

Pure: `rigscope stress --per-mode` runs the Quick test once per mode and hands the figures here;
the answer is one sentence per neighbouring pair, fastest first ("Extreme Performance buys 11 %
over Balanced at +18 W and +6 °C").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

#: Within this share two modes are "as fast" (run-to-run noise of a Quick test).
SAME_SPEED = 0.01


@dataclass(frozen=True, slots=True)
class ModeFigures:
    """One mode's run: sustained throughput, median power, median temperature and median SM clock."""

    name: str
    throughput: float | None
    unit: str | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None


def _delta(value: float | None, other: float | None, unit: str) -> str | None:
    if value is None or other is None:
        return None
    return f"{value - other:+.0f} {unit}"


def pair_sentence(faster: ModeFigures, slower: ModeFigures) -> str:
    """"Extreme Performance buys 11 % over Balanced at +18 W and +6 °C" (or why no figure is given)."""
    if faster.throughput is None or slower.throughput is None or slower.throughput <= 0:
        return f"{faster.name} and {slower.name}: no throughput to compare"
    gain = faster.throughput / slower.throughput - 1.0
    costs = [d for d in (_delta(faster.power_w, slower.power_w, "W"),
                         _delta(faster.temperature_c, slower.temperature_c, "°C")) if d is not None]
    at = f" at {' and '.join(costs)}" if costs else ""
    if gain < SAME_SPEED:
        return (f"{faster.name} is no faster than {slower.name} (within {SAME_SPEED:.0%}){at}: "
                "the extra power buys nothing here")
    return f"{faster.name} buys {gain * 100.0:.0f} % over {slower.name}{at}"


def mode_sentences(figures: Sequence[ModeFigures]) -> list[str]:
    """One sentence per neighbouring pair, fastest first; modes without a throughput go last."""
    ranked = sorted(figures, key=lambda f: -(f.throughput if f.throughput is not None else float("-inf")))
    return [pair_sentence(a, b) for a, b in pairwise(ranked)]
