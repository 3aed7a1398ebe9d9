"""`rigscope analyze` on an Ada laptop's log: the clock is not said against the 3,105 MHz V/F top (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from desktop.cli import main

HEADER = ("timestamp, index, name, pci.bus_id, utilization.gpu [%], temperature.gpu, power.draw [W], clocks.sm [MHz], "
          "clocks.max.sm [MHz], power.limit [W], clocks_event_reasons.active")


def _laptop_log_at_80_w(path: Path, seconds: int = 300) -> Path:
    """An RTX 4080 Laptop held at its 80 W limit (~1,270 MHz), as nvidia-smi logs it: max SM 3105 MHz."""
    rng = np.random.default_rng(4080)
    lines = [HEADER]
    for second in range(seconds):
        minute, sec = divmod(second, 60)
        clock = round(rng.normal(1270.0, 20.0) / 15.0) * 15
        lines.append(f"2026/12/01 10:{minute:02d}:{sec:02d}.000, 0, NVIDIA GeForce RTX 4080 Laptop GPU, "
                     f"00000000:01:00.0, 100 %, {60 + min(second, 120) // 10}, {rng.normal(79.5, 0.4):.2f} W, "
                     f"{clock} MHz, 3105 MHz, 80.00 W, 0x0000000000000004")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_an_80_w_laptop_log_is_not_41_percent_of_its_max(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _laptop_log_at_80_w(tmp_path / "laptop.csv")
    assert main(["analyze", str(log)]) == 0
    out = capsys.readouterr().out
    assert "at its 80 W power limit" in out
    assert "3,105" not in out and "41 %" not in out, out
    assert "of its early sustained clock (1,2" in out
    assert main(["analyze", str(log), "--json"]) == 0
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["sm_clock_max_mhz"] == 3105.0 and verdict["clock_reference_basis"] == "early"
    assert 1240.0 <= verdict["clock_reference_mhz"] <= 1300.0
