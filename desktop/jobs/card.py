"""The job card on the desktop side: the record and the history over its span into ``JobCard``, and its text.

``build_card`` gathers what the pure ``advisor.job_card`` needs (the job's GPUs in the frame, the
guard's pauses, the throughput series, the price tables, the latest measured GEMM speed, a
verdict when the caller has none) and ``format_card`` is the short block `rigscope run` prints
on stderr at the end and `rigscope jobs show` prints on stdout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from advisor.cap_share import CapShare
from advisor.clock_events import CLOCK_EVENT_COUNTERS
from advisor.costs import CloudOffer, GpuSpec
from advisor.frame import FloatArray, GpuSeries, HistoryFrame, StressResult
from advisor.job_card import CloudInputs, JobCard, JobInputs, job_card
from advisor.job_figures import THROTTLE_CAUSES, GpuFigures
from advisor.progress import JobSeries
from advisor.safetext import printable
from advisor.thresholds import Thresholds
from advisor.verdict import MIN_SUSTAINED_S, RunTrace, judge
from advisor.verdict_model import Verdict
from advisor.verdict_text import format_duration
from advisor.wording import parenthesized
from desktop.config import CostSettings
from desktop.history.frames import RAW_SPAN_LIMIT_S, load_frame
from desktop.history.store import HistoryStore
from desktop.jobs.model import JobRecord

#: A frame for a job should reach this far past its end: raw counters hold the time since the
#: sample before, so the last interval of the job is counted in the first sample after it.
FRAME_MARGIN_S = 5.0


def pause_spans(record: JobRecord, end_s: float) -> tuple[tuple[float, float], ...]:
    """[paused, resumed) spans from the guard's events; a pause never resumed lasts to ``end_s``."""
    spans: list[tuple[float, float]] = []
    paused_at: float | None = None
    for event in sorted(record.events, key=lambda e: e.time_s):
        if event.kind == "pause" and paused_at is None:
            paused_at = event.time_s
        elif event.kind == "resume" and paused_at is not None:
            spans.append((paused_at, event.time_s))
            paused_at = None
    if paused_at is not None:
        spans.append((paused_at, max(paused_at, end_s)))
    return tuple(spans)


def job_gpus(record: JobRecord, frame: HistoryFrame) -> list[GpuSeries]:
    """The job's GPUs in ``frame``: by UUID, else by index; every GPU of the frame when the record names none."""
    if record.gpu_uuids:
        return [g for g in frame.gpus if g.meta.uuid in record.gpu_uuids]
    if record.gpu_indices:
        return [g for g in frame.gpus if g.meta.index in record.gpu_indices]
    return list(frame.gpus)


def measured_tflops(stress_runs: Sequence[StressResult], gpu_uuid: str) -> float | None:
    """The latest complete, error-free GEMM stress result on this GPU (TFLOP/s sustained), as the Costs page uses."""
    gemm = [r for r in stress_runs if r.gpu_uuid == gpu_uuid and r.unit == "TFLOP/s" and r.workload == "gemm"
            and not r.errors and not r.aborted and r.device != "sim" and r.sustained_throughput > 0]
    return max(gemm, key=lambda r: r.started_s).sustained_throughput if gemm else None


def _held(series_time_s: FloatArray, values: FloatArray, at_s: FloatArray) -> FloatArray:
    """The job's throughput at each of ``at_s``: its last report at or before then (NaN outside the reports)."""
    if len(series_time_s) == 0:
        return np.full(len(at_s), np.nan)
    pos = np.searchsorted(series_time_s, at_s, side="right") - 1
    out = np.where(pos >= 0, values[np.clip(pos, 0, len(values) - 1)], np.nan)
    return np.asarray(np.where(at_s <= series_time_s[-1], out, np.nan), dtype=np.float64)


#: A job's rate is judged over two-minute means: a training loop's rate cycles with its data loader,
#: evaluation and checkpoints (tqdm smooths it, per-interval counts do not), and a stress-test window of
#: a few seconds would call that cycle a slowdown. A real throttle lasts minutes and survives the mean.
JOB_SMOOTH_S = 120.0


