"""Laptop power-envelope advice: busy time held below the rated power, and why; what training on battery cost.

Read from the history's ``envelope.limit`` events (one per GPU whenever the one line on its limit
changes: advisor/envelope.py) and the host's AC/battery column. The share threshold is the power-cap
rule's (``[advisor] power_cap_share_pct``), the battery minimum the battery rule's
(``battery_heavy_minutes``): one setting each for "how much is worth saying". Nothing here suggests
``nvidia-smi -pl``: laptop GPUs refuse it; clock locking (``-lgc``) is offered as a heat-for-speed trade.
"""

from __future__ import annotations

import re

import numpy as np

from advisor.clock_reference import is_vf_top
from advisor.envelope import POWERD_COMMAND, Cause, cause_from_line
from advisor.frame import Event, GpuSeries, held_most
from advisor.rules.base import (
    HEAVY_UTIL_PCT,
    Evidence,
    Recommendation,
    RuleContext,
    Severity,
    busy_share,
    fires,
    job_evidence,
    ranges,
)
from advisor.stats import BoolArray, weighted_mean

#: The causes worth advice, how the title says them, and how severe each is. Not here: on battery (the
#: battery rules say it, with what it cost) and a Balanced-like mode (the vendor's default, a choice of
#: noise against speed: `rigscope stress --per-mode` measures what it costs, and the line names it).
_CAUSES: dict[Cause, tuple[str, Severity]] = {
    "powerd_stopped": ("because nvidia-powerd was not running (no Dynamic Boost)", "warning"),
    "firmware_saving": ("in a power-saving firmware mode", "warning"),
}
_LIMITS = re.compile(r"^capped at (\d+(?:\.\d+)?) W of (\d+(?:\.\d+)?) W: (.*)$")
#: Below this loss a battery run is not worth a card (noise between runs of one job).
_MIN_BATTERY_COST = 0.05


def _limit_events(ctx: RuleContext, gpu: GpuSeries) -> list[Event]:
    return sorted((e for e in ctx.frame.events if e.kind == "envelope.limit" and e.gpu_uuid == gpu.meta.uuid),
                  key=lambda e: e.time_s)


def _row_events(gpu: GpuSeries, events: list[Event]) -> np.ndarray:
    """Per row, the index of the latest envelope.limit event at or before it (-1: before the first)."""
    times = np.asarray([e.time_s for e in events], dtype=np.float64)
    return np.asarray(np.searchsorted(times, gpu.time_s, side="right") - 1)


def _sustained_clock_mhz(gpu: GpuSeries) -> float | None:
    """A clock this GPU sustains: its reported max unless that is a V/F top (Ada's 3,105 MHz, which no laptop
    reaches; ``advisor.clock_reference``), else the 95th percentile of its clock while busy; None: unknown."""
    clock = gpu.meta.sm_clock_max_mhz
    if clock and not is_vf_top(clock):
        return clock
    busy = (gpu.utilization_gpu_pct >= 50.0) & np.isfinite(gpu.sm_clock_mhz)
    return float(np.percentile(gpu.sm_clock_mhz[busy], 95)) if busy.any() else None


def clock_lock_hint(gpu: GpuSeries) -> str:
    clock = _sustained_clock_mhz(gpu)
    top = int(round(clock * 0.85 / 15.0) * 15) if clock else 1800
    return (f"To trade speed for heat and noise instead, lock the clock: `sudo nvidia-smi -i {gpu.meta.index} "
            f"-lgc 210,{top}` (undo: `sudo nvidia-smi -i {gpu.meta.index} -rgc`); the power limit itself belongs "
            "to the firmware on laptops (the driver refuses to change it).")


def _action(cause: Cause, detail: str, gpu: GpuSeries) -> str:
    if cause == "powerd_stopped":
        first = (f"Start Dynamic Boost's service and keep it on: `{POWERD_COMMAND}` (it moves up to ~25 W from the "
                 "CPU to the GPU, on AC and under load; `systemctl status nvidia-powerd` shows whether it stays up).")
    elif cause == "on_battery":
        first = ("Plug the charger in for long jobs: on battery the firmware cuts the GPU's power and "
                 "Dynamic Boost is off.")
    else:
        msi = any(name in detail for name in ("Eco", "Balanced", "Sport", "Extreme Performance"))
        first = ("Switch MSI Center to Extreme Performance (Linux, msi-ec: "
                 "`echo turbo | sudo tee /sys/devices/platform/msi-ec/shift_mode`) for long runs."
                 if msi else "Switch the firmware to its performance mode for long runs "
                             "(Linux: `echo performance | sudo tee /sys/firmware/acpi/platform_profile`).")
    return f"{first} {clock_lock_hint(gpu)}"


def _limit_meanwhile(gpu: GpuSeries, rows: BoolArray, from_events: list[float]) -> float:
    if gpu.power_limit_w is not None and (held := held_most(gpu.power_limit_w[rows], gpu.duration_s[rows])):
        return held
    return min(from_events) if from_events else float("nan")


