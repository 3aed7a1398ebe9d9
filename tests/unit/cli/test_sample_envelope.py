"""`rigscope sample --detail` and `--json` carry the one line on each GPU's power limit."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from desktop.cli import sample
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"json": False, "detail": True, "count": 1, "interval": 0.1, "simulate": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_sample_detail_on_battery(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = FIXTURES / "on_battery"
    monkeypatch.setenv("RIGSCOPE_SYSFS_ROOT", str(root / "sys"))
    monkeypatch.setenv("RIGSCOPE_PROC_ROOT", str(root / "proc"))
    FakeNvml([FakeGpu(power_limit_mw=55_000)]).install(monkeypatch)
    assert sample.main(_args()) == 0
    assert "GPU 0 power limit: capped at 55 W of 175 W: on battery" in capsys.readouterr().out
    assert sample.main(_args(json=True, detail=False)) == 0
    tick = json.loads(capsys.readouterr().out.splitlines()[0])
    assert tick["gpus"][0]["power_limit_line"] == "capped at 55 W of 175 W: on battery"
    assert tick["envelope"]["on_ac"] is False and tick["envelope"]["msi_shift_mode"] == "comfort"


def test_sample_detail_simulated_laptop(capsys: pytest.CaptureFixture[str]) -> None:
    assert sample.main(_args(simulate="rtx4090-laptop")) == 0
    assert "GPU 0 power limit: capped at 150 W of 175 W: firmware mode Balanced" in capsys.readouterr().out
