"""The fleet's figures in words, one way for `rigscope fleet`'s table and the Fleet page's cards (no Qt).

A value the machine does not report is None here; each front end says that in its own cell ("-" in the
table, "n/a" or "never" on a card).
"""

from __future__ import annotations


def ago(time_s: float | None, now_s: float) -> str | None:
    """How long ago, in the largest whole unit that reads well: "12 s ago", "3 min ago", "2.5 h ago"."""
    if time_s is None:
        return None
    age = max(0.0, now_s - time_s)
    if age < 120:
        return f"{age:.0f} s ago"
    return f"{age / 60:.0f} min ago" if age < 7200 else f"{age / 3600:.1f} h ago"


def of_limit(value: float | None, limit: float | None, unit: str) -> str | None:
    """A reading against its limit, "698 / 700 W", or alone where the machine states no limit, "61 W"."""
    if value is None:
        return None
    return f"{value:.0f} / {limit:.0f} {unit}" if limit is not None else f"{value:.0f} {unit}"
