"""`rigscope analyze` on the stored history: a range without samples is said, and exits 2 (issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop import cli
from desktop.cli.common import iso_local
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import snapshot

T0 = 1_790_000_000.0  # 2026-09-21


def test_a_stored_range_without_samples_says_so_and_exits_2(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(T0 + i) for i in range(5)])
    october = ["--from", "2026-10-01T00:00:00+00:00", "--to", "2026-10-02T00:00:00+00:00"]
    assert cli.main(["analyze", "--db", str(db), *october]) == 2
    err = capsys.readouterr().err
    assert "no samples in" in err and iso_local(T0)[:10] in err  # and what the history does hold
    september = ["--from", "2026-09-01T00:00:00+00:00", "--to", "2026-09-30T00:00:00+00:00"]
    assert cli.main(["analyze", "--db", str(db), *september]) == 0  # samples, no load: judged, not an error
    assert "No load" in capsys.readouterr().out


def test_an_empty_history_says_so_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    HistoryStore.open(db).close()
    range_ = ["--from", "2026-10-01T00:00:00+00:00", "--to", "2026-10-02T00:00:00+00:00"]
    assert cli.main(["analyze", "--db", str(db), *range_]) == 2
    assert "holds no samples yet" in capsys.readouterr().err
