"""The noise band of a CPU stress run, measured from its own warm-up, and the verdict read against it (pure).

A GPU's GEMM rate is steady to a fraction of a percent, so the verdict's fixed 95 % line
(DCGM's) separates throttling from chance. A CPU run shares its cores with everything else on
the machine: on a busy 2-core box its rate wanders ±5 % from second to second, the best early
window lands above the end's level by chance and the run read "Throttled: unexplained
slowdown". A CPU reports no clock-event reasons, so such a drop can only be judged against how
much the run itself wanders: the spread of its successive samples over the stretch the
verdict reads its peak from (the warm-up and the reference after it, up to the first third).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from advisor.verdict import DROP_THRESHOLD, REFERENCE_WINDOW_S, WARMUP_S
from advisor.verdict_model import RunTrace, Verdict
from advisor.verdict_text import sentence_for

FloatArray = npt.NDArray[np.float64]

#: Fewer early samples than this give no noise estimate (the fixed 95 % line alone applies).
MIN_NOISE_SAMPLES = 6
#: The band is this many standard deviations of one sample's relative noise: a drop inside it is chance.
NOISE_SIGMAS = 3.0
#: Inside a band wider than this (%, beyond the fixed 5 %) a run cannot say it held its speed: inconclusive.
WIDE_BAND_PCT = 10.0
_HELD = "Held its speed: "
#: Other work using this many cores' worth of CPU (on average over the run) or more can explain a CPU run's drop.
OTHER_LOAD_CORES = 0.5


def warmup_noise_pct(time_s: FloatArray, throughput: FloatArray) -> float | None:
    """One sample's noise (a robust standard deviation, % of the level) over the early stretch of a run.

    None when the run has fewer than ``MIN_NOISE_SAMPLES`` finite samples.
    """
    time_s = np.asarray(time_s, dtype=np.float64)
    values = np.asarray(throughput, dtype=np.float64)
    finite = np.isfinite(values) & np.isfinite(time_s) & (values > 0)
    if int(finite.sum()) < MIN_NOISE_SAMPLES:
        return None
    t, v = time_s[finite], values[finite]
    rel = t - t[0]
    early = v[rel <= min(WARMUP_S + REFERENCE_WINDOW_S, (rel[-1] - rel[0]) / 3.0 + 1e-9)]
    if early.size < MIN_NOISE_SAMPLES:
        early = v[:MIN_NOISE_SAMPLES]
    level = float(np.median(early))
    # A robust standard deviation (MAD) around the early level: the machine's other work comes and
    # goes over seconds, so the wander, not only the jitter between two samples, is the noise.
    sigma = 1.4826 * float(np.median(np.abs(early - level)))
    return 100.0 * sigma / level if level > 0 else None


def noise_band(noise_pct: float | None) -> float:
    """The drop (a share of the peak) a CPU run may show by chance: the fixed 5 % plus its own noise band."""
    fixed = 1.0 - DROP_THRESHOLD
    return fixed + (NOISE_SIGMAS * noise_pct / 100.0 if noise_pct is not None and math.isfinite(noise_pct) else 0.0)


def judge_cpu_run(verdict: Verdict, trace: RunTrace, noise_pct: float | None, min_load_s: float = 0.0, *,
                  other_cores: float | None = None, cores: int | None = None) -> Verdict:
    """A CPU run's verdict: a drop inside its noise band is not throttling (``judge_within_noise``), and one
    beyond it while other work used the cores is put on that work, not on "an unexplained slowdown": the
    run is inconclusive and says how much of the cores the others took (``other_cores``, measured by the
    runner from the machine's and the workload's CPU time)."""
    verdict = judge_within_noise(verdict, trace, noise_pct, min_load_s)
    if not (verdict.throttled and verdict.cause == "unexplained" and other_cores is not None
            and math.isfinite(other_cores) and other_cores >= OTHER_LOAD_CORES):
        return verdict
    held = replace(verdict, status="passed", throttled=False, onset_s=None, cause=None, cause_family=None,
                   onset_temperature_c=None)
    figures = sentence_for(held, trace, min_load_s).removeprefix(_HELD).rstrip(".")
    of_cores = f" of the {cores} cores" if cores else " cores"
    return replace(held, status="errors" if verdict.errors else "inconclusive", sentence=(
        f"Inconclusive: other work used {other_cores:.1f}{of_cores} during the run, so its rate fell with "
        f"them, not for a reason of the CPU's own (a CPU reports none); {figures}. Run it on an idle machine "
        "to judge the CPU."))


def judge_within_noise(verdict: Verdict, trace: RunTrace, noise_pct: float | None, min_load_s: float = 0.0) -> Verdict:
    """A CPU run judged "throttled" on a drop no larger than its own noise band is not throttled.

    Only an unexplained drop is reconsidered (a CPU has no clock-event reasons to explain one); a
    drop beyond the band stays throttled. Inside the band the run held its speed where the band is
    narrow (``WIDE_BAND_PCT`` or less: it could have seen a real slowdown), and is inconclusive
    where the machine's other work made the rate wander more than that. The sentence names the band.
    """
    if noise_pct is None or not math.isfinite(noise_pct):
        return verdict
    wander = NOISE_SIGMAS * noise_pct
    note = f" (its rate wandered ±{wander:.1f} % in its warm-up)"
    ratio = verdict.sustained_ratio
    if (verdict.throttled and verdict.cause == "unexplained" and math.isfinite(ratio)
            and 1.0 - ratio <= noise_band(noise_pct)):
        held = replace(verdict, status="passed", throttled=False, onset_s=None, cause=None, cause_family=None,
                       onset_temperature_c=None)
        held = replace(held, sentence=sentence_for(held, trace, min_load_s))
        if wander <= WIDE_BAND_PCT:
            verdict = held
        else:
            figures = held.sentence.removeprefix(_HELD).rstrip(".")
            verdict = replace(held, status="inconclusive", sentence=(
                f"Inconclusive: the CPU's rate wandered ±{wander:.1f} % in its warm-up (other work shares its "
                f"cores), too much to tell a slowdown from chance; {figures}."))
        if verdict.errors:
            verdict = replace(verdict, status="errors")
    if verdict.sentence.endswith(".") and verdict.status in ("passed", "throttled", "errors"):
        verdict = replace(verdict, sentence=verdict.sentence[:-1] + note + ".")
    return verdict