def rolling_mean(time_s: FloatArray, values: FloatArray, window_s: float) -> FloatArray:
    """The mean of the finite ``values`` within ``window_s`` centred on each time (NaN where none, or where
    the value itself is NaN: a pause stays a gap)."""
    finite = np.isfinite(values)
    sums = np.concatenate([[0.0], np.cumsum(np.where(finite, values, 0.0))])
    counts = np.concatenate([[0], np.cumsum(finite)])
    lo = np.searchsorted(time_s, time_s - window_s / 2.0, side="left")
    hi = np.searchsorted(time_s, time_s + window_s / 2.0, side="right")
    n = counts[hi] - counts[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (sums[hi] - sums[lo]) / n
    return np.asarray(np.where(finite & (n > 0), mean, np.nan), dtype=np.float64)


def judge_job(time_s: FloatArray, columns: dict[str, FloatArray], throughput: FloatArray | None, unit: str, *,
              pauses: Sequence[tuple[float, float]], sm_clock_max_mhz: float | None, power_limit_w: float | None,
              temp_slowdown_c: float | None) -> Verdict:
    """The throttle verdict on a job's own throughput (two-minute means, ``JOB_SMOOTH_S``; ``throughput`` at
    ``time_s``), on the SM clock when it reported none. ``columns`` are GPU samples named as in ``GpuSample``.

    Paused stretches are left out (a stopped job is not a slow one). The live run (``JobRun.verdict``) and a
    stored job's card (``job_verdict``) both judge here.
    """
    running = np.ones(len(time_s), dtype=bool)
    for paused_from, paused_to in pauses:
        running &= ~((time_s >= paused_from) & (time_s < paused_to))
    columns = dict(columns)
    for name, values in columns.items():  # a stopped job is neither slow nor throttled: no sample of a pause counts
        columns[name] = np.where(running, values, 0.0 if name.startswith("clock_event_") else np.nan)
    smoothed = None
    paused = bool(pauses) and not running.all()
    if throughput is not None and not paused:
        smoothed = rolling_mean(time_s, np.where(running, throughput, np.nan), JOB_SMOOTH_S)
    trace = RunTrace.from_columns(time_s, columns, throughput=smoothed, unit=unit,
                                  sm_clock_max_mhz=sm_clock_max_mhz, power_limit_w=power_limit_w,
                                  temp_slowdown_c=temp_slowdown_c)
    verdict = judge(trace, min_load_s=MIN_SUSTAINED_S)
    if throughput is not None and paused:
        # The rate a job prints after the guard continued it counts the stopped time (tqdm's average over its
        # last updates, any items over elapsed time): a drop there is the guard's doing. A throttle cuts the
        # clock, so a paused job is judged on its SM clock.
        verdict = replace(verdict, sentence=f"{verdict.sentence.rstrip('.')} (judged on the SM clock: the rate "
                                            "the job prints counts the guard's pauses).")
    return verdict


def job_verdict(record: JobRecord, series: JobSeries, gpu: GpuSeries, *, start_s: float, end_s: float,
                pauses: Sequence[tuple[float, float]]) -> str:
    """``judge_job``'s sentence for a stored job (``job_judgement``)."""
    return job_judgement(record, series, gpu, start_s=start_s, end_s=end_s, pauses=pauses).sentence


def job_judgement(record: JobRecord, series: JobSeries, gpu: GpuSeries, *, start_s: float, end_s: float,
                  pauses: Sequence[tuple[float, float]]) -> Verdict:
    """``judge_job``'s verdict for a stored job: its GPU's history samples over [start_s, end_s), its
    reported throughput held at each sample until the next report."""
    rows = (gpu.time_s >= start_s) & (gpu.time_s < end_s)
    time_s = gpu.time_s[rows]
    columns: dict[str, FloatArray] = {
        "sm_clock_mhz": gpu.sm_clock_mhz[rows], "temperature_c": gpu.temperature_c[rows],
        "power_w": gpu.power_w[rows], "clock_event_reasons": gpu.clock_event_reasons[rows].astype(np.float64),
        "utilization_gpu_pct": gpu.utilization_gpu_pct[rows],
    }
    for name, reason in CLOCK_EVENT_COUNTERS:
        counted = gpu.counted_seconds.get(int(reason))
        if counted is not None and np.isfinite(counted[rows]).any():
            columns[name] = counted[rows]
    # The limit in force at each sample (the history's stored changes), and over most of the job: not the last
    # one read, which a firmware mode switch after the job has moved.
    columns["power_limit_w"] = gpu.limit_per_row()[rows]
    throughput = _held(series.time_s, series.throughput, time_s) if len(series.time_s) else None
    return judge_job(time_s, columns, throughput, record.throughput_unit or "", pauses=pauses,
                     sm_clock_max_mhz=gpu.meta.sm_clock_max_mhz, power_limit_w=gpu.limit_in_force(rows),
                     temp_slowdown_c=gpu.meta.temp_slowdown_c)


def build_card(record: JobRecord, series: JobSeries, frame: HistoryFrame, costs: CostSettings,
               stress_runs: Sequence[StressResult] | None = None, *, offers: Sequence[CloudOffer] = (),
               specs: Sequence[GpuSpec] = (), verdict: str | None = None, now_s: float | None = None,
               throttled: bool | None = None, thresholds: Thresholds | None = None) -> JobCard:
    """The card of ``record`` from ``frame`` (the history over the job's span, a few seconds past its end).

    ``stress_runs``: where the measured GEMM speed comes from (default: the frame's). ``offers`` and
    ``specs``: the cloud price and GPU spec tables (``desktop.advice.load_cloud_offers`` /
    ``load_gpu_specs``). ``verdict`` and ``throttled``: the verdict the caller already has, else judged here.
    A job still running ends at ``now_s`` (default: the frame's end).
    """
    end_s = record.ended_s if record.ended_s is not None else (now_s if now_s is not None else frame.end_s)
    end_s = max(end_s, record.started_s)
    pauses = pause_spans(record, end_s)
    gpus = job_gpus(record, frame)
    runs = frame.stress_results if stress_runs is None else stress_runs
    tflops = measured_tflops(runs, gpus[0].meta.uuid) if gpus else None
    if verdict is None:
        if gpus:
            judged = job_judgement(record, series, gpus[0], start_s=record.started_s, end_s=end_s, pauses=pauses)
            verdict, throttled = judged.sentence, judged.throttled
        else:
            verdict = "No GPU samples over the job: no throttle verdict."
    job = JobInputs(job_id=record.job_id, name=record.name, command=" ".join(record.argv),
                    started_s=record.started_s, ended_s=end_s, exit_code=record.exit_code, gpus=gpus, pauses=pauses,
                    paused_s=record.paused_s, verdict=verdict, throughput_time_s=series.time_s,
                    throughput=series.throughput, throughput_unit=record.throughput_unit,
                    processes=frame.processes, counters_since_previous=frame.end_s - frame.start_s <= RAW_SPAN_LIMIT_S,
                    source=record.source, throttled=throttled, host=frame.host)
    card = job_card(job, electricity_price_per_kwh=costs.electricity_price_per_kwh, currency=costs.currency,
                    cloud=CloudInputs(tuple(offers), tuple(specs), tflops),
                    **({"thresholds": thresholds} if thresholds is not None else {}))
    if record.lost:
        card = replace(card, notes=(lost_note(record), *card.notes))
    return card


#: How a card says that its job's rigscope died (``JobRecord.lost``): the first of its notes.
LOST_NOTE = "Ended without rigscope"


def lost_note(record: JobRecord) -> str:
    """"Ended without rigscope: last seen 12:03 …" (local time) for a job closed after its rigscope died."""
    seen = record.last_seen_s if record.last_seen_s is not None else record.ended_s or record.started_s
    return (f"{LOST_NOTE}: last seen {datetime.fromtimestamp(seen).strftime('%H:%M')}; its figures end then "
            "(the job itself may have run on, unwatched).")


def job_frame(store: HistoryStore, record: JobRecord, now_s: float) -> HistoryFrame:
    """The history over the job's span (to ``now_s`` while it runs), reaching a little past its end."""
    end_s = record.ended_s if record.ended_s is not None else now_s
    return load_frame(store, record.started_s, max(end_s, record.started_s) + FRAME_MARGIN_S)


def card_of(store: HistoryStore, record: JobRecord, series: JobSeries, costs: CostSettings, *, now_s: float,
            offers: Sequence[CloudOffer] = (), specs: Sequence[GpuSpec] = (),
            frame: HistoryFrame | None = None) -> JobCard:
    """The card stored with a finished job; else (a job still running, or one whose `rigscope run` died
    before it wrote one, or a card of another version) one built now from the history."""
    if record.card is not None and record.ended_s is not None:
        try:  # the card may have been built before the job had its id
            return replace(JobCard.from_dict(record.card), job_id=record.job_id)
        except ValueError:
            pass
    frame = frame if frame is not None else job_frame(store, record, now_s)
    return build_card(record, series, frame, costs, offers=offers, specs=specs, now_s=now_s)


# --- text ----------------------------------------------------------------------------------


def duration_text(seconds: float) -> str:
    """``42`` -> "42 s", ``570`` -> "9 min 30 s", ``7260`` -> "2 h 01 min"."""
    if 0 < seconds < 0.5:
        return "< 1 s"
    total = max(0, round(seconds))
    if total < 3600:  # the stress verdict's words; a job may run for hours
        return format_duration(total)
    hours, rest = divmod(total, 3600)
    return f"{hours} h {rest // 60:02d} min"


def job_status(record: JobRecord) -> str:
    """A job's state in a word, for lists: running, ok, "exit N" (128 + N: died of signal N), "no rigscope"
    (its rigscope died: closed at its last heartbeat), or "?"."""
    if record.ended_s is None:
        return "running"
    if record.lost:
        return "no rigscope"
    if record.exit_code is None:
        return "?"
    return "ok" if record.exit_code == 0 else f"exit {record.exit_code}"


def money_text(value: float, currency: str) -> str:
    """Amounts under a cent keep two significant digits (never "2.2e-05"): a short job's energy costs
    fractions of one; under a tenth of a cent it reads "< 0.001"."""
    if value != 0 and abs(value) < 0.001:
        return f"< 0.001 {currency}"
    if value != 0 and abs(value) < 0.01:
        return f"{float(f'{value:.2g}'):f}".rstrip("0") + f" {currency}"
    return f"{value:,.2f} {currency}"


def energy_text(wh: float) -> str:
    return f"{wh / 1000.0:,.2f} kWh" if wh >= 1000.0 else f"{wh:.1f} Wh" if wh >= 10 else f"{wh:.2f} Wh"


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{share * 100.0:.0f} %"


def _mib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} MiB"


