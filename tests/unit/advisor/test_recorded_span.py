"""A fresh install's 34 minutes are said as 34 minutes, not "7 days of history" (issue 32).

Before, every monthly figure was extrapolated from the window's length: the Costs page said
"0 busy hours (7 days of history)" after 34 minutes of recording, and a partly recorded week was
priced as if its missing days were idle.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from advisor.costs import cost_answer
from desktop import config
from desktop.advice import compute_advice, load_recent_frame
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuSample
from tests.unit.history.helpers import FULL_SAMPLE, snapshot

T0 = 1_790_000_000.0
MINUTES = 34


def _fresh_install(db: Path, utilization_pct: float) -> None:
    sample: GpuSample = dataclasses.replace(FULL_SAMPLE, utilization_gpu_pct=utilization_pct)
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(T0 + i, sample=sample) for i in range(MINUTES * 60)])


@pytest.mark.parametrize("utilization_pct", [0.0, 90.0])
def test_34_minutes_are_said_and_used_as_34_minutes(tmp_path: Path, utilization_pct: float) -> None:
    db = tmp_path / "h.sqlite"
    _fresh_install(db, utilization_pct)
    with HistoryStore.open(db, readonly=True) as store:
        advice = compute_advice(load_recent_frame(store, 7.0, T0 + MINUTES * 60), config.Settings())
    (cost,) = advice.costs
    answer = cost_answer(cost)
    assert "days of history" not in answer and "34 recorded minutes of the last 7 days" in answer
    assert cost.history_s == pytest.approx(MINUTES * 60.0, abs=2.0)
    if utilization_pct > 0:  # busy all 34 minutes: busy all month, as far as those minutes tell
        assert cost.busy_hours_month == pytest.approx(720.0, rel=0.01)
    else:
        assert answer.startswith("No busy hours in 34 recorded minutes of the last 7 days")
