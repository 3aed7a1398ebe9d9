"""Advice rules: base types (base), rules on GPU metrics (gpu), on processes, configuration and
stress history (history), their action texts (actions) and the registry that runs them all.

``from advisor.rules import Recommendation, run_rules`` is the way in for callers.
"""

from __future__ import annotations

from advisor.rules.base import (
    SEVERITY_ORDER,
    Evidence,
    Recommendation,
    Rule,
    RuleContext,
    Severity,
    sort_key,
)
from advisor.rules.registry import all_rules, run_rules

__all__ = ["SEVERITY_ORDER", "Evidence", "Recommendation", "Rule", "RuleContext", "Severity", "all_rules",
           "run_rules", "sort_key"]
