"""The per-cause throttle-time counters at the ids each driver branch uses (R575, R580.65, R580.82+).

Over the driver-level stand-in: each personality answers its counters at its branch's ids and the
other branch's ids with power smoothing's constants; the GPU runs a modelled load timeline (power
cap 3-8 s, HW thermal 8-14 s, power brake 14-18 s, SW thermal with the cap from 18 s).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from desktop.telemetry.model import DeviceState
from desktop.telemetry.nvml import NvmlBackend
from desktop.telemetry.nvml.counters import IDS_R575, IDS_R580_82, id_sets_for
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities_counters import (
    COUNTER_PERSONALITIES,
    h200_r575,
    h200_r580_82,
    h200_r580_ambiguous,
)

CAUSES = ("clock_event_sw_power_cap_s", "clock_event_sw_thermal_s", "clock_event_hw_thermal_s",
          "clock_event_hw_power_brake_s")
BITS = {"clock_event_sw_power_cap_s": 0x4, "clock_event_sw_thermal_s": 0x20, "clock_event_hw_thermal_s": 0x40,
        "clock_event_hw_power_brake_s": 0x80}


@pytest.fixture
def backend_over(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    opened: list[tuple[NvmlDriver, NvmlBackend]] = []

    def make(key: str) -> tuple[NvmlDriver, NvmlBackend]:
        driver = NvmlDriver(COUNTER_PERSONALITIES[key]())
        nvml = driver.install(monkeypatch)
        backend = NvmlBackend.open(nvml)
        opened.append((driver, backend))
        return driver, backend

    yield make
    for driver, backend in opened:
        backend.close()
        driver.check()


def _truth(driver: NvmlDriver) -> dict[str, float]:
    """Seconds the timeline has had each cause's bit set so far (what a counter must say)."""
    dev = driver.current_handle(0)
    return {name: driver.bit_ns(dev, bit) / 1e9 for name, bit in BITS.items()}


def _run(driver: NvmlDriver, backend: NvmlBackend, ticks: int = 23) -> list[dict[str, float | None]]:
    """One sample per driver second (each field-values call advances the stand-in's clock by 1 s)."""
    out = []
    for tick in range(ticks):
        reading = backend.sample(1000.0 + tick)[0]
        assert reading.state is DeviceState.OK and reading.sample is not None
        out.append({"reasons": float(reading.sample.clock_event_reasons or 0),
                    **{name: getattr(reading.sample, name) for name in CAUSES}})
    return out


def _totals(rows: list[dict[str, float | None]]) -> dict[str, float]:
    return {name: sum(row[name] or 0.0 for row in rows) for name in CAUSES}


@pytest.mark.parametrize("key", ["h200_r575", "h200_r575-smoothing", "h200_r580_65", "h200_r580_82",
                                 "h200_r580_159", "h200_r580_ambiguous"])
def test_each_branch_counts_hw_thermal_and_power_brake_at_its_own_ids(key: str, backend_over: Any) -> None:
    driver, backend = backend_over(key)
    rows = _run(driver, backend, ticks=1)  # the first sample has no interval yet
    before = _truth(driver)
    rows = _run(driver, backend)
    after = _truth(driver)
    truth = {name: after[name] - before[name] for name in CAUSES}
    assert truth["clock_event_hw_thermal_s"] == 6.0 and truth["clock_event_hw_power_brake_s"] == 4.0
    assert _totals(rows) == pytest.approx(truth, abs=1e-6)
    supported = backend.supported_metrics(0)
    assert all(supported[name] for name in CAUSES)


def test_r575_power_smoothing_constants_are_not_read_as_zero_seconds(backend_over: Any) -> None:
    # 269-271 on R575 are power smoothing's preset profile, floor and ramp-up rate: constants that
    # would pass for "never HW thermal throttled" through 6 s of HW thermal slowdown.
    driver, backend = backend_over("h200_r575")
    rows = _run(driver, backend)
    hot = [row for prev, row in itertools.pairwise(rows)
           if int(prev["reasons"] or 0) & int(row["reasons"] or 0) & 0x40]
    assert len(hot) >= 4  # samples inside the HW thermal episode
    assert all(row["clock_event_hw_thermal_s"] == pytest.approx(1.0) for row in hot)


def test_a_known_branch_is_asked_only_its_own_ids(backend_over: Any) -> None:
    for key, own, other in (("h200_r575", IDS_R575, IDS_R580_82), ("h200_r580_82", IDS_R580_82, IDS_R575)):
        _driver, backend = backend_over(key)
        asked = backend._devices[0].counters.fields(set())
        assert set(own) <= set(asked) and not set(other) & set(asked), key


