"""One allowed sampling interval everywhere (issue 14): Settings and `--interval` of record, sample, serve."""

from __future__ import annotations

import argparse
import threading

import pytest

from desktop import cli, config
from desktop.cli import record, serve
from desktop.cli.common import check_interval
from desktop.errors import UserError

LOW, HIGH = config.INTERVAL_RANGE_S


def test_the_settings_range_is_the_constant() -> None:
    assert config.allowed_range("sampling.interval_s") == config.INTERVAL_RANGE_S
    for bad in (LOW / 2, HIGH * 2):
        _, problems = config.from_mapping({"sampling": {"interval_s": bad}})
        assert problems == [("sampling.interval_s", f"must be between {LOW:g} and {HIGH:g}")]


@pytest.mark.parametrize("command", ["sample", "record", "serve"])
@pytest.mark.parametrize("value", [LOW / 2, HIGH * 2])
def test_interval_outside_the_range_is_refused_by_every_command(command: str, value: float,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args([command, "--interval", f"{value:g}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"choose between {LOW:g} and {HIGH:g} seconds" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["sample", "record", "serve"])
def test_the_range_ends_are_accepted_and_the_help_says_them(command: str) -> None:
    for value in (LOW, HIGH):
        assert cli.build_parser().parse_args([command, "--interval", f"{value:g}"]).interval == value
    assert check_interval(LOW) == LOW


def test_the_commands_refuse_an_interval_from_elsewhere_too() -> None:
    args = argparse.Namespace(listen="127.0.0.1:0", interval=HIGH * 2, simulate="", db=None)
    with pytest.raises(UserError, match=f"choose between {LOW:g} and {HIGH:g}"):
        serve.main(args, threading.Event())
    with pytest.raises(UserError, match=f"choose between {LOW:g} and {HIGH:g}"):
        record.main(argparse.Namespace(interval=float("nan"), simulate="", db=None, prometheus=False))
