"""The rule registry: every advice rule in the order they run, and the one call that runs them all."""

from __future__ import annotations

from advisor.costs import CloudOffer
from advisor.frame import HistoryFrame
from advisor.rules import effective, envelope, gpu, history
from advisor.rules.base import Recommendation, Rule, RuleContext, sort_key
from advisor.thresholds import Thresholds

#: Every rule, in the order they run (the output is sorted, so this order only breaks exact ties).
RULES: tuple[Rule, ...] = (
    gpu.vram_headroom, gpu.low_utilization, gpu.thermal_throttling, gpu.power_cap, history.idle_memory,
    history.persistence_mode, history.driver_change, history.stress_regression, gpu.pcie_link, gpu.battery_heavy,
    effective.low_effective_load, envelope.below_rated_power, envelope.battery_cost,
)


def all_rules() -> tuple[Rule, ...]:
    return RULES


def run_rules(frame: HistoryFrame, thresholds: Thresholds | None = None,
              offers: tuple[CloudOffer, ...] | list[CloudOffer] = ()) -> list[Recommendation]:
    """Every rule over ``frame``; most severe first, then the biggest."""
    ctx = RuleContext(frame, thresholds or Thresholds(), tuple(offers))
    recs = [rec for rule in all_rules() for rec in rule(ctx)]
    return sorted(recs, key=sort_key)
