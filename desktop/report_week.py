"""The report's week: ISO weeks in the operating system's local time (DST included), which week a report opens
on, and the history frames of a week and the week before it.

`rigscope report`, `rigscope advise` (its ``--week``) and the window's History page
(``desktop.reporting.HistorySource``) pick their week here, so a week means the same hours in each.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from datetime import datetime, timedelta, tzinfo
from typing import Any

from advisor.frame import HistoryFrame
from desktop.errors import UserError

WEEK_S = 7 * 86400.0


class SystemLocalTime(tzinfo):
    """The operating system's local time zone, DST included (``datetime.astimezone()`` fixes one offset)."""

    def _offset_at(self, epoch_s: float) -> timedelta:
        return timedelta(seconds=time.localtime(epoch_s).tm_gmtoff)

    def utcoffset(self, dt: datetime | None) -> timedelta:
        if dt is None:
            return self._offset_at(time.time())
        return self._offset_at(time.mktime(dt.replace(tzinfo=None).timetuple()))

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def tzname(self, dt: datetime | None) -> str:
        return time.strftime("%Z")

    def fromutc(self, dt: datetime) -> datetime:
        epoch = (dt.replace(tzinfo=None) - datetime(1970, 1, 1)).total_seconds()
        return dt + self._offset_at(epoch)

    def __str__(self) -> str:
        return f"local time, {time.strftime('%Z')}"


def week_bounds(label: str, tz: tzinfo) -> tuple[float, float]:
    """``2026-W48`` -> Monday 00:00 to the next Monday 00:00, local time, as epoch seconds."""
    try:
        year_text, week_text = label.upper().split("-W")
        monday = datetime.fromisocalendar(int(year_text), int(week_text), 1)
    except ValueError:
        raise UserError(f"--week {label!r}: expected an ISO week such as 2026-W48") from None
    start = monday.replace(tzinfo=tz).timestamp()
    end = (monday + timedelta(days=7)).replace(tzinfo=tz).timestamp()
    return start, end


def week_label(time_s: float, tz: tzinfo) -> str:
    year, week, _ = datetime.fromtimestamp(time_s, tz).isocalendar()
    return f"{year}-W{week:02d}"


def default_week(span: tuple[float, float] | None, tz: tzinfo, now_s: float) -> tuple[str, tuple[str, ...]]:
    """The week `rigscope report` and the window's History page open on: the last full week, or where it has no
    history, the newest week with data (and the note that says so)."""
    label = week_label(now_s - WEEK_S, tz)
    start, end = week_bounds(label, tz)
    if span is not None and (span[1] <= start or span[0] >= end):  # nothing recorded then
        # the week holding the newest hour, so a lone sample on Monday 00:00 does not pick an empty week
        label = week_label(max(span[0], span[1] - 3600.0), tz)
        return label, (f"The last full week has no history; this is the newest week with data ({label}).",)
    return label, ()


def load_week(store: Any, label: str | None, tz: tzinfo, now_s: float) -> tuple[str, HistoryFrame,
                                                                                 HistoryFrame | None, tuple[str, ...]]:
    """The frames for ``label`` (default: the last full week, or the newest week with data) and the week before."""
    from desktop.history.frames import load_frame

    notes: tuple[str, ...] = ()
    span = store.time_range()
    if label is None:
        label, notes = default_week(span, tz, now_s)
    start, end = week_bounds(label, tz)
    if span is None or span[1] <= start or span[0] >= end:
        raise UserError(f"no history recorded in {label}"
                        + (f" (the history covers {week_label(span[0], tz)} to {week_label(span[1] - 1, tz)})"
                           if span else ""))
    # Named by its week: costs and busy hours say "from 1.6 recorded days of 2026-W48" (advisor.span).
    frame = dataclasses.replace(load_frame(store, start, end, platform=sys.platform), label=label)
    previous = load_frame(store, start - WEEK_S, start, platform=sys.platform) if span[0] < start else None
    if previous is not None and not previous.gpus:
        previous = None
    return label, frame, previous, notes
