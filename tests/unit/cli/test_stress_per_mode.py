"""`rigscope stress --per-mode` on the simulated laptop: one run per mode, saved, compared side by side."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from desktop.cli import build_parser, stress
from desktop.errors import UserError
from desktop.stress import per_mode


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    return build_parser().parse_args(["stress", "--device", "sim", "--db", str(tmp_path / "h.sqlite"), *extra])


def test_per_mode_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(per_mode, "COOL_LIMIT_S", 0.0)
    assert stress.main(_args(tmp_path, "--per-mode", "turbo,eco", "--minutes", "0.05", "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    turbo, eco = out["modes"]
    assert (turbo["name"], eco["name"]) == ("Extreme Performance", "Eco")
    assert turbo["power_limit_line"] == "at its rated power (175 W)"
    assert eco["power_limit_line"] == "capped at 80 W of 175 W: firmware mode Eco"
    assert turbo["run_id"] is not None and eco["run_id"] is not None
    assert turbo["throughput"] > eco["throughput"] and turbo["power_w"] > eco["power_w"]
    assert out["sentences"][0].startswith("Extreme Performance buys ") and " over Eco at +" in out["sentences"][0]
    assert out["comparison"]["records"][0]["label"].startswith("Extreme Performance")


def test_per_mode_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(per_mode, "COOL_LIMIT_S", 0.0)
    assert stress.main(_args(tmp_path, "--per-mode", "comfort,turbo", "--minutes", "0.05")) == 0
    text = capsys.readouterr().out
    assert "A: Balanced" in text and "B: Extreme Performance" in text
    assert "power limit" in text  # the environment row that differs between the modes
    assert "Extreme Performance buys " in text and " over Balanced at +" in text


@pytest.mark.parametrize("bad", [["--per-mode", "sport"], ["--per-mode", "eco"],
                                 ["--per-mode", "eco,turbo", "-o", "x"]])
def test_per_mode_refusals(tmp_path: Path, bad: list[str]) -> None:
    with pytest.raises(UserError):
        stress.main(_args(tmp_path, *bad, "--minutes", "0.05"))
