"""The verdict's typed vocabularies (status, basis, causes, power-cap kind, sources) hold every value the judge gives.

mypy checks the code that names them; these tests check what comes out of real judgements, and
that the tables keyed by a cause cover exactly the causes the types list.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Literal, get_args, get_origin, get_type_hints

import numpy as np
import pytest

from advisor.causes import (
    CAUSE_COUNTER_FIELDS,
    CAUSE_FAMILY,
    CAUSE_LABELS,
    CAUSE_REASONS,
    Cause,
    CauseFamily,
    VerdictCause,
)
from advisor.clock_events import ClockEventReason
from advisor.log_verdict import verdicts_for_log
from advisor.power_cap import PowerCap, PowerCapKind, power_cap
from advisor.verdict import RunTrace, Verdict, judge


def _literal_values(hint: object) -> set[object] | None:
    """The values a ``Literal`` (or a union of them, with or without None) allows; None for any other type."""
    if get_origin(hint) is Literal:
        return set(get_args(hint))
    if get_origin(hint) in (typing.Union, types.UnionType):
        values: set[object] = set()
        for arg in get_args(hint):
            if arg is type(None):
                values.add(None)
                continue
            inner = _literal_values(arg)
            if inner is None:
                return None
            values |= inner
        return values
    return None


def _check_literals(value: object) -> int:
    """Assert every Literal-typed field (and Literal-keyed dict) of a dataclass holds an allowed value; count them."""
    checked = 0
    for name, hint in get_type_hints(type(value)).items():
        field_value = getattr(value, name)
        allowed = _literal_values(hint)
        if allowed is not None:
            assert field_value in allowed, f"{type(value).__name__}.{name} = {field_value!r} not in {allowed}"
            checked += 1
        elif get_origin(hint) is dict and (keys := _literal_values(get_args(hint)[0])) is not None:
            assert set(field_value) <= keys, f"{type(value).__name__}.{name} keys {set(field_value) - keys}"
            checked += 1
    return checked


def _runs() -> dict[str, Verdict]:
    n = 600
    t = np.arange(float(n))
    steady = np.full(n, 100.0)
    falling = np.where(t < 200, 100.0, 70.0)
    hot = np.where(t < 200, 0.0, float(ClockEventReason.HW_THERMAL_SLOWDOWN))
    capped = np.full(n, float(ClockEventReason.SW_POWER_CAP))
    clocks = 1500.0 + 40.0 * np.sin(t / 7.0)
    return {
        "passed": judge(RunTrace(time_s=t, throughput=steady, unit="TFLOP/s")),
        "throttled": judge(RunTrace(time_s=t, throughput=falling, unit="TFLOP/s", clock_event_reasons=hot,
                                    temperature_c=np.full(n, 85.0))),
        "unexplained": judge(RunTrace(time_s=t, throughput=falling, unit="TFLOP/s", clock_event_reasons=np.zeros(n))),
        "errors": judge(RunTrace(time_s=t, throughput=steady, unit="TFLOP/s", errors=2, checks=10)),
        "too_short": judge(RunTrace(time_s=t[:20], throughput=steady[:20], unit="TFLOP/s"), min_load_s=60.0),
        "no_data": judge(RunTrace(time_s=t[:2], throughput=steady[:2])),
        "at_limit": judge(RunTrace(time_s=t, sm_clock_mhz=clocks, sm_clock_max_mhz=1980.0,
                                   power_w=np.full(n, 698.0), power_limit_w=700.0,
                                   utilization_gpu_pct=np.full(n, 100.0), clock_event_reasons=capped)),
        "inconclusive": judge(RunTrace(time_s=t, throughput=steady, unit="TFLOP/s", temperature_c=40.0 + t / 20.0,
                                       temp_slowdown_c=80.0), steady_state=True),
        "counters": judge(RunTrace.from_columns(t, {"sm_clock_mhz": clocks, "utilization_gpu_pct": np.full(n, 100.0),
                                                    CAUSE_COUNTER_FIELDS["power_cap"]: np.full(n, 1.0)},
                                                sm_clock_max_mhz=1980.0)),
    }


def test_every_judged_run_stays_inside_the_typed_vocabularies() -> None:
    runs = _runs()
    statuses = {name: verdict.status for name, verdict in runs.items()}
    # The scenarios reach the statuses they are named for (else the check below proves little).
    assert statuses["passed"] == "passed" and statuses["throttled"] == "throttled"
    assert statuses["errors"] == "errors" and statuses["too_short"] == "too_short"
    assert statuses["no_data"] == "no_data" and statuses["inconclusive"] == "inconclusive"
    assert runs["throttled"].cause == "hw_thermal" and runs["throttled"].cause_family == "thermal"
    assert runs["unexplained"].cause == "unexplained"
    assert runs["at_limit"].power_cap == "at_limit" and runs["at_limit"].basis == "clock"
    assert runs["counters"].cause_timing == "counters" and runs["passed"].cause_timing == "none"
    for verdict in runs.values():
        # status, basis, cause, family, shares, seconds, timing, 2 sources, cap, clock reference basis
        assert _check_literals(verdict) == 11


def test_a_log_judged_against_the_datasheet_names_its_sources_in_the_vocabulary() -> None:
    n = 300
    t = np.arange(float(n))
    (run,) = verdicts_for_log(t, {"sm_clock_mhz": np.full(n, 1700.0), "utilization_gpu_pct": np.full(n, 100.0),
                                  "power_w": np.full(n, 349.0)}, gpu_name="NVIDIA H100 PCIe")
    assert run.verdict.power_limit_source == "datasheet" and run.verdict.sm_clock_max_source == "log"
    assert run.verdict.clock_reference_basis == "log"
    assert _check_literals(run.verdict) == 11


@pytest.mark.parametrize(("power", "cap_share", "limit", "kind"), [
    (349.0, 0.0, 350.0, "at_limit"),
    (300.0, 0.9, 350.0, "cap_bit"),
    (200.0, 0.9, 350.0, "below_limit"),
    (300.0, 0.0, None, "plateau"),
    (100.0, 0.0, 350.0, None),
])
def test_each_power_cap_kind_is_in_its_type(power: float, cap_share: float, limit: float | None,
                                            kind: str | None) -> None:
    n = 100
    loaded = np.ones(n, dtype=bool)
    clocks = np.linspace(1400.0, 1800.0, n)
    cap = power_cap(np.full(n, power), clocks, loaded, np.ones(n), limit_w=limit, cap_share=cap_share)
    assert cap.kind == kind
    assert cap.kind is None or cap.kind in get_args(PowerCapKind)
    assert _check_literals(cap) == 1
    assert isinstance(cap, PowerCap) and dataclasses.is_dataclass(cap)


def test_the_cause_tables_cover_exactly_the_typed_causes() -> None:
    causes = get_args(Cause)
    assert tuple(CAUSE_REASONS) == causes  # the reporting order is the type's order
    assert set(CAUSE_COUNTER_FIELDS) <= set(causes)  # the HW slowdown has no counter of its own
    verdict_causes = _literal_values(VerdictCause)
    assert set(CAUSE_LABELS) == set(CAUSE_FAMILY) == verdict_causes == {*causes, "unexplained"}
    assert set(CAUSE_FAMILY.values()) == set(get_args(CauseFamily))