def _throttle_text(throttle_s: dict[str, float | None], timing: str) -> str:
    labels = {key: label for key, _name, _bit, label in THROTTLE_CAUSES}
    parts = [f"{labels.get(key, key)} {duration_text(s)}" for key, s in throttle_s.items() if s]
    if not parts:
        return "none" if any(s is not None for s in throttle_s.values()) else "n/a"
    how = {"counters": "counted by the driver", "samples": "sampled", "mixed": "counted and sampled"}.get(timing)
    return ", ".join(parts) + (f" ({how})" if how else "")


def _cap_text(gpu: GpuFigures) -> str:
    """ "capped 100 % of its 6.6 busy hours at its 150 W limit, mean 150 W while capped" (``advisor.cap_share``)."""
    text = CapShare(gpu.capped_s or 0.0, gpu.busy_s, math.nan, math.nan).text()
    if gpu.capped_limits and gpu.capped_limits != "limit not known":
        text += f" at its {gpu.capped_limits} limit" if "then" not in gpu.capped_limits else \
            f" at its limits in force ({gpu.capped_limits})"
    if gpu.capped_power_w is not None:
        text += f", mean {gpu.capped_power_w:.0f} W while capped"
    return text


def _gpu_rows(gpu: GpuFigures, tag: str) -> list[tuple[str, str]]:
    rows = [("GPU", f"{gpu.index}: {gpu.name}")]
    busy = f"{_pct(gpu.busy_share)} of the running time"
    if gpu.mean_util_pct is not None:
        busy += f", mean utilization {gpu.mean_util_pct:.0f} %"
    rows.append((f"GPU busy{tag}", busy))
    vram = _mib(gpu.peak_vram_mib)
    if gpu.vram_total_mib is not None and gpu.peak_vram_mib is not None:
        vram += f" of {_mib(gpu.vram_total_mib)} ({_mib(gpu.headroom_mib)} headroom)"
    rows.append((f"VRAM peak{tag}", vram))
    if gpu.peak_temperature_c is not None:
        rows.append((f"temperature{tag}", f"peak {gpu.peak_temperature_c:.0f} °C"))
    rows.append((f"throttled{tag}", _throttle_text(gpu.throttle_s, gpu.throttle_timing)))
    if gpu.capped_s:
        rows.append((f"power cap{tag}", _cap_text(gpu)))
    return rows


