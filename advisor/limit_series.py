"""The enforced power limit over time: the limit in force at each sample, where it stepped, and each step's cap.

Pure numpy, for the verdict. On laptops the enforced limit moves under load: Dynamic Boost (with
nvidia-powerd) raises an RTX 4080 Laptop GPU from its 80 W base to 105, 150 and 175 W, a firmware
mode or the battery lowers it. Judging a run against one limit (the log's last value, say) calls a
run held at its then-enforced 80 W "46 % of its 175 W power limit". So a trace carries the limit
per sample (``RunTrace.power_limit_series_w``, NaN where unknown); a run under one limit is judged
against that limit, and a run that spans a change is judged piecewise, each step against its own
limit, and its sentence says so with the times ("at its 80 W power limit until 10:04, then at its
175 W limit"). ``run_against_limit`` is that choice for ``judge``, and ``power_fields`` the Verdict's
power figures it leads to.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from advisor.causes import CauseTimes
from advisor.frame import held_most
from advisor.power_cap import PowerCap, PowerCapKind, power_cap
from advisor.verdict_model import PowerLimitSource, RunTrace

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: A change of more than this share of the limit in force (and ``LIMIT_STEP_MIN_W``) is a new limit:
#: drivers report the limit in 0.01 W steps and a firmware re-read can wobble by a fraction of a watt.
LIMIT_STEP_SHARE = 0.03
LIMIT_STEP_MIN_W = 2.0
#: A limit held for less than this is a blip, not a step: it stays with the step before it.
MIN_STEP_S = 5.0


@dataclass(frozen=True)
class LimitStep:
    """Samples [start, stop) of a run under one enforced limit."""

    start: int
    stop: int
    limit_w: float


def limit_in_force(series_w: FloatArray | None, fallback_w: float | None, n: int) -> FloatArray | None:
    """The limit at each of ``n`` samples: the series with its gaps filled from the last known value (the first
    known one before it), else ``fallback_w``; None when neither says anything."""
    fallback = fallback_w if fallback_w and fallback_w > 0 else np.nan
    if series_w is None:
        return None if np.isnan(fallback) else np.full(n, fallback, dtype=np.float64)
    values = np.asarray(series_w, dtype=np.float64)[:n]
    if values.shape[0] < n:
        values = np.concatenate([values, np.full(n - values.shape[0], np.nan)])
    known = np.isfinite(values) & (values > 0)
    if not known.any():
        return None if np.isnan(fallback) else np.full(n, fallback, dtype=np.float64)
    # Forward fill: index of the last known value at or before each sample; before the first, the first.
    last = np.maximum.accumulate(np.where(known, np.arange(n), -1))
    last[last < 0] = int(np.flatnonzero(known)[0])
    filled: FloatArray = values[last]
    return filled


def limit_steps(time_s: FloatArray, limit_w: FloatArray) -> list[LimitStep]:
    """The stretches of one limit, in time order; a limit held for under ``MIN_STEP_S`` joins the step before it."""
    n = limit_w.shape[0]
    if n == 0:
        return []
    starts = [0]
    current = float(limit_w[0])
    # Only where the value changed at all (a limit holds for minutes: a 7 ms log has few such samples).
    for i in np.flatnonzero(np.diff(limit_w) != 0) + 1:
        value = float(limit_w[i])
        if abs(value - current) > max(LIMIT_STEP_MIN_W, LIMIT_STEP_SHARE * current):
            starts.append(int(i))
            current = value
    bounds = [*starts, n]
    steps: list[LimitStep] = []
    for start, stop in itertools.pairwise(bounds):
        end_s = float(time_s[stop]) if stop < n else float(time_s[-1])
        limit = float(np.median(limit_w[start:stop]))
        if steps and (end_s - float(time_s[start]) < MIN_STEP_S and stop < n):
            steps[-1] = LimitStep(steps[-1].start, stop, steps[-1].limit_w)  # a blip
            continue
        if steps and _same(steps[-1].limit_w, limit):
            steps[-1] = LimitStep(steps[-1].start, stop, steps[-1].limit_w)  # back to the same limit after a blip
            continue
        steps.append(LimitStep(start, stop, limit))
    if len(steps) > 1 and float(time_s[steps[1].start] - time_s[0]) < MIN_STEP_S:
        steps[:2] = [LimitStep(0, steps[1].stop, steps[1].limit_w)]  # a blip as the log starts
    return steps


def _same(a_w: float, b_w: float) -> bool:
    return abs(a_w - b_w) <= max(LIMIT_STEP_MIN_W, LIMIT_STEP_SHARE * a_w)


def loaded_steps(time_s: FloatArray, limit_w: FloatArray, loaded: BoolArray) -> list[LimitStep]:
    """``limit_steps`` of the samples under load only: a limit that moved while idle does not split the run, and
    one limit on both sides of an idle step is one step."""
    steps = limit_steps(time_s, limit_w)
    out: list[LimitStep] = []
    for step in (s for s in steps if loaded[s.start:s.stop].any()):
        if out and _same(out[-1].limit_w, step.limit_w):
            out[-1] = LimitStep(out[-1].start, step.stop, out[-1].limit_w)
        else:
            out.append(step)
    return out or steps[:1]


def steps_power_cap(steps: list[LimitStep], time_s: FloatArray, *, power_w: FloatArray | None,
                    sm_clock_mhz: FloatArray | None, loaded: BoolArray, interval_s: FloatArray,
                    causes: CauseTimes | None) -> tuple[PowerCap, list[dict[str, object]]]:
    """Each step's power cap against its own limit, and the run's as a whole (each sample against the limit in
    force): the steps as dicts for ``Verdict.power_limit_steps`` (start_s, end_s, limit_w, load_s,
    power_level_w, power_cap, power_at_limit_share)."""
    n = loaded.shape[0]
    out: list[dict[str, object]] = []
    caps: list[tuple[PowerCap, float]] = []
    at_limit_s = weighed_s = 0.0
    for index, step in enumerate(steps):
        mask = np.zeros(n, dtype=bool)
        mask[step.start:step.stop] = True
        mask &= loaded
        cap_share = causes.share("power_cap", mask, interval_s) if causes is not None and mask.any() else 0.0
        cap = power_cap(power_w, sm_clock_mhz, mask, interval_s, limit_w=step.limit_w, cap_share=cap_share)
        load_s = float(np.sum(interval_s[mask]))
        caps.append((cap, load_s))
        if cap.at_limit_share is not None:
            at_limit_s += cap.at_limit_share * load_s
            weighed_s += load_s
        end = steps[index + 1].start if index + 1 < len(steps) else None
        out.append({"start_s": float(time_s[step.start]),
                    "end_s": float(time_s[end]) if end is not None else float(time_s[-1] + interval_s[-1]),
                    "limit_w": step.limit_w, "load_s": load_s, "power_level_w": cap.level_w,
                    "power_cap": cap.kind, "power_at_limit_share": cap.at_limit_share})
    limited = [(cap, s) for cap, s in caps if cap.limited]
    kind: PowerCapKind | None = None
    if limited:
        kinds = {cap.kind for cap, _ in limited}
        # At its limit in every step it was limited in; else the kind that held the most load time.
        kind = "at_limit" if kinds == {"at_limit"} else max(limited, key=lambda pair: pair[1])[0].kind
    power = np.asarray(power_w, dtype=np.float64)[:n] if power_w is not None else np.full(n, np.nan)
    ok = loaded & np.isfinite(power)
    level = _trimmed_mean(power[ok]) if ok.any() else None
    return PowerCap(kind, level, at_limit_s / weighed_s if weighed_s > 0 else None), out


def _trimmed_mean(values: FloatArray) -> float:
    finite = np.sort(values)
    cut = int(finite.size * 0.1)
    return float(np.mean(finite[cut:finite.size - cut]))


def held_over_load(steps: list[LimitStep], load_s: FloatArray) -> float:
    """The steps' limit held over most of the load time: ``frame.held_most``, the one figure a job's card and a
    range's figures take, over each step's limit weighted by its seconds under load (``load_s``, each step's as
    ``steps_power_cap`` gives it; a limit the run came back to counts all its steps; a wobble within a step is its
    step's limit)."""
    held = held_most(np.array([step.limit_w for step in steps], dtype=np.float64), load_s)
    return held if held is not None else steps[0].limit_w


class PowerFields(TypedDict):
    """The Verdict's power figures: was the run power-limited, how, at what level against which limit."""

    power_limited: bool
    power_cap: PowerCapKind | None
    power_level_w: float | None
    power_limit_w: float | None
    power_limit_source: PowerLimitSource | None
    power_at_limit_share: float | None


def run_against_limit(trace: RunTrace, loaded: BoolArray, interval_s: FloatArray, causes: CauseTimes | None,
                      cap_share: float) -> tuple[RunTrace, PowerCap, list[dict[str, object]]]:
    """The run against the limit in force: one limit held -> that limit; a limit that moved under load -> each step
    against its own (the steps all of them, ``steps_power_cap``; the trace then carries the one held over most of
    the load, ``held_over_load``). ``cap_share``: the share of the load under the power-cap cause."""
    limits = limit_in_force(trace.power_limit_series_w, trace.power_limit_w, loaded.shape[0])
    steps = loaded_steps(trace.time_s, limits, loaded) if limits is not None else []
    if len(steps) > 1:
        cap, described = steps_power_cap(steps, trace.time_s, power_w=trace.power_w, sm_clock_mhz=trace.sm_clock_mhz,
                                         loaded=loaded, interval_s=interval_s, causes=causes)
        load_s = np.array([step["load_s"] for step in described], dtype=np.float64)
        return replace(trace, power_limit_w=held_over_load(steps, load_s)), cap, described
    if steps:
        trace = replace(trace, power_limit_w=steps[0].limit_w)
    return trace, power_cap(trace.power_w, trace.sm_clock_mhz, loaded, interval_s, limit_w=trace.power_limit_w,
                            cap_share=cap_share, capped=causes.on("power_cap") if causes is not None else None), []


def power_fields(trace: RunTrace, cap: PowerCap) -> PowerFields:
    """The Verdict's power figures of a run judged against ``trace``'s limit with ``cap`` (``run_against_limit``)."""
    limit = trace.power_limit_w if trace.power_limit_w and trace.power_limit_w > 0 else None
    return PowerFields(power_limited=cap.limited, power_cap=cap.kind, power_level_w=cap.level_w, power_limit_w=limit,
                       power_limit_source=trace.power_limit_source if limit else None,
                       power_at_limit_share=cap.at_limit_share)
