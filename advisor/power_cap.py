"""Was a run held at its power limit? Its averaged power against the limit, the cap bit, or the shape of the log.

Pure numpy, for the verdict. A GEMM at its power limit is the normal state of a datacenter GPU,
and the main fact about such a run: its clock is what the limit buys (an H100 PCIe at 348 of
350 W runs at 47 % of its max clock, correctly). Three ways to see it:

- the averaged power under load sits at >= 95 % of the enforced limit (from NVML, a log column,
  or the datasheet figure for the GPU's name when the log has no limit);
- the SW power cap bit is set for most of the load. Set far below the limit (an H800 on
  all-zero data: the bit at 405-465 W of 700 W, flat clocks) it is another limit than the board
  power: a clock setting or a power policy;
- no limit known at all: power flat for most of the load while the clock sits below its early level
  (or dithers) is "held at a power limit near" that plateau (``power_plateau``).

Judge averaged power only: the instantaneous reading spikes past the limit (456 W on 350 W).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from advisor.power_plateau import plateau_level_w

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: How a run met its power limit: "at_limit" (averaged power at >= 95 % of it, or the cap bit with
#: nothing to weigh it against), "cap_bit" (the cap bit most of the load, the power 80-95 % of the
#: limit), "below_limit" (the cap bit far below the limit), "plateau" (no limit known, flat power).
PowerCapKind = Literal["at_limit", "cap_bit", "below_limit", "plateau"]

#: Averaged power at or above this share of the limit = at the limit.
AT_LIMIT_SHARE = 0.95
#: The cap bit set for at least this share of the load = "most of its load".
CAP_MOST_SHARE = 0.5
#: The cap bit held with the power below this share of the limit: not the board power.
BELOW_LIMIT_SHARE = 0.8
#: "The whole run" from this share of the load at the limit on.
WHOLE_RUN_SHARE = 0.9

#: Board power limits by the name NVML and nvidia-smi report (the default limit in real
#: ``nvidia-smi -q`` captures, ../shared/realdata/nvidia-smi-q/; H800 SXM and H100 PCIe from
#: ../shared/REFERENCE.md). Laptop GPUs are left out: their limit moves with the platform.
DATASHEET_POWER_LIMIT_W: dict[str, float] = {
    "nvidia a10": 150.0,
    "nvidia a40": 300.0,
    "nvidia a100-sxm4-80gb": 500.0,
    "nvidia gh200 480gb": 900.0,
    "nvidia h100 80gb hbm3": 700.0,
    "nvidia h100 nvl": 400.0,
    "nvidia h100 pcie": 350.0,
    "nvidia h200": 700.0,
    "nvidia h800": 700.0,
    "nvidia l4": 72.0,
    "nvidia l40s": 350.0,
    "nvidia rtx 2000 ada generation": 70.0,
    "nvidia rtx 4000 ada generation": 130.0,
    "nvidia rtx 6000 ada generation": 300.0,
    "nvidia rtx a6000": 300.0,
    "nvidia geforce gtx 1050 ti": 75.0,
    "nvidia geforce rtx 3070": 220.0,
    "nvidia geforce rtx 3080": 320.0,
    "nvidia geforce rtx 3090": 350.0,
    "nvidia geforce rtx 4060 ti": 165.0,
    "nvidia geforce rtx 4090": 450.0,
    "nvidia geforce rtx 5090": 575.0,
    "tesla v100-sxm2-16gb": 300.0,
}


def datasheet_power_limit_w(gpu_name: str | None) -> float | None:
    """The board power limit of a GPU known by its exact reported name, else None."""
    if not gpu_name:
        return None
    return DATASHEET_POWER_LIMIT_W.get(" ".join(gpu_name.lower().split()))


@dataclass(frozen=True)
class PowerCap:
    """How a run met its power limit, for the verdict and its sentence."""

    #: None: the run did not meet its limit.
    kind: PowerCapKind | None
    #: The averaged power under load (a 10 % trimmed mean), W, over the samples the cap bit marks where it marks
    #: any (the power while capped, as ``advisor.cap_share`` means it); None without power readings.
    level_w: float | None
    #: Share of the load time at >= 95 % of the limit (None without a limit).
    at_limit_share: float | None

    @property
    def limited(self) -> bool:
        return self.kind is not None


def _trimmed_mean(values: FloatArray) -> float | None:
    finite = np.sort(values[np.isfinite(values)])
    if not finite.size:
        return None
    cut = int(finite.size * 0.1)
    return float(np.mean(finite[cut:finite.size - cut]))


def power_cap(power_w: FloatArray | None, sm_clock_mhz: FloatArray | None, loaded: BoolArray,
              interval_s: FloatArray, *, limit_w: float | None, cap_share: float,
              capped: BoolArray | None = None) -> PowerCap:
    """How the run under ``loaded`` met its limit; ``cap_share``: the share of the load with the cap bit set,
    ``capped``: the samples it was set in. The level is the power while capped where the bit says when: a job
    that waits on its data loader half the time is at its limit while capped, not at the mean of both halves
    (a card once said "55 % of the load at 95 W, 63 % of its 150 W power limit: another limit")."""
    n = loaded.shape[0]
    power = np.asarray(power_w, dtype=np.float64)[:n] if power_w is not None else np.full(n, np.nan)
    ok = loaded & np.isfinite(power)
    while_capped = ok & capped[:n] if capped is not None and capped.shape[0] >= n else None
    level_rows = while_capped if while_capped is not None and while_capped.any() else ok
    level = _trimmed_mean(power[level_rows]) if level_rows.any() else None
    limit = limit_w if limit_w and limit_w > 0 else None
    at_share = None
    if limit is not None and ok.any():
        weight = interval_s[ok]
        at_share = float(np.sum(weight[power[ok] >= AT_LIMIT_SHARE * limit]) / np.sum(weight))
    if limit is not None and level is not None and level >= AT_LIMIT_SHARE * limit:
        return PowerCap("at_limit", level, at_share)
    if cap_share >= CAP_MOST_SHARE:
        if limit is None or level is None:
            return PowerCap("at_limit", level, at_share)  # the driver says so; nothing to weigh it against
        return PowerCap("below_limit" if level < BELOW_LIMIT_SHARE * limit else "cap_bit", level, at_share)
    if limit is None and level is not None:
        plateau_w = plateau_level_w(power, sm_clock_mhz, loaded)
        if plateau_w is not None:
            return PowerCap("plateau", plateau_w, None)
    return PowerCap(None, level, at_share)
