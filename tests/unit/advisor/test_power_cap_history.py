"""The Advisor's power-cap card on stored history: the limit, share and mean power of the capped samples themselves.

Before (issue 32), the card read the GPU's last limit for all its history and the whole row's mean power for
every row with some capped seconds. On a laptop capped at 150 W before a firmware mode switch to 175 W it said
"power cap set under load (mean 108 W of its 175 W limit)"; on an imported H800 log read as a week (minute
rollups), "Mean power while capped" mixed the idle seconds of each capped minute in (621 W where the capped
rows average 695 W; 390 W where they average 593 W).
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from advisor.rules import run_rules
from desktop import cli
from desktop.history.frames import load_frame
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import FULL_INFO, FULL_SAMPLE, snapshot

FIXTURES = Path(__file__).parents[2] / "fixtures"
#: 2025-06-10 10:00 UTC, where the H800 logs start; the week around it.
LOG_START_S = 1749549600.0
WEEK = (LOG_START_S - 3 * 86400.0, LOG_START_S + 4 * 86400.0)


def _capped_rows_mean_w(log: Path) -> float:
    """The mean of the log's own power column over its rows with a power reason (SW cap 0x4, HW brake 0x80)."""
    with log.open() as f:
        rows = list(csv.reader(f))
    header = [c.strip() for c in rows[0]]
    power = header.index("power.draw.average [W]") if "power.draw.average [W]" in header else header.index(
        "power.draw [W]")
    reasons = next(i for i, c in enumerate(header) if "reasons" in c)
    values = [float(r[power].split()[0]) for r in rows[1:] if int(r[reasons].strip(), 16) & 0x84]
    return sum(values) / len(values)


@pytest.mark.parametrize("log", ["nvsmi_h800_power_capped_gemm.csv", "nvsmi_h800_three_power_columns.csv"])
def test_an_imported_h800_log_read_as_a_week_says_the_mean_power_of_its_capped_rows(tmp_path: Path, log: str) -> None:
    db = tmp_path / "h.sqlite"
    assert cli.main(["import", str(FIXTURES / log), "--db", str(db)]) == 0
    with HistoryStore.open(db, readonly=True) as store:
        frame = load_frame(store, *WEEK)
    assert not frame.gpus[0].samples, "a week is read from minute rollups"
    [rec] = [r for r in run_rules(frame) if r.rule_id == "power_cap"]
    expected = _capped_rows_mean_w(FIXTURES / log)
    # Within 1 %: the stored power is on a 0.1 W grid, and a counted capped second may fall on an idle sample.
    assert rec.evidence_value("Mean power while capped") == pytest.approx(expected, rel=0.01)
    assert rec.evidence_value("Power limit") == 700.0


def _laptop_week(db: Path) -> float:
    """A laptop recorded over three days: a day of bursty training capped at 150 W (each minute ~33 s capped at
    150 W, the rest at 60 W), then a firmware switch to Extreme Performance (175 W) and light work, uncapped.
    Returns the end."""
    t0 = LOG_START_S
    at_150 = dataclasses.replace(FULL_INFO, power_limit_enforced_w=150.0)
    at_175 = dataclasses.replace(FULL_INFO, power_limit_enforced_w=175.0)
    capped = dataclasses.replace(FULL_SAMPLE, utilization_gpu_pct=95.0, power_w=150.0, clock_event_reasons=0x4,
                                 clock_event_sw_power_cap_s=None)
    trough = dataclasses.replace(capped, utilization_gpu_pct=40.0, power_w=60.0, clock_event_reasons=0x0)
    light = dataclasses.replace(trough, utilization_gpu_pct=60.0, power_w=120.0)
    with HistoryStore.open(db) as store:
        snaps = [snapshot(t0 + i, info=at_150, sample=capped if i % 60 < 33 else trough) for i in range(4 * 3600)]
        snaps += [snapshot(t0 + 4 * 3600 + i, info=at_175, sample=light) for i in range(3600)]
        for lo in range(0, len(snaps), 2000):
            store.write_snapshots(snaps[lo:lo + 2000])
        store.run_rollups(t0 + 3 * 86400.0)
    return t0 + 5 * 3600.0