def below_rated_power(ctx: RuleContext) -> list[Recommendation]:
    """"40 % of your busy time ran below the rated power because nvidia-powerd was not running"."""
    out = []
    for gpu in ctx.frame.gpus:
        if not gpu.meta.is_laptop or not ctx.enough_busy(gpu):
            continue
        events = _limit_events(ctx, gpu)
        if not events:
            continue
        causes = [cause_from_line(e.detail) for e in events]
        at = _row_events(gpu, events)
        busy = ctx.gpu_busy(gpu)
        for cause, (why, severity) in _CAUSES.items():
            picked = [i for i, c in enumerate(causes) if c == cause]
            if not picked:
                continue
            mask: BoolArray = np.isin(at, picked)
            share = busy_share(ctx, gpu, np.where(mask, busy, 0.0))
            if not fires(share, ctx.thresholds.power_cap_share_pct):
                continue
            limits = [_LIMITS.match(events[i].detail) for i in picked]
            limit_w = [float(m.group(1)) for m in limits if m]
            rated_w = next((float(m.group(2)) for m in limits if m), float("nan"))
            busy_mask = mask & (busy > 0)
            full = ~mask & (busy > 0)
            evidence = (
                Evidence(f"Busy time below the rated power {why}", share.share * 100.0, "%"),
                *job_evidence(share, "Below rated power"),
                Evidence("Busy time affected", share.seconds / 3600.0, "h"),
                # The stored limit in force over those rows (the same reading as the event's line); a frame without
                # stored limits reads the events' own figures.
                Evidence("Power limit meanwhile", _limit_meanwhile(gpu, busy_mask, limit_w), "W"),
                Evidence("Rated power", rated_w, "W"),
                Evidence("Mean power meanwhile", weighted_mean(gpu.power_w[busy_mask], gpu.duration_s[busy_mask]), "W"),
                Evidence("Mean power when not", weighted_mean(gpu.power_w[full], gpu.duration_s[full]), "W"),
            )
            title = (f"GPU {gpu.meta.index}: {share.share * 100.0:.0f} % of its busy time ran below the rated "
                     f"power {why}")
            out.append(Recommendation(f"envelope_{cause}", severity, title, evidence,
                                      _action(cause, " ".join(events[i].detail for i in picked), gpu),
                                      ranges(gpu, busy_mask), gpu.meta.index, "power_w", share.seconds / 3600.0,
                                      gpu_key=gpu.meta.key))
    return out


def battery_cost(ctx: RuleContext) -> list[Recommendation]:
    """"Training on battery cost you 38 % throughput": the SM clock of heavy work on battery against on AC.

    In compute-bound work throughput follows the SM clock, so the clock ratio of the same kind of work
    (utilization at or above the heavy mark) is the throughput lost; memory-bound work loses less.
    """
    out = []
    minimum_s = ctx.thresholds.battery_heavy_minutes * 60.0
    for gpu in ctx.frame.gpus:
        heavy = np.asarray(np.nan_to_num(gpu.utilization_gpu_pct) >= HEAVY_UTIL_PCT)
        ac = ctx.host_at(gpu, "on_ac_power")
        on_battery = heavy & np.asarray(ac == 0.0) & np.isfinite(gpu.sm_clock_mhz)
        on_ac = heavy & np.asarray(ac == 1.0) & np.isfinite(gpu.sm_clock_mhz)
        battery_s, ac_s = float(gpu.duration_s[on_battery].sum()), float(gpu.duration_s[on_ac].sum())
        if battery_s < minimum_s or ac_s < minimum_s:
            continue
        clock_battery = weighted_mean(gpu.sm_clock_mhz[on_battery], gpu.duration_s[on_battery])
        clock_ac = weighted_mean(gpu.sm_clock_mhz[on_ac], gpu.duration_s[on_ac])
        if not (np.isfinite(clock_battery) and np.isfinite(clock_ac) and clock_ac > 0):
            continue
        cost = 1.0 - clock_battery / clock_ac
        if cost < _MIN_BATTERY_COST:
            continue
        evidence = (
            Evidence("Throughput lost on battery (SM clock, compute-bound)", cost * 100.0, "%"),
            Evidence("Heavy work on battery", battery_s / 60.0, "min"),
            Evidence("Mean SM clock on battery", clock_battery, "MHz"),
            Evidence("Mean SM clock on AC", clock_ac, "MHz"),
            Evidence("Mean power on battery", weighted_mean(gpu.power_w[on_battery], gpu.duration_s[on_battery]), "W"),
            Evidence("Mean power on AC", weighted_mean(gpu.power_w[on_ac], gpu.duration_s[on_ac]), "W"),
        )
        out.append(Recommendation(
            "envelope_battery_cost", "warning",
            f"GPU {gpu.meta.index}: training on battery cost you {cost * 100.0:.0f} % throughput", evidence,
            "Plug the charger in for training: on battery the firmware holds the GPU far below its power limit, "
            "Dynamic Boost is off, and the battery wears. " + (clock_lock_hint(gpu) if gpu.meta.is_laptop else ""),
            ranges(gpu, on_battery), gpu.meta.index, "sm_clock_mhz", battery_s / 3600.0 * cost, gpu_key=gpu.meta.key))
    return out