def card_rows(card: JobCard) -> list[tuple[str, str]]:
    """The card as (label, text) rows: what ``format_card`` aligns and the Jobs page shows in a table."""
    exit_text = "still running" if card.exit_code is None else f"exit code {card.exit_code}"
    lost = [n for n in card.notes if n.startswith(LOST_NOTE)] if card.exit_code is None else []
    if lost:  # "ended without rigscope: last seen 12:03"
        exit_text = lost[0].split(";")[0].replace(LOST_NOTE, LOST_NOTE.lower(), 1)
    rows = [("job", f"#{card.job_id} {card.name}" if card.job_id else card.name), ("command", card.command),
            ("duration", f"{duration_text(card.duration_s)} ({exit_text})")]
    several = len(card.gpus) > 1
    for gpu in card.gpus:
        rows += _gpu_rows(gpu, f" GPU {gpu.index}" if several else "")
    if card.throughput_mean is not None:
        rows.append(("throughput", f"{card.throughput_mean:,.3g} {card.throughput_unit or 'items/s'} mean"))
    rows.append(("verdict", card.verdict or "n/a"))
    if card.energy_wh is not None:
        cost = card.energy_cost if card.energy_cost is not None else 0.0
        rows.append(("energy", f"{energy_text(card.energy_wh)}, {money_text(cost, card.currency)} at "
                               f"{card.electricity_price_per_kwh:g} {card.currency}/kWh"))
    else:
        rows.append(("energy", "n/a (no power or energy readings)"))
    if card.paused_s > 0 or card.pauses:
        times = "time" if card.pauses == 1 else "times"
        rows.append(("paused", f"by the guard {duration_text(card.paused_s)} ({card.pauses} {times}): left out of "
                               "throughput, busy time and throttling"))
    if card.bound_text and card.bound != "gpu":
        rows.append(("limited by", card.bound_text))
    if card.cloud:
        basis = "your stress test" if card.speed_basis == "measured" else "datasheet"
        part = f"its GPU-bound {card.gpu_part * 100.0:.0f} %" if card.gpu_part is not None else "the GPU part"
        for i, c in enumerate(card.cloud):
            gpus = f"{c.gpus} x " if c.gpus > 1 else ""
            spot = f", {money_text(c.spot_usd, 'USD')} spot" if c.spot_usd is not None else ""
            overall = f"{c.overall_speed:.2g}x overall: " if c.overall_speed is not None else ""
            where = parenthesized(c.provider)  # "(Vast.ai, market)", never "(Vast.ai (market))"
            rows.append(("in the cloud" if i == 0 else "",
                         f"{gpus}{c.gpu_model} {where}: {money_text(c.on_demand_usd, 'USD')}{spot}, "
                         f"{duration_text(c.hours * 3600.0)} ({overall}{part} at {c.relative_speed:.2g}x, {basis})"))
    rows.extend(("note", n) for n in card.notes if n not in lost)
    return rows


def format_card(card: JobCard) -> str:
    """The card for a terminal: one aligned line per figure, units on every number, safe to print."""
    rows = card_rows(card)
    width = max(len(label) for label, _ in rows)
    return "\n".join(printable(f"  {label:<{width}}  {text}") for label, text in rows)
