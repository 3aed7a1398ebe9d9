"""The clock a verdict measures the SM clock against: a clock the GPU sustains, never the top of its V/F curve.

Ada drivers report the top of the V/F curve as the max SM clock (3,105 MHz on every RTX 40 card,
../shared/realdata), which no card sustains: "clock at 41 % of the GPU's reported max" alarms for a
normal 80 W laptop run. The reference, in order:

1. the GPU's own calibration: the clock it held at full load in its own stress run;
2. the reported max, unless it is a V/F top: a max this run reached (within ``REACHED_SHARE``) is a
   real clock, and so is one under ``VF_TOP_MIN_MHZ`` that the datasheet boost clock (where known)
   does not show to be far above anything sustained: datacenter cards report their customer boost
   clock as the max (H100 SXM 1,980 MHz: nvsmi_q_H100SXMx8.txt) and an H100 PCIe held by its cap at
   825 MHz is rightly "47 % of the GPU's reported max (1,755 MHz)"; the highest clock of a log that
   gives no max is reached by definition;
3. the run's early sustained level (its best 45 s after warm-up);
4. the datasheet boost clock, by the GPU's name.

The sentence names the basis every time. Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

#: Which clock a verdict's clock share is measured against (see the module docstring for the order).
ClockBasis = Literal["calibration", "reported", "log", "early", "datasheet"]

#: A reported max the run's clock came within this share of is a clock the GPU really runs at.
REACHED_SHARE = 0.97
#: A reported max at or above this is the top of a V/F curve, not a clock any card sustains: every Ada
#: card reports 3,105 MHz and the RTX 5090 3,090 MHz (../shared/realdata), where datacenter maxima are
#: their customer boost clocks (H100 1,980, L40S 2,520 MHz).
VF_TOP_MIN_MHZ = 3000.0
#: A reported max more than this far above the datasheet boost clock is a V/F top too.
ABOVE_BOOST_SHARE = 1.05

_PHRASES: dict[ClockBasis, str] = {
    "calibration": "its own stress-run calibration",
    "reported": "the GPU's reported max",
    "log": "the highest clock in the log",
    "early": "its early sustained clock",
    "datasheet": "its datasheet boost clock",
}


@dataclass(frozen=True)
class ClockReference:
    """A clock in MHz and what it is."""

    mhz: float
    basis: ClockBasis

    def phrase(self) -> str:
        """``"its early sustained clock (1,935 MHz)"``: the basis named, with its figure."""
        return f"{_PHRASES[self.basis]} ({self.mhz:,.0f} MHz)"


def _usable(mhz: float | None) -> bool:
    return mhz is not None and math.isfinite(mhz) and mhz > 0


def is_vf_top(reported_max_mhz: float, boost_mhz: float | None = None) -> bool:
    """Whether a reported max SM clock is the top of the V/F curve rather than a clock the GPU sustains."""
    if reported_max_mhz >= VF_TOP_MIN_MHZ:
        return True
    return boost_mhz is not None and boost_mhz > 0 and reported_max_mhz > ABOVE_BOOST_SHARE * boost_mhz


def choose_reference(*, calibration_mhz: float | None = None, reported_max_mhz: float | None = None,
                     reported_from_log: bool = False, highest_loaded_mhz: float | None = None,
                     early_mhz: float | None = None, boost_mhz: float | None = None) -> ClockReference | None:
    """The reference for one run (None when nothing is known).

    ``highest_loaded_mhz`` is the run's highest clock under load: a V/F top (``is_vf_top``) it never came
    near (Ada's 3,105 MHz) is passed over. ``reported_from_log``: the max is
    the highest clock in the log itself (an nvidia-smi log without ``clocks.max.sm``), reached by definition.
    """
    if _usable(calibration_mhz):
        assert calibration_mhz is not None
        return ClockReference(calibration_mhz, "calibration")
    if _usable(reported_max_mhz):
        assert reported_max_mhz is not None
        if reported_from_log:
            return ClockReference(reported_max_mhz, "log")
        reached = highest_loaded_mhz is not None and highest_loaded_mhz >= REACHED_SHARE * reported_max_mhz
        if reached or not is_vf_top(reported_max_mhz, boost_mhz):
            return ClockReference(reported_max_mhz, "reported")
    if _usable(early_mhz):
        assert early_mhz is not None
        return ClockReference(early_mhz, "early")
    if _usable(boost_mhz):
        assert boost_mhz is not None
        return ClockReference(boost_mhz, "datasheet")
    return None