def test_a_mode_switch_leaves_the_capped_time_at_the_limit_then_in_force(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _laptop_week(db)
    with HistoryStore.open(db, readonly=True) as store:
        frame = load_frame(store, *WEEK)
    gpu = frame.gpus[0]
    assert gpu.meta.power_limit_w == 175.0 and not gpu.samples
    [rec] = [r for r in run_rules(frame) if r.rule_id == "power_cap"]
    assert rec.title == "GPU 0: held at its power limit (150 W)"
    assert rec.evidence_value("Power limit") == 150.0
    assert rec.evidence_value("Mean power while capped") == pytest.approx(150.0, abs=0.5)
    assert rec.evidence_value("Time power-capped") == pytest.approx(4 * 60 * 33 / 60, rel=0.02)


def test_capped_at_two_limits_names_each(tmp_path: Path) -> None:
    """Capped at 150 W, then (the switch) at 175 W: the title names both limits with their time."""
    db = tmp_path / "h.sqlite"
    at_150 = dataclasses.replace(FULL_INFO, power_limit_enforced_w=150.0)
    at_175 = dataclasses.replace(FULL_INFO, power_limit_enforced_w=175.0)
    capped = dataclasses.replace(FULL_SAMPLE, utilization_gpu_pct=95.0, clock_event_reasons=0x4,
                                 clock_event_sw_power_cap_s=None)
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(LOG_START_S + i, info=at_150, sample=dataclasses.replace(capped, power_w=150.0))
                               for i in range(1200)])
        store.write_snapshots([snapshot(LOG_START_S + 1200 + i, info=at_175,
                                        sample=dataclasses.replace(capped, power_w=174.0)) for i in range(600)])
        frame = load_frame(store, LOG_START_S, LOG_START_S + 1800)
    [rec] = [r for r in run_rules(frame) if r.rule_id == "power_cap"]
    assert rec.title == "GPU 0: held at its power limit (150 W for 20 min, then 175 W for 10 min)"
    assert rec.evidence_value("Time capped at the 150 W limit") == pytest.approx(20.0, abs=0.1)
    assert rec.evidence_value("Mean power while capped") == pytest.approx((150 * 1200 + 174 * 600) / 1800, abs=0.1)
    assert np.isfinite(rec.evidence_value("Busy time judged"))


def test_the_thermal_card_says_the_slowdown_temperature_in_force_while_throttled(tmp_path: Path) -> None:
    """Throttled at 83 °C while the slowdown temperature was 83 °C (a firmware mode); it reads 87 °C now."""
    db = tmp_path / "h.sqlite"
    at_83 = dataclasses.replace(FULL_INFO, temp_slowdown_c=83.0)
    hot = dataclasses.replace(FULL_SAMPLE, utilization_gpu_pct=95.0, temperature_c=83.0, clock_event_reasons=0x60,
                              clock_event_sw_thermal_s=1.0, clock_event_hw_thermal_s=1.0)
    cool = dataclasses.replace(hot, temperature_c=60.0, clock_event_reasons=0x0, clock_event_sw_thermal_s=0.0,
                               clock_event_hw_thermal_s=0.0, clock_event_sw_power_cap_s=0.0)
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(LOG_START_S + i, info=at_83, sample=hot) for i in range(600)])
        store.write_snapshots([snapshot(LOG_START_S + 600 + i, sample=cool) for i in range(600)])  # 87 °C
        frame = load_frame(store, LOG_START_S, LOG_START_S + 1200)
    assert frame.gpus[0].meta.temp_slowdown_c == 87.0
    [rec] = [r for r in run_rules(frame) if r.rule_id == "thermal_throttling"]
    assert rec.evidence_value("Slowdown temperature") == 83.0
