"""NVML's per-cause clock-event time counters: which field ids carry them on this driver, and whether they count.

The ids moved between driver branches. Read from the bindings themselves (``pip download --no-deps
nvidia-ml-py==12.575.51`` and ``==13.580.82``, then ``diff`` of their ``pynvml.py``):

================  ==================  =====================  ==================  ========================
cause (bit)       12.575.51 (R575)    CUDA 13.0.39 nvml.h    13.580.82 (R580.82  before R575 (perf
                                      (R580.65)              on; 13.615.71 too)  policy, all branches)
================  ==================  =====================  ==================  ========================
SW power cap 0x4  74                  74                     74                  74 PERF_POLICY_POWER
SW thermal 0x20   251                 251                    269                 75 PERF_POLICY_THERMAL
HW thermal 0x40   252                 252                    270                 --
HW brake 0x80     253                 253                    271                 --
================  ==================  =====================  ==================  ========================

What the other branch's ids mean (so a "counter" there is a constant where power smoothing is
supported, NotSupported elsewhere):

- 12.575.51: 254/255 POWER_SYNC_BALANCING_FREQ/AF, 256-273 PWR_SMOOTHING_* (269 ACTIVE_PRESET_PROFILE,
  270 ADMIN_OVERRIDE_PERCENT_TMP_FLOOR, 271 ADMIN_OVERRIDE_RAMP_UP_RATE in mW/s).
- 13.580.82: 251-268 PWR_SMOOTHING_* (251 ENABLED 0/1, 252 PRIV_LVL, 253 IMM_RAMP_DOWN_ENABLED 0/1),
  272/273 POWER_SYNC_BALANCING_FREQ/AF. NVML_FI_MAX is 274 in both.
- The R580.65 column is the issue's reading of the CUDA 13.0.39 header (not a wheel diffed here):
  it still has 251, so the move happened inside R580, between 580.65 and 580.82.

So the ids are chosen by what the driver answers, not by one header: a driver whose branch says
which set it uses (575.x: 251-253; 580.82 and later: 269-271) is asked that set; any other version
(older, 580.65-580.81, Windows numbering, unparseable) is asked both. Either way a field counts as
a time counter only while it advances no faster than wall time (``FAST_FACTOR``) and advances
while its reason bit is set: a field that stays flat for ``FLAT_LIMIT_S`` of reason-bit time is
a constant (power smoothing), dropped, and the cause is n/a rather than "0 s throttled". Once
one set is proven to count, the other set's ids are dropped for that GPU.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.clock_events import COUNTER_ROWS, CauseCounter, ReasonRow

log = logging.getLogger(__name__)

def _counter(row: ReasonRow) -> CauseCounter:
    assert row.counter is not None  # COUNTER_ROWS holds only rows with a counter
    return row.counter


_COUNTERS: Final = tuple((_counter(row), int(row.reason)) for row in COUNTER_ROWS)
#: The causes whose ids moved between the branches (SW thermal, HW thermal, HW power brake), in table order.
_MOVED: Final = tuple(c.field for c, _bit in _COUNTERS if c.field_ids[0] != c.field_ids[1])
#: Ids asked on every branch (the SW power cap's 74 = NVML_FI_DEV_PERF_POLICY_POWER), per cause.
_FIXED: Final = {c.field: c.field_ids[0] for c, _bit in _COUNTERS if c.field_ids[0] == c.field_ids[1]}
FIELD_SW_POWER_CAP_NS: Final = 74  # NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP = NVML_FI_DEV_PERF_POLICY_POWER
#: NVML_FI_DEV_PERF_POLICY_THERMAL: SW thermal before R575 (the table's ``older_field_id``).
FIELD_PERF_POLICY_THERMAL_NS: Final = 75
#: The two id sets of the moved causes (see the table above), from advisor/clock_events.py's rows.
IDS_R575: Final = tuple(c.field_ids[0] for c, _bit in _COUNTERS if c.field in _MOVED)
IDS_R580_82: Final = tuple(c.field_ids[1] for c, _bit in _COUNTERS if c.field in _MOVED)
_OLDER: Final = {c.field: c.older_field_id for c, _bit in _COUNTERS if c.older_field_id is not None}
assert _FIXED.get("clock_event_sw_power_cap_s") == FIELD_SW_POWER_CAP_NS
_OLDER_IDS: Final = frozenset(_OLDER.values())
assert {FIELD_PERF_POLICY_THERMAL_NS} == _OLDER_IDS

#: Each per-cause time metric and the reason bit that must be set while its counter advances.
CAUSE_BITS: Final[dict[str, int]] = {c.field: bit for c, bit in _COUNTERS}
#: Every id any cause may be read from, per cause (for "is this metric supported").
ALL_COUNTER_FIELDS: Final[dict[str, tuple[int, ...]]] = {
    c.field: (c.field_ids[0],) if c.field in _FIXED else
    (c.field_ids[1], c.field_ids[0], *((c.older_field_id,) if c.older_field_id is not None else ()))
    for c, _bit in _COUNTERS
}
ALL_COUNTER_FIELD_IDS: Final = frozenset(f for ids in ALL_COUNTER_FIELDS.values() for f in ids)

#: Since a field's first reading it may gain this much more than the time that passed: judged on the
#: total, so a driver that updates its counters in steps (0 s, then 2 s in two 1 s ticks) is not
#: taken for a non-counter, while a field that jumps by more than wall time allows is.
FAST_FACTOR: Final = 1.1
FAST_SLACK_S: Final = 1.0
#: Reason-bit time (set at both ends of an interval) a field may stay flat before it is no counter;
#: until then a flat reading under the bit is n/a, never 0 s.
FLAT_LIMIT_S: Final = 5.0
#: The shortest interval whose flat reading counts against a field (a counter may update coarsely).
FLAT_MIN_INTERVAL_S: Final = 0.5

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


def id_sets_for(driver_version: str | None) -> tuple[tuple[int, ...], ...]:
    """The id sets to ask on this driver, preferred first: one where the branch is known, else both."""
    match = _VERSION.match(driver_version or "")
    if match is not None:
        major, minor = int(match.group(1)), int(match.group(2))
        if major == 575:
            return (IDS_R575,)
        if (major == 580 and minor >= 82) or major >= 590:
            return (IDS_R580_82,)
        if major == 580:  # 580.65 still had 251; where in 580.66-580.81 the ids moved is not known
            return (IDS_R575, IDS_R580_82)
    return (IDS_R580_82, IDS_R575)


@dataclass(slots=True)
class _Candidate:
    fid: int
    prev: tuple[float, float] | None = None  # (value ns, time s)
    first: tuple[float, float] | None = None  # the reading the total is judged from (since the last reset)
    flat_bit_s: float = 0.0
    proven: bool = False


@dataclass(slots=True)
class CounterTracker:
    """One GPU's counter fields: which to ask, and the seconds under each cause since the last sample."""

    driver_version: str | None = None
    #: Per cause: its candidate fields, preferred first (the perf-policy 75 last, asked only alone).
    candidates: dict[str, list[_Candidate]] = field(default_factory=dict)
    rejected: set[int] = field(default_factory=set)
    prev_reasons: int | None = None

    def __post_init__(self) -> None:
        sets = id_sets_for(self.driver_version)
        self.candidates = {}
        for name in CAUSE_BITS:
            if name in _FIXED:
                self.candidates[name] = [_Candidate(_FIXED[name])]
                continue
            i = _MOVED.index(name)
            older = _OLDER.get(name)
            ids = [ids[i] for ids in sets] + ([older] if older is not None else [])
            self.candidates[name] = [_Candidate(fid) for fid in ids]

    @property
    def candidate_ids(self) -> frozenset[int]:
        return frozenset(c.fid for cands in self.candidates.values() for c in cands)

    def describe(self, unsupported: Collection[int]) -> dict[str, dict[str, Any]]:
        """Per cause: the ids still asked and the one proven to count (None: not yet), for ``doctor``."""
        out: dict[str, dict[str, Any]] = {}
        for name, cands in self.candidates.items():
            live = [c for c in cands if c.fid not in unsupported and c.fid not in self.rejected]
            out[name] = {"asked": [c.fid for c in live], "counting": next((c.fid for c in live if c.proven), None)}
        return out

    def fields(self, unsupported: Collection[int]) -> list[int]:
        """The counter ids to ask this tick: each live candidate; 75 only once the newer SW thermal ids are gone."""
        out: list[int] = []
        for cands in self.candidates.values():
            live = [c.fid for c in cands if c.fid not in unsupported and c.fid not in self.rejected]
            primary = [f for f in live if f not in _OLDER_IDS]
            for fid in primary or live[:1]:
                if fid not in out:
                    out.append(fid)
        return out

    def update(self, fields: Mapping[int, tuple[float, float | None]], reasons: int | None,
               now_s: float | None) -> dict[str, float | None]:
        """Seconds under each cause since the previous sample (None: unknown), judging each field as it goes.

        ``fields`` maps a field id to (value ns, driver timestamp s or None); ``now_s=None`` is the
        priming read at open, which only learns what the GPU answers.
        """
        prev_reasons, self.prev_reasons = self.prev_reasons, reasons
        out: dict[str, float | None] = {}
        for name, cands in self.candidates.items():
            bit = CAUSE_BITS[name]
            # Set at both ends: the cause held for most of the interval; at either: it was there.
            held = reasons is not None and prev_reasons is not None and bool(reasons & prev_reasons & bit)
            seen = bool((reasons or 0) & bit) or bool((prev_reasons or 0) & bit)
            deltas: dict[int, float] = {}
            for cand in cands:
                if cand.fid in self.rejected or cand.fid not in fields:
                    continue
                if now_s is None:
                    continue  # the priming read at open: its interval is no sample interval
                value_ns, stamp = fields[cand.fid]
                stamp_s = stamp if stamp is not None else now_s
                before, cand.prev = cand.prev, (value_ns, stamp_s)
                if before is None or value_ns < before[0]:
                    cand.first = (value_ns, stamp_s)
                    continue  # the first sample, or a reset (driver reload)
                seconds = (value_ns - before[0]) / 1e9
                elapsed_s = max(stamp_s - before[1], 0.0)
                first = cand.first or before
                total_s, wall_s = (value_ns - first[0]) / 1e9, max(stamp_s - first[1], 0.0)
                if total_s > FAST_FACTOR * wall_s + FAST_SLACK_S:
                    self._reject(cand.fid, f"gained {total_s:.1f} s in {wall_s:.1f} s")
                    continue
                if seconds > 0.0 and seen:
                    cand.proven = True
                    self._prefer_set_of(cand.fid)
                if seconds == 0.0 and held and elapsed_s >= FLAT_MIN_INTERVAL_S:
                    cand.flat_bit_s += elapsed_s
                    if not cand.proven and cand.flat_bit_s >= FLAT_LIMIT_S:
                        self._reject(cand.fid, f"flat for {cand.flat_bit_s:.1f} s with its reason bit set")
                        continue
                deltas[cand.fid] = seconds
            out[name] = self._choose(cands, deltas, held)
        return out

    def _choose(self, cands: list[_Candidate], deltas: dict[int, float], held: bool) -> float | None:
        live = [c for c in cands if c.fid in deltas]
        if not live:
            return None
        proven = [c for c in live if c.proven]
        if proven:
            return deltas[proven[0].fid]
        moving = [c for c in live if deltas[c.fid] > 0.0]
        if moving:
            return deltas[moving[0].fid]
        # Flat everywhere: 0 s is only a fact where the bit does not say the cause held.
        return None if held else 0.0

    def _reject(self, fid: int, why: str) -> None:
        log.info("NVML field %d does not behave as a time counter (%s): not read again", fid, why)
        self.rejected.add(fid)

    def _prefer_set_of(self, fid: int) -> None:
        """A counter from one id set counts: the other set's ids (constants there) are dropped."""
        for ours, other in ((IDS_R575, IDS_R580_82), (IDS_R580_82, IDS_R575)):
            if fid in ours:
                self.rejected.update(f for f in other if f not in self.rejected)
