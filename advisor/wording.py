"""Counts and spans of time in plain words: "1 recommendation", "2 GPUs", "1 day", "1.5 hours".

One copy for the CLI, the reports, the advisor's texts and the window, so that no message says
"recommendation(s)", "stretch(es)", "GPU(s)" or "1 days". Pure (advisor imports nothing from desktop;
desktop imports this).
"""

from __future__ import annotations

import math
import re

__all__ = ["count_text", "duration_text", "format_duration", "parenthesized", "plural_word"]

_SIBILANT_ENDINGS = ("s", "sh", "ch", "x", "z")


def plural_word(count: float, singular: str, plural: str | None = None) -> str:
    """``singular`` for exactly one, else ``plural`` (default: English's regular form, "stretch" -> "stretches")."""
    if count == 1:
        return singular
    if plural is not None:
        return plural
    return singular + ("es" if singular.endswith(_SIBILANT_ENDINGS) else "s")


_TRAILING_ASIDE = re.compile(r"^(?P<head>.*\S)\s*\((?P<aside>[^()]*)\)\s*$")


def parenthesized(text: str) -> str:
    """``text`` in parentheses, an aside of its own turned into a comma clause: "(Vast.ai, market)" for the
    provider "Vast.ai (market)", never "(Vast.ai (market))"."""
    match = _TRAILING_ASIDE.match(text)
    if match is not None:
        text = f"{match['head']}, {match['aside']}"
    return f"({text})"


def count_text(count: float, singular: str, plural: str | None = None) -> str:
    """"1 recommendation", "2 GPUs", "1,234 samples", "0 errors": the number and the word that fits it."""
    number = f"{count:,.0f}" if float(count).is_integer() else f"{count:,.1f}"
    return f"{number} {plural_word(float(number.replace(',', '')), singular, plural)}"


def format_duration(seconds: float) -> str:
    """``145`` -> "2 min 25 s" (the stress verdict's durations; ``advisor.verdict_text`` offers it too)."""
    total = round(seconds)
    minutes, secs = divmod(total, 60)
    if minutes and secs:
        return f"{minutes} min {secs} s"
    return f"{minutes} min" if minutes else f"{secs} s"


def duration_text(seconds: float) -> str:
    """How long, in words: "45 seconds", "1 minute", "5 minutes", "1.5 hours", "1 day", "6.5 days"."""
    seconds = max(0.0, seconds) if math.isfinite(seconds) else 0.0
    if seconds < 90:
        return count_text(round(seconds), "second")
    if seconds < 90 * 60:
        return count_text(round(seconds / 60), "minute")
    if seconds < 48 * 3600:
        return count_text(round(seconds / 3600, 1), "hour")
    return count_text(round(seconds / 86400, 1), "day")


#: A `command` in advice text, as the rules mark it: shown as code in HTML, as plain text in a label.
CODE_SPAN = re.compile(r"`([^`\n]+)`")
