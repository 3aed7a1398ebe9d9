"""A GPU's dense bf16 peak for the power it is allowed, and a sustained GEMM rate as a share of it.

A laptop GPU's datasheet figure holds at one TGP: the RTX 4090 Laptop's 76 TFLOP/s is "at 140 W"
(REFERENCE.md), and the same chip runs from 80 to 175 W by the maker's choice, the firmware mode and
Dynamic Boost. Measured against 76 TFLOP/s, an 80 W machine that does all its power allows (about
50-58 TFLOP/s) looked a quarter short. So the figure is scaled to the enforced limit in force, or
stays the datasheet's at the TGP it names where no limit was read, and says which.

Scaling: throughput ~ clock, and at the power limit the clock falls slower than the power (voltage
drops with it: P ~ f V^2), so peak ~ (limit / rated) ** POWER_EXPONENT, never above the datasheet
figure (that is the chip at its boost clock). 0.5 puts 80 W of a 140 W rating at 57 TFLOP/s, inside
the 50-58 seen (u), and agrees with the simulated laptop (75 % of its max clock at 80 W: 57.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

from advisor.costs import GpuSpec

POWER_EXPONENT: Final = 0.5

#: "limit": scaled to the enforced limit in force; "datasheet_tgp": the datasheet figure at the TGP it
#: names (no limit read); "datasheet": a figure stated at no particular power (desktop and data-centre parts).
PeakBasis = Literal["limit", "datasheet_tgp", "datasheet"]


@dataclass(frozen=True, slots=True)
class DensePeak:
    """The dense bf16 peak a GPU can reach at the power it has, and what it was drawn from."""

    tflops: float
    datasheet_tflops: float
    basis: PeakBasis
    #: The TGP the datasheet figure is stated at (W), and the limit it was scaled to (W).
    datasheet_w: float | None = None
    limit_w: float | None = None

    def source_text(self) -> str:
        """ "76 TFLOP/s at 140 W, scaled to the 80 W limit in force", or where the figure came from."""
        if self.basis == "limit" and self.datasheet_w is not None and self.limit_w is not None:
            if self.limit_w >= self.datasheet_w:  # nothing was scaled: the peak is never above the datasheet's
                return (f"{self.datasheet_tflops:,.0f} TFLOP/s at {self.datasheet_w:.0f} W; the "
                        f"{self.limit_w:.0f} W limit in force does not lower it")
            return (f"{self.datasheet_tflops:,.0f} TFLOP/s at {self.datasheet_w:.0f} W, scaled to the "
                    f"{self.limit_w:.0f} W limit in force")
        if self.basis == "datasheet_tgp" and self.datasheet_w is not None:
            return f"the datasheet figure at {self.datasheet_w:.0f} W: no power limit was read"
        return "the datasheet figure"

    def text(self) -> str:
        """ "54 TFLOP/s dense bf16 peak (76 TFLOP/s at 140 W, scaled to the 80 W limit in force)"."""
        return f"{self.tflops:,.0f} TFLOP/s dense bf16 peak ({self.source_text()})"


def dense_peak(spec: GpuSpec, limit_w: float | None) -> DensePeak:
    """``spec``'s peak at the enforced limit ``limit_w`` (W; None or not positive: not read)."""
    rated_w = spec.peak_at_w
    if rated_w is None or not rated_w > 0:
        return DensePeak(spec.peak_bf16_tflops, spec.peak_bf16_tflops, "datasheet")
    if limit_w is None or not math.isfinite(limit_w) or limit_w <= 0:
        return DensePeak(spec.peak_bf16_tflops, spec.peak_bf16_tflops, "datasheet_tgp", datasheet_w=rated_w)
    share = min(1.0, (limit_w / rated_w) ** POWER_EXPONENT)
    return DensePeak(spec.peak_bf16_tflops * share, spec.peak_bf16_tflops, "limit", datasheet_w=rated_w,
                     limit_w=limit_w)


def of_peak_clause(sustained_tflops: float, peak: DensePeak) -> str:
    """ "sustained 48.6 TFLOP/s: 90 % of its 54 TFLOP/s dense bf16 peak (...)"."""
    share = sustained_tflops / peak.tflops if peak.tflops > 0 else math.nan
    return f"sustained {sustained_tflops:,.1f} TFLOP/s: {share * 100.0:.0f} % of its {peak.text()}"
