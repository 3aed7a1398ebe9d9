"""`rigscope export` on a range without raw samples names what the database holds, and blames
retention only where raw samples were pruned (issue 26)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from desktop import cli
from desktop.cli.common import iso_local
from desktop.config import RetentionSettings
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import FULL_INFO, snapshot

T0 = 1_790_000_000.0  # 2026-09-21
DAY = 86400.0
OCTOBER = ["--from", "2026-10-01T00:00:00+00:00", "--to", "2026-10-02T00:00:00+00:00"]


def test_an_empty_range_names_the_range_held_and_not_retention(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(T0 + i) for i in range(5)])
    assert cli.main(["export", "--db", str(db), *OCTOBER]) == 0
    err = capsys.readouterr().err
    assert "no samples between" in err
    assert f"{iso_local(T0)} .. {iso_local(T0 + 4)}" in err  # what it does hold
    assert "retention" not in err  # nothing was pruned


def test_an_empty_history_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    HistoryStore.open(db).close()
    assert cli.main(["export", "--db", str(db), *OCTOBER]) == 0
    assert "holds no samples yet" in capsys.readouterr().err


def test_a_range_whose_raw_samples_were_pruned_says_retention(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    now = T0 + 20 * DAY
    with HistoryStore.open(db) as store:
        t = T0 + np.arange(0, 20 * DAY, 60.0)
        store.write_gpu_columns(FULL_INFO, t, {"power_w": np.full(len(t), 80.0)})
        store.run_rollups(now)
        store.apply_retention(RetentionSettings(raw_days=3, minute_days=30, hour_days=0), now)
    first_day = ["--from", iso_local(T0), "--to", iso_local(T0 + DAY)]
    assert cli.main(["export", "--db", str(db), *first_day]) == 0
    err = capsys.readouterr().err
    assert "retention" in err and iso_local(now - 3 * DAY)[:10] in err, err  # where the raw samples begin now
