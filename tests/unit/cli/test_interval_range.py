"""One allowed sampling interval everywhere (issue 14): Settings and `--interval` of record, run, sample, serve,
taken and checked by one helper (``sampling_interval``, issue 35)."""

from __future__ import annotations

import argparse
import math
import threading

import pytest

from desktop import cli, config
from desktop.cli import record, run, sample, serve
from desktop.cli.common import check_interval, sampling_interval
from desktop.errors import UserError
from desktop.paths import config_file

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
    with pytest.raises(UserError, match=f"choose between {LOW:g} and {HIGH:g}"):
        run.main(argparse.Namespace(cmd=["--", "true"], interval=LOW / 2, simulate="", db=None))
    with pytest.raises(UserError, match=f"choose between {LOW:g} and {HIGH:g}"):
        sample.main(argparse.Namespace(count=1, interval=HIGH * 2, simulate="", detail=False, json=False))


# --- the one helper: --interval, else the command's default, else the Settings' -----------------------------

SETTINGS = config.Settings(sampling=config.SamplingSettings(interval_s=2.5))


def test_an_explicit_interval_wins_over_the_settings_and_the_default() -> None:
    assert sampling_interval(argparse.Namespace(interval=0.5), SETTINGS) == 0.5
    assert sampling_interval(argparse.Namespace(interval=0.5), default=1.0) == 0.5
    assert sampling_interval(argparse.Namespace(interval=HIGH), SETTINGS) == HIGH


def test_without_one_the_default_else_the_settings_given() -> None:
    assert sampling_interval(argparse.Namespace(interval=None), SETTINGS) == 2.5  # record, run
    assert sampling_interval(argparse.Namespace(interval=None), default=1.0) == 1.0  # sample


def test_without_settings_given_it_reads_the_settings_file_only_when_it_needs_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """serve's way: the Settings file is read (and its problems said) only when there is no --interval."""
    config.save(SETTINGS)
    assert sampling_interval(argparse.Namespace(interval=None)) == 2.5
    path = config_file()
    path.write_text("[sampling]\ninterval_s = 999\n", encoding="utf-8")
    assert sampling_interval(argparse.Namespace(interval=0.5)) == 0.5
    assert capsys.readouterr().err == ""  # not read: nothing said about the file
    assert sampling_interval(argparse.Namespace(interval=None)) == config.SamplingSettings().interval_s
    assert capsys.readouterr().err == f"settings: sampling.interval_s: must be between {LOW:g} and {HIGH:g}\n"


@pytest.mark.parametrize("bad", [LOW / 2, HIGH * 2, math.nan, -1.0])
def test_an_interval_outside_the_range_is_one_line_and_exit_2(bad: float) -> None:
    for args, settings in ((argparse.Namespace(interval=bad), SETTINGS),
                           (argparse.Namespace(interval=None), config.Settings(
                               sampling=config.SamplingSettings(interval_s=bad)))):
        with pytest.raises(UserError) as refused:
            sampling_interval(args, settings)
        assert refused.value.exit_code == 2
        assert str(refused.value) == f"--interval {bad:g}: choose between {LOW:g} and {HIGH:g} seconds"
