"""How much of a GPU's busy time ran under a power cap, and at which limit and power: from the capped samples.

The one computation the Advisor's power-cap card (``advisor/rules/gpu.py``) and a job card
(``advisor/job_figures.py``) share, so the same run is "capped 100 % of its 6.6 busy hours" in both, each
share said with what it is a share of. Three facts come from the capped seconds themselves, never from
the whole row or the GPU's last limit:

- the capped time: seconds under a power reason (SW power cap, HW power brake; NVML's counted time
  where the history has it), within the busy seconds it is a share of;
- the mean power while capped: each row's own mean power over its capped seconds (a minute rollup keeps
  it, schema v11), weighted by those seconds: a minute half capped at 580 W and half idle is 580 W, not 325 W;
- the limit in force while capped: each row's stored limit (``GpuSeries.power_limit_w``), so a laptop capped
  at 150 W before a firmware mode switch to 175 W is "held at its 150 W limit", not "108 W of its 175 W".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from advisor.clock_events import POWER_REASONS, bits
from advisor.frame import FloatArray, GpuSeries
from advisor.stats import BoolArray, reason_seconds

#: Averaged power at or above this share of the limit in force = at the limit (advisor/power_cap.py's rule).
AT_LIMIT_SHARE = 0.95


@dataclass(frozen=True)
class LimitStretch:
    """The capped time at one limit in force (W, None: not known), with the mean power meanwhile."""

    limit_w: float | None
    capped_s: float
    mean_power_w: float


@dataclass(frozen=True)
class CapShare:
    """A GPU's (or a job's) busy time under a power cap."""

    #: Busy seconds under a power reason (the numerator).
    capped_s: float
    #: Busy seconds judged (the denominator).
    busy_s: float
    #: Mean power over the capped seconds (W; NaN: no power readings while capped).
    mean_power_w: float
    #: The mean of power / limit in force over the capped seconds (NaN: no limit known).
    of_limit: float
    #: Each limit in force while capped, in the order it first held.
    stretches: tuple[LimitStretch, ...] = ()

    @property
    def share(self) -> float:
        return self.capped_s / self.busy_s if self.busy_s > 0 else 0.0

    @property
    def at_limit(self) -> bool:
        """The power while capped sat at >= 95 % of the limit then in force (unknown limit: the driver's word)."""
        return not math.isfinite(self.of_limit) or self.of_limit >= AT_LIMIT_SHARE

    @property
    def limit_w(self) -> float | None:
        """The limit in force over most of the capped time (None: not known)."""
        known = [s for s in self.stretches if s.limit_w is not None]
        return max(known, key=lambda s: s.capped_s).limit_w if known else None

    def text(self) -> str:
        """ "capped 55 % of its 41 busy minutes"."""
        return f"capped {self.share * 100.0:.0f} % of its {busy_text(self.busy_s)}"

    def limits_text(self) -> str:
        """ "150 W" or "150 W for 40 min, then 175 W for 3 min" (the limits in force while capped)."""
        known = [s for s in self.stretches if s.limit_w is not None]
        if len(known) <= 1:
            return f"{known[0].limit_w:g} W" if known else "limit not known"
        return ", then ".join(f"{s.limit_w:g} W for {duration_words(s.capped_s)}" for s in known)


def _scaled(seconds: float) -> tuple[str, str, str]:
    """``seconds`` in the unit that reads well: (figure, short unit, long unit)."""
    if seconds < 90:
        return f"{seconds:.0f}", "s", "seconds"
    if seconds < 7200:
        return f"{seconds / 60.0:.0f}", "min", "minutes"
    return f"{seconds / 3600.0:.1f}", "h", "hours"


def duration_words(seconds: float) -> str:
    """ "40 min", "6.6 h", "35 s"."""
    figure, short, _ = _scaled(seconds)
    return f"{figure} {short}"


def busy_text(seconds: float) -> str:
    """The denominator in words: "41 busy minutes", "6.6 busy hours", "50 busy seconds"."""
    figure, _, long = _scaled(seconds)
    return f"{figure} busy {long}"


def capped_seconds(gpu: GpuSeries) -> FloatArray:
    """Seconds per row under a power reason (SW power cap or HW power brake)."""
    return reason_seconds(gpu, bits(POWER_REASONS))


def capped_power_per_row(gpu: GpuSeries) -> FloatArray:
    """Each row's mean power over its capped seconds (NaN: none to weigh): the rollup's own figure or a raw
    sample's reading where a power bit was sampled; the whole row's mean where the history predates the figure.
    A row capped by NVML's count alone (the cap came and went between two samples) has no power of its capped
    time: its reading is of another moment (a data loader's trough), and it drops out of the mean."""
    if gpu.power_capped_w is None:
        return gpu.power_w
    older = np.isnan(gpu.capped_s) if gpu.capped_s is not None else np.ones(len(gpu), dtype=bool)
    return np.asarray(np.where(np.isfinite(gpu.power_capped_w), gpu.power_capped_w,
                               np.where(older, gpu.power_w, np.nan)), dtype=np.float64)


def cap_share(gpu: GpuSeries, capped_s: FloatArray, busy_s: FloatArray, rows: BoolArray | None = None) -> CapShare:
    """The busy time under a power cap over ``rows`` (default: all), from per-row ``capped_s`` and ``busy_s``
    (each already cut to the part of the row that counts: a job's span, its pauses left out)."""
    take = np.ones(len(gpu), dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
    capped = np.where(take, np.nan_to_num(capped_s), 0.0)
    busy = np.where(take, np.nan_to_num(busy_s), 0.0)
    hit = np.minimum(capped, busy)
    power = capped_power_per_row(gpu)
    limit = gpu.limit_per_row()
    weight = np.where(np.isfinite(power), capped, 0.0)
    total = float(weight.sum())
    mean_power = float((np.where(weight > 0, power, 0.0) * weight).sum() / total) if total > 0 else float("nan")
    with_limit = weight * (np.isfinite(limit) & (limit > 0))
    of_limit = (float((np.where(with_limit > 0, power / np.where(limit > 0, limit, 1.0), 0.0) * with_limit).sum()
                      / with_limit.sum()) if with_limit.sum() > 0 else float("nan"))
    return CapShare(float(hit.sum()), float(busy.sum()), mean_power, of_limit, _stretches(capped, power, limit))


def _stretches(capped: FloatArray, power: FloatArray, limit: FloatArray) -> tuple[LimitStretch, ...]:
    out: list[LimitStretch] = []
    at = np.flatnonzero(capped > 0)
    if not len(at):
        return ()
    keys = np.where(np.isfinite(limit[at]), limit[at], -1.0)
    values, first = np.unique(keys, return_index=True)
    for value in values[np.argsort(first)].tolist():
        mine = at[keys == value]
        seconds = capped[mine]
        ok = np.isfinite(power[mine])
        mean = float((power[mine][ok] * seconds[ok]).sum() / seconds[ok].sum()) if seconds[ok].sum() > 0 else math.nan
        out.append(LimitStretch(None if value < 0 else float(value), float(seconds.sum()), mean))
    return tuple(out)
