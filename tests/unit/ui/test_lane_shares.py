"""The 24 h and 7 d throttle lanes draw each cause's share of a bucket, and the hover readout says the same share.

Reproduces issue 24: HW thermal and power cap were drawn as solid bars for 14 h (any sample
in a bucket marked the whole bucket) where the raw samples showed them 1.5 % and 5 % of
that time, and the readout at the same instant named only "SW thermal".
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from desktop.history.store import HistoryStore
from desktop.sessions.recording import RecordingSession
from desktop.telemetry.model import ClockEventReason
from desktop.telemetry.simulated import parse_profile_list, profile_info
from desktop.ui.pages.dashboard_panel import LANE_REASONS, lane_share_drawing, lane_shares
from tests.unit.ui.conftest import FakeClock

START_S = 1_790_000_000.0
SW_THERMAL = int(ClockEventReason.SW_THERMAL_SLOWDOWN)
HW_THERMAL = int(ClockEventReason.HW_THERMAL_SLOWDOWN)
POWER_CAP = int(ClockEventReason.SW_POWER_CAP)


def throttled_hours(hours: float, end_s: float) -> tuple[np.ndarray, np.ndarray]:
    """1 Hz masks: SW thermal 68 %, power cap 5 %, HW thermal 1.5 % of every 200 s, in short runs."""
    time_s = end_s - hours * 3600 + np.arange(int(hours * 3600), dtype=np.float64)
    phase = np.arange(time_s.size) % 200
    mask = np.where(phase < 136, SW_THERMAL, 0) | np.where(phase % 20 == 0, POWER_CAP, 0) \
        | np.where(phase >= 197, HW_THERMAL, 0)
    return time_s, mask.astype(np.float64)


def write_week(path, time_s: np.ndarray, mask: np.ndarray) -> None:
    info = profile_info(parse_profile_list("rtx4090-laptop")[0], 0)
    with HistoryStore.open(path) as store:
        cols = {"utilization_gpu_pct": np.full(time_s.size, 95.0), "clock_event_reasons": mask,
                "power_w": np.full(time_s.size, 120.0)}
        store.write_gpu_columns(info, time_s, cols)
        store.run_rollups(math.floor(float(time_s[-1]) / 60) * 60.0 + 60.0)


def test_lane_shares_are_each_causes_seconds_over_the_bucket():
    columns = {"duration_s": np.array([60.0, 60.0, 30.0]),
               f"reason_s_{SW_THERMAL}": np.array([41.0, 0.0, 30.0]),
               f"reason_s_{HW_THERMAL}": np.array([0.9, 0.0, 0.0])}
    shares = dict(zip(LANE_REASONS, lane_shares(columns), strict=True))
    assert np.allclose(shares[ClockEventReason.SW_THERMAL_SLOWDOWN], [41 / 60, np.nan, 1.0], equal_nan=True)
    assert np.allclose(shares[ClockEventReason.HW_THERMAL_SLOWDOWN], [0.015, np.nan, np.nan], equal_nan=True)
    assert shares[ClockEventReason.SW_POWER_CAP] is None  # never held: no points


def test_a_share_is_drawn_as_that_share_of_the_row_height():
    times = np.array([0.0, 60.0, 120.0, 180.0])
    t, y = lane_share_drawing(times, np.array([0.5, np.nan, 1.0, 0.015]), row=2)
    base = 2 - 0.4
    finite = y[np.isfinite(y)]
    assert finite.min() >= base and finite.max() <= 2.4 + 1e-9
    # Each bucket is a flat top over its own width at base + share x 0.8; an empty bucket breaks the line.
    assert list(zip(t[:2], y[:2], strict=True)) == [(0.0, pytest.approx(base + 0.4)), (60.0, pytest.approx(base + 0.4))]
    assert np.isnan(y[2])
    assert y[-1] == pytest.approx(base + 0.8 * 0.015) and t[-1] == 240.0


def _share(html: str, label: str) -> float | None:
    found = re.search(re.escape(label) + r" ([0-9.<]+) %", html)
    return None if found is None else float(found.group(1).lstrip("<"))


def test_the_24_h_lane_shows_raw_shares_and_the_readout_says_them(make_app, qtbot, tmp_path):
    db = tmp_path / "history.sqlite"
    time_s, mask = throttled_hours(14, START_S - 60)
    write_week(db, time_s, mask)
    store = HistoryStore.open(db, readonly=True)
    h = make_app(recording=RecordingSession("reading", "test", store=store), clock=FakeClock(start_s=START_S))
    h.app.window.show()
    h.tick(5)
    dash = h.app.dashboard
    dash.set_window("24 h")
    qtbot.waitUntil(lambda: not dash.loading, timeout=20_000)
    lane = dash.panels[0].plots.plot("lane")
    keys = dict(zip(LANE_REASONS, lane.series_keys(), strict=True))
    bits = {ClockEventReason.SW_THERMAL_SLOWDOWN: SW_THERMAL, ClockEventReason.HW_THERMAL_SLOWDOWN: HW_THERMAL,
            ClockEventReason.SW_POWER_CAP: POWER_CAP}
    for reason, bit in bits.items():
        bucket_t, shares = lane.history(keys[reason])
        assert bucket_t.size > 100, reason
        held = (mask.astype(np.int64) & bit) != 0
        # Each bucket's share is the raw samples' share within that bucket (one bucket's resolution).
        width = float(np.median(np.diff(bucket_t)))  # the times are the buckets' middles (hover reads them)
        for i in range(0, bucket_t.size - 1, 97):
            inside = (time_s >= bucket_t[i] - width / 2) & (time_s < bucket_t[i] + width / 2)
            if inside.sum() == 0:
                continue
            raw = float(held[inside].mean())
            assert np.nan_to_num(shares[i]) == pytest.approx(raw, abs=0.02), (reason, i)
        overall = float(np.nansum(shares)) / bucket_t.size
        assert overall == pytest.approx(float(held.mean()), abs=0.01), reason
    # The drawing is not a solid bar: HW thermal's marks reach only 1.5 % of its row's height.
    _, drawn = lane._series[keys[ClockEventReason.HW_THERMAL_SLOWDOWN]].history.getData()
    row = LANE_REASONS.index(ClockEventReason.HW_THERMAL_SLOWDOWN)
    # (all but the newest, partial minute, where 3 of 30 samples are 10 %)
    assert np.nanmax(drawn[:-2]) <= row - 0.4 + 0.8 * 0.05 + 1e-9
    # The hover readout at a bucket's time names each cause with the same share.
    bucket_t, _ = lane.history(keys[ClockEventReason.SW_THERMAL_SLOWDOWN])
    all_three = np.all([np.isfinite(lane.history(keys[r])[1]) for r in bits], axis=0)
    at = float(bucket_t[np.flatnonzero(all_three)[len(np.flatnonzero(all_three)) // 2]])
    dash.panels[0].plots.hover_at(at)
    html = lane.readout.textItem.toPlainText()
    for reason in bits:
        expected = lane.value_at(keys[reason], at)
        assert expected is not None
        shown_to = 0.06 if expected < 0.1 else 0.5  # one decimal under 10 %, whole percent above
        assert _share(html, reason.label) == pytest.approx(100 * expected, abs=shown_to), (reason, html)
    assert _share(html, ClockEventReason.HW_THERMAL_SLOWDOWN.label) <= 5.0
    dash.panels[0].plots.hover_at(None)
