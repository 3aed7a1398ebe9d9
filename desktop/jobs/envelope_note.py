"""A job's power limit in one note for its card, from the history's envelope.limit events (issue 25).

The line in force when the job started may have been written long before (the recorder writes one
only when it changes), so the events are read from a month before the start.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.envelope import power_limit_note
from advisor.job_card import JobCard
from desktop.history.job_model import JobRecord
from desktop.history.store import HistoryStore

#: How far before a job's start its first line is looked for.
LOOKBACK_S = 31 * 86400.0


def envelope_note(store: HistoryStore, record: JobRecord, end_s: float) -> str | None:
    """"Power limit: capped at 56 W of 175 W: on battery (32 minutes), ..." for the job's first GPU, or None."""
    if not record.gpu_uuids:
        return None
    uuid = record.gpu_uuids[0]
    events = [e for e in store.events(record.started_s - LOOKBACK_S, end_s, kinds=["envelope.limit"])
              if e.gpu_uuid == uuid]
    before = [e for e in events if e.time_s <= record.started_s]
    during = [e for e in events if e.time_s > record.started_s]
    lines = [(e.time_s, e.detail) for e in (before[-1:] + during)]
    return power_limit_note(lines, record.started_s, end_s, what="job")


def with_envelope_note(card: JobCard, store: HistoryStore, record: JobRecord, now_s: float) -> JobCard:
    """``card`` with the job's power-limit note last among its notes (once; unchanged when there is none)."""
    end_s = record.ended_s if record.ended_s is not None else now_s
    note = envelope_note(store, record, max(end_s, record.started_s))
    if note is None or note in card.notes:
        return card
    return replace(card, notes=(*card.notes, note))
