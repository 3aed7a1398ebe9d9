"""The verdict in words: the one plain sentence, durations, and the comparison with the baseline run.

Kept apart from the judging (``verdict``) so each reads on its own; pure Python and numpy.
Which earlier run is the baseline is the advisor's ``pick_baseline``, shared with its
regression rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from advisor.causes import CAUSE_LABELS, SLOWDOWN_CAUSES, SLOWDOWN_MIN_SHARE, VerdictCause
from advisor.clock_reference import ClockReference
from advisor.forecast_text import forecast_clause, still_heating_sentence, still_warming
from advisor.frame import StressResult
from advisor.power_cap import WHOLE_RUN_SHARE
from advisor.safetext import printable
from advisor.verdict_model import RunTrace, Verdict
from advisor.wording import count_text, format_duration

__all__ = ["compare_with_baseline", "format_duration", "power_cap_clause", "sentence_for", "shared_run_sentence"]


def _fmt(value: float, unit: str = "") -> str:
    if unit == "MHz":
        return f"{value:,.0f}"
    if abs(value) < 10:
        return f"{value:.3g}"
    return f"{value:.1f}" if abs(value) < 1000 else f"{value:,.0f}"


def _pct(ratio: float) -> str:
    """A share as a whole percentage, never above 100 (a ratio over 1 is noise or a wrong reference)."""
    return f"{min(ratio, 1.0) * 100.0:.0f} %"


def _of_max_clock(verdict: Verdict) -> str:
    """ "91 % of the GPU's reported max (1,980 MHz)", "99 % of its early sustained clock (1,935 MHz)": the
    reference (``advisor.clock_reference``) named every time."""
    if verdict.clock_ratio is None or verdict.clock_reference_mhz is None or verdict.clock_reference_basis is None:
        return ""
    reference = ClockReference(verdict.clock_reference_mhz, verdict.clock_reference_basis)
    return f"{_pct(verdict.clock_ratio)} of {reference.phrase()}"


def _limit_text(verdict: Verdict, trace: RunTrace) -> str:
    """ "its 700 W power limit", with where a datasheet figure came from."""
    if verdict.power_limit_w is None:
        return "its power limit"
    text = f"its {verdict.power_limit_w:.0f} W power limit"
    if verdict.power_limit_source == "datasheet":
        text += f" (the datasheet figure for an {printable(trace.gpu_name or 'unnamed GPU')})"
    elif verdict.power_limit_source == "given":
        text += " (as given with --power-limit)"
    return text


def plateau_clause(level_w: float, trace: RunTrace) -> str:
    """A limit the log does not name, seen in its power plateau (``advisor.power_plateau``)."""
    where = "in the log" if trace.power_limit_source in ("log", "datasheet", "given") else "reported"
    return f"held at a power limit near {level_w:.0f} W (no limit {where})"


def _number(step: Mapping[str, object], key: str) -> float:
    """A figure of a ``Verdict.power_limit_steps`` entry; 0 where it is missing."""
    value = step.get(key)
    return float(value) if isinstance(value, int | float) else 0.0


#: More steps than this are said as a range ("moved 12 times between 80 and 175 W"), not one by one.
MAX_STEPS_SAID = 4


def limit_steps_clause(steps: list[dict[str, object]]) -> str:
    """A run whose limit moved, step by step: "at its 80 W power limit until 10:04, then at its 175 W limit: the
    limit moved under load (...)". Each step against its own limit; times are local, to the second only where
    two changes share a minute. Over ``MAX_STEPS_SAID`` steps, the range and the share of the load at the limit
    in force."""
    why = ("the limit moved under load (Dynamic Boost, a power mode, the battery or a limit set by hand); "
           "each step judged at its own limit")
    if len(steps) > MAX_STEPS_SAID:
        limits = [_number(step, "limit_w") for step in steps]
        load_s = sum(_number(step, "load_s") for step in steps)
        at_s = sum(_number(step, "power_at_limit_share") * _number(step, "load_s") for step in steps)
        share = at_s / load_s if load_s > 0 else 0.0
        return (f"at its power limit {_pct(share)} of the load as the limit moved {len(steps) - 1} times between "
                f"{min(limits):.0f} and {max(limits):.0f} W: {why}")
    ends = [datetime.fromtimestamp(_number(step, "end_s"), tz=UTC).astimezone() for step in steps[:-1]]
    pattern = "%H:%M" if len({end.strftime("%H:%M") for end in ends}) == len(ends) else "%H:%M:%S"
    parts = []
    for index, step in enumerate(steps):
        limit_w = _number(step, "limit_w")
        limit = f"its {limit_w:.0f} W {'power limit' if index == 0 else 'limit'}"
        level = _number(step, "power_level_w")
        if step.get("power_cap") == "at_limit":
            text = f"at {limit}"
        elif level > 0 and limit_w > 0:
            text = f"at {level:.0f} W, {_pct(level / limit_w)} of {limit}"
        else:
            text = f"under {limit}"
        parts.append(text + (f" until {ends[index].strftime(pattern)}" if index < len(ends) else ""))
    return ", then ".join(parts) + f": {why}"


def power_cap_clause(verdict: Verdict, trace: RunTrace) -> str:
    """The power cap in plain words ("at its 700 W power limit the whole run: normal for a dense GEMM; ..."), or ""."""
    of_max = _of_max_clock(verdict)
    cap_share = verdict.cause_shares.get("power_cap", 0.0)
    level = verdict.power_level_w
    if len(verdict.power_limit_steps) > 1:
        return limit_steps_clause(verdict.power_limit_steps)
    if verdict.power_cap == "at_limit":
        share = verdict.power_at_limit_share
        whole = "the whole run" if share is None or share >= WHOLE_RUN_SHARE else f"{_pct(share)} of the run"
        # A log (judged on its clock) or a GEMM stress run is the dense GEMM case; a job's own throughput is any load.
        normal = "normal for a dense GEMM" if verdict.basis == "clock" or verdict.unit == "TFLOP/s" \
            else "normal under full load"
        text = f"at {_limit_text(verdict, trace)} {whole}: {normal}"
        return text + (f"; the clock at {of_max} is what that limit buys" if of_max else "")
    if verdict.power_cap in ("cap_bit", "below_limit") and level is not None and verdict.power_limit_w:
        text = (f"power cap active {_pct(cap_share)} of the load at {level:.0f} W, "
                f"{_pct(level / verdict.power_limit_w)} of {_limit_text(verdict, trace)}")
        if verdict.power_cap == "below_limit":
            return text + ": another limit than the board power (a clock setting or power policy)"
        return text + (f"; the clock at {of_max} is what that limit buys" if of_max else "")
    if verdict.power_cap == "plateau" and level is not None:
        return plateau_clause(level, trace)
    return ""


def _slowdown_shares(verdict: Verdict, leave_out: VerdictCause | None = None) -> str:
    """"HW thermal slowdown 6.6 %, power brake 3 %": each slowdown cause at or above the throttle threshold
    but ``leave_out`` (the sentence's main cause), largest first."""
    shares = sorted(((verdict.cause_shares.get(c, 0.0), c) for c in SLOWDOWN_CAUSES if c != leave_out),
                    reverse=True)
    parts = [f"{CAUSE_LABELS[c]} {_share_pct(share)}" for share, c in shares if share >= SLOWDOWN_MIN_SHARE]
    return ", ".join(parts)


def _share_pct(share: float) -> str:
    """A share as a percentage with a decimal where it is small: 6.6 %, 68 %."""
    pct = share * 100.0
    return f"{pct:.1f} %" if pct < 10 else f"{pct:.0f} %"


def _start_temperature(trace: RunTrace) -> float | None:
    """The GPU's temperature at the first sample (a test started warm reaches its limit sooner)."""
    if trace.temperature_c is None or len(trace.temperature_c) == 0:
        return None
    finite = trace.temperature_c[np.isfinite(trace.temperature_c)]
    return float(finite[0]) if len(finite) else None


def _throttled_where(verdict: Verdict, trace: RunTrace, cap: str) -> str:
    """Where a throttled run met its cause: " at 87 °C", " at the 700 W limit", or the plateau / the steps."""
    if verdict.cause == "power_cap" and (verdict.power_cap == "plateau" or len(verdict.power_limit_steps) > 1):
        return f", {cap}"  # the plateau, or the limit step by step
    if verdict.cause_family == "power" and trace.power_limit_w:
        return f" at the {trace.power_limit_w:.0f} W limit"
    if verdict.onset_temperature_c is not None and verdict.cause_family == "thermal":
        return f" at {verdict.onset_temperature_c:.0f} °C"
    return ""


def sentence_for(verdict: Verdict, trace: RunTrace, min_load_s: float = 0.0) -> str:
    """The sentence for a judged run: "Throttled after 3 min 40 s: HW thermal slowdown at 87 °C; ..." and the like."""
    unit = f" {verdict.unit}" if verdict.unit else ""
    label = CAUSE_LABELS.get(verdict.cause, "") if verdict.cause else ""
    of_max = _of_max_clock(verdict)
    clock = f"clock at {of_max}" if of_max else ""
    cap = power_cap_clause(verdict, trace)
    if verdict.load_s < min_load_s:
        shown = format_duration(verdict.load_s)
        if shown == format_duration(min_load_s):  # 29.6 s is no "30 s ... (needs 30 s)"
            shown = f"{verdict.load_s:.1f} s" if verdict.load_s < 60 else f"{verdict.load_s / 60:.2f} min"
        text = (f"Load of {shown}: too short for a sustained verdict (needs "
                f"{format_duration(min_load_s)})")
        text += f"; {cap}" if cap else ""
        text += f"; median {verdict.basis} {_fmt(verdict.sustained, verdict.unit)}{unit}"
        text += f", {of_max}" if of_max and verdict.basis == "clock" and of_max not in cap else ""
    else:
        # "Peak" was the best sustained level early in the run (after warm-up), and is named so.
        figures = (f"sustained {verdict.basis} {_pct(verdict.sustained_ratio)} of its early sustained level "
                   f"({_fmt(verdict.sustained, verdict.unit)} vs {_fmt(verdict.peak, verdict.unit)}{unit})")
        if verdict.onset_s is not None:
            where = _throttled_where(verdict, trace, cap)
            when = "from the start" if verdict.onset_s <= 0.0 else f"after {format_duration(verdict.onset_s)}"
            main = verdict.cause_shares.get(verdict.cause, 0.0) if verdict.cause in SLOWDOWN_CAUSES else 0.0
            share = f" ({_share_pct(main)} of the time under load)" if main > 0 else ""
            text = f"Throttled {when}: {label}{where}{share}; {figures}"
            others = _slowdown_shares(verdict, leave_out=verdict.cause)
            if others:  # every other cause above the threshold, each named once
                text += f"; also {others}"
            start_c = _start_temperature(trace)
            if start_c is not None and verdict.cause_family == "thermal" and verdict.onset_s > 0.0:
                text += f"; the test started from {start_c:.0f} °C"
        elif verdict.throttled:
            held = f", {cap}" if verdict.cause == "power_cap" and verdict.power_cap == "plateau" else ""
            text = f"Throttled: {label or CAUSE_LABELS['unexplained']}{held}; {figures}"
        elif verdict.status == "inconclusive":  # what the run could judge, then the forecast (advisor.forecast_text)
            text = still_heating_sentence(verdict, cap, clock, figures)
        elif cap:
            joint = " " if cap.startswith("at ") else " while " if cap.startswith("held ") else ": "
            text = f"Held its speed{joint}{cap}; {figures}"
            if verdict.power_cap in ("at_limit", "plateau") and verdict.cause_shares.get("power_cap", 0.0) > 0:
                text += f"; power cap active {_pct(verdict.cause_shares['power_cap'])} of the time under load"
            text += f"; {clock}" if clock and of_max not in cap else ""
        else:
            text = f"Held its speed: {figures}" + (f"; {clock}" if clock else "")
        if verdict.status == "passed" and verdict.forecast is not None and still_warming(verdict):
            text += f"; still warming: {forecast_clause(verdict.forecast)}"  # a short run, heading somewhere safe
    if len(verdict.power_limit_steps) > 1 and cap not in text:  # every verdict says the limit moved
        text += f"; {cap}"
    if verdict.errors:
        text = (f"{count_text(verdict.errors, 'result error')} in {count_text(verdict.checks, 'check')} — "
                "the GPU computed wrong results. " + text)
    return text + "."


def compare_with_baseline(verdict: Verdict, baseline: StressResult | None, regression_pct: float = 5.0) -> Verdict:
    """Add the comparison with the baseline run (``advisor.baseline.pick_baseline``); unchanged without one."""
    if baseline is None or baseline.sustained_throughput <= 0 or not np.isfinite(verdict.sustained):
        return verdict
    when = datetime.fromtimestamp(baseline.started_s, tz=UTC).astimezone()
    run = f"run {baseline.run_id}, " if baseline.run_id > 0 else ""
    date = f"{when.day} {when.strftime('%b')} ({run}{format_duration(baseline.ended_s - baseline.started_s)})"
    delta_pct = (verdict.sustained / baseline.sustained_throughput - 1.0) * 100.0
    if delta_pct <= -regression_pct:
        text = f"{-delta_pct:.0f} % below your baseline from {date} — check dust, fan mode, driver"
    elif delta_pct >= regression_pct:
        text = f"{delta_pct:.0f} % above your baseline from {date}"
    else:
        text = f"within {abs(delta_pct):.0f} % of your baseline from {date}"
    return replace(verdict, comparison=text)


def shared_run_sentence(shared_with: list[str] | None) -> str:
    """The sentence for a run that shared its GPU with other compute processes ("" when it did not)."""
    if not shared_with:
        return ""
    names = ", ".join(printable(label) for label in shared_with[:3])
    more = f" and {len(shared_with) - 3} more" if len(shared_with) > 3 else ""
    return (f"Shared run: other compute processes used this GPU during the test ({names}{more}); its throughput, "
            "clocks and temperatures include their load.")