def test_an_ambiguous_version_asks_both_and_keeps_the_set_that_counts(backend_over: Any) -> None:
    driver, backend = backend_over("h200_r580_ambiguous")
    tracker = backend._devices[0].counters
    assert set(IDS_R575) | set(IDS_R580_82) <= set(tracker.fields(set()))
    rows = _run(driver, backend)
    # Before any cause bit was set both sets read flat: 0 s is then true either way.
    assert rows[1]["clock_event_hw_thermal_s"] == 0.0
    # Once 270 advanced under HW thermal, the power smoothing ids 251-253 are dropped.
    assert not set(IDS_R575) & set(tracker.fields(set()))
    counting = backend.counter_fields(0)  # what doctor shows
    assert counting["clock_event_hw_thermal_s"] == {"asked": [270], "counting": 270}
    assert _totals(rows)["clock_event_hw_power_brake_s"] == pytest.approx(4.0)


def test_a_field_flat_while_its_bit_is_set_is_dropped_and_reads_na() -> None:
    # A driver that says it is 580.82 but (say, a vendor build) answers the old ids: 269-271 are
    # constants, 251-253 are not asked. Under HW thermal the constant is no counter: n/a, not 0 s.
    from desktop.telemetry.nvml.counters import CounterTracker

    tracker = CounterTracker("580.82.07")
    fields: dict[int, tuple[float, float | None]] = {74: (0.0, None), 269: (0.0, None), 270: (5.0, None),
                                                     271: (5000.0, None)}
    tracker.update(fields, 0x1, 0.0)
    results = [tracker.update(fields, 0x48, float(t)) for t in range(1, 9)]
    assert all(r["clock_event_hw_thermal_s"] is None for r in results[1:])  # held from t = 1 on
    assert 270 in tracker.rejected and 269 not in tracker.rejected  # 269's bit (SW thermal) never set


def test_a_counter_faster_than_wall_time_is_dropped() -> None:
    from desktop.telemetry.nvml.counters import CounterTracker

    tracker = CounterTracker("575.57.08")
    tracker.update({252: (0.0, 10.0)}, 0x48, 10.0)
    assert tracker.update({252: (2.5e9, 11.0)}, 0x48, 11.0)["clock_event_hw_thermal_s"] is None
    assert 252 in tracker.rejected


def test_a_counter_the_driver_updates_in_steps_is_kept() -> None:
    # 0 s, then 2 s over two 1 s ticks: faster than wall time in one interval, never in total.
    from desktop.telemetry.nvml.counters import CounterTracker

    tracker = CounterTracker("575.57.08")
    values = [0.0, 0.0, 2e9, 2e9, 4e9, 4.5e9, 6e9]
    out = [tracker.update({252: (v, 10.0 + t)}, 0x48, 10.0 + t)["clock_event_hw_thermal_s"]
           for t, v in enumerate(values)]
    assert 252 not in tracker.rejected
    assert out[2:] == [2.0, 0.0, 2.0, 0.5, 1.5] and sum(x or 0.0 for x in out) == 6.0


@pytest.mark.parametrize(("version", "sets"), [
    ("575.57.08", (IDS_R575,)), ("580.65.06", (IDS_R575, IDS_R580_82)), ("580.76.05", (IDS_R575, IDS_R580_82)),
    ("580.82.07", (IDS_R580_82,)), ("580.159.03", (IDS_R580_82,)), ("590.12", (IDS_R580_82,)),
    ("565.57.01", (IDS_R580_82, IDS_R575)), ("581.15", (IDS_R580_82, IDS_R575)), (None, (IDS_R580_82, IDS_R575)),
])
def test_id_sets_by_driver_version(version: str | None, sets: tuple[tuple[int, ...], ...]) -> None:
    assert id_sets_for(version) == sets


def test_the_stand_in_personalities_answer_their_branch_ids() -> None:
    # The fixtures themselves: R575 counts at 252 and answers power smoothing at 270, R580.82 the reverse.
    r575, r580 = h200_r575().gpus[0], h200_r580_82().gpus[0]
    assert r575.counter_field_bits[252] == 0x40 and 270 in r575.constant_fields
    assert r580.counter_field_bits[270] == 0x40 and 252 in r580.constant_fields
    assert h200_r580_ambiguous().driver.version == "580.76.05"
