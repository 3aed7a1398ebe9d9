"""The stress baseline: which earlier run a result is measured against, one rule for the verdict and the advisor.

A machine that once held a speed can again, so the baseline is the best sustained result
among the most recent runs of the same workload and precision on the same GPU; a shortfall
against it points at dust, fan mode or driver rather than the silicon. Runs with result
errors, aborted runs and runs without a sustained figure never count as a result (``usable``); the
baseline is moreover a completed run of at least the Sustained length whose verdict was not
inconclusive (``usable_as_baseline``): a 2-minute run ends before a laptop heats up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the frame costs numpy; the lengths here are read by `rigscope stress`'s options
    from advisor.frame import StressResult

#: The baseline is the best of this many most recent usable runs.
BASELINE_RUNS = 10
#: The Quick test's length (the Stress page's "Quick 2 min" preset, `rigscope stress --per-mode`'s runs).
QUICK_S = 120.0
#: The Sustained test's length (the Stress page's "Sustained 10 min" preset): a baseline ran at least this long.
SUSTAINED_S = 600.0
#: How the verdict sentence of a run that ended still heating up begins (``advisor.verdict_text``).
INCONCLUSIVE_PREFIX = "Inconclusive:"


def usable(run: StressResult) -> bool:
    """A run that measured something: finished, no result errors, a positive sustained throughput."""
    return (not run.aborted and run.errors == 0 and math.isfinite(run.sustained_throughput)
            and run.sustained_throughput > 0)


def usable_as_baseline(run: StressResult) -> bool:
    """A usable run that ran the Sustained length or longer (1 s of rounding allowed) and reached a verdict."""
    return (usable(run) and run.ended_s - run.started_s >= SUSTAINED_S - 1.0
            and not run.summary.startswith(INCONCLUSIVE_PREFIX))


def pick_baseline(runs: Iterable[StressResult], workload: str, dtype: str, device_uuid: str, *,
                  unit: str | None = None, before_s: float | None = None,
                  last: int = BASELINE_RUNS) -> StressResult | None:
    """The best sustained of the ``last`` most recent baseline-worthy runs of ``workload``/``dtype`` on ``device_uuid``.

    ``unit`` (when given) must match too; ``before_s`` keeps only runs started before it (the
    run being judged and anything later are not its own baseline). None when no run qualifies.
    """
    candidates = [r for r in runs if r.workload == workload and r.dtype == dtype and r.gpu_uuid == device_uuid
                  and (unit is None or r.unit == unit) and (before_s is None or r.started_s < before_s)
                  and usable_as_baseline(r)]
    candidates.sort(key=lambda r: (r.started_s, r.run_id), reverse=True)
    return max(candidates[:last], key=lambda r: r.sustained_throughput, default=None)
