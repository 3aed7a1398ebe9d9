"""The helpers every subcommand shares: one time grammar, the database path, the progress bar, tables."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from desktop.cli.common import ProgressBar, attach_relative_times, db_path, parse_time, text_table, time_range
from desktop.errors import UserError


def test_relative_times_work_as_separate_arguments() -> None:
    assert attach_relative_times(["export", "--from", "-7d", "--to", "now", "-o", "x"]) == [
        "export", "--from=-7d", "--to", "now", "-o", "x"]


def test_parse_time_relative_and_absolute() -> None:
    assert parse_time("-7d", 1000_000.0) == 1000_000.0 - 7 * 86400
    assert parse_time("-30m", 5000.0) == 3200.0
    assert parse_time("-90s", 5000.0) == 4910.0
    assert parse_time("-2h", 1_800_000_000.0) == 1_800_000_000.0 - 7200
    assert parse_time("-1w", 1_800_000_000.0) == 1_800_000_000.0 - 7 * 86400
    assert parse_time("now", 42.0) == 42.0
    assert parse_time("1970-01-02T00:00:00+00:00", 0.0) == 86400.0
    assert parse_time("2026-11-02T12:00:00+00:00", 0.0) == 1_793_620_800.0
    with pytest.raises(UserError, match="cannot read the time"):
        parse_time("yesterday-ish", 0.0)


def test_a_range_defaults_to_the_span_before_now_and_must_not_be_empty() -> None:
    def args(start: str | None, end: str | None) -> argparse.Namespace:
        return argparse.Namespace(from_=start, to=end, now_s=1_800_000_000.0)

    assert time_range(args(None, None), 3600.0) == (1_800_000_000.0 - 3600.0, 1_800_000_000.0)
    assert time_range(args("-1w", "-1d"), 3600.0) == (1_800_000_000.0 - 7 * 86400, 1_800_000_000.0 - 86400)
    with pytest.raises(UserError, match="--to must be after --from"):
        time_range(args("-1h", "-2h"), 3600.0)


def test_the_database_path_expands_the_home_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert db_path(argparse.Namespace(db="~/h.sqlite")) == tmp_path / "h.sqlite"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal_only() -> None:
    terminal = _Terminal()
    bar = ProgressBar(200, "reading gpu.csv", stream=terminal, width=10)
    bar.update(100)
    bar.update(200)
    bar.close()
    text = terminal.getvalue()
    assert "\rreading gpu.csv [#####-----]  50.0%" in text
    assert text.endswith("[##########] 100.0%\n")
    pipe = io.StringIO()
    quiet = ProgressBar(200, "x", stream=pipe)
    quiet.update(200)
    quiet.close()
    assert pipe.getvalue() == ""


def test_progress_bar_blanks_what_a_longer_detail_left() -> None:
    terminal = _Terminal()
    bar = ProgressBar(1.0, stream=terminal, width=4)
    bar.update(0.5, "12 min left  80 °C")
    bar.update(1.0, "done")
    assert terminal.getvalue().split("\r")[-1] == "[####] 100.0%  done" + " " * len("12 min left  80 °C"[4:])


def test_text_table_aligns_columns_and_escapes_names() -> None:
    assert text_table([("", "GPU 0"), ("name", "a\x1bb")], indent="") == "      GPU 0\nname  a\\x1bb"
