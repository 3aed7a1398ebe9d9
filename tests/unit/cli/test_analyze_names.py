"""`rigscope analyze FILE` names each GPU by the log's name column, not its key (issue 26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop import cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
A10_IDLE = FIXTURES / "nvsmi_a10_idle_power_cap.csv"


def _without_index(tmp_path: Path, name: str = "NVIDIA A10") -> Path:
    """The A10 log as `--query-gpu=timestamp,name,pci.bus_id,...` writes it: no index column."""
    lines = A10_IDLE.read_text().splitlines()
    out = []
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        del cells[1]  # index
        if cells[1] == "NVIDIA A10":
            cells[1] = name
        out.append(", ".join(cells))
    path = tmp_path / "log.csv"
    path.write_text("\n".join(out) + "\n")
    return path


def test_a_log_without_an_index_column_names_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["analyze", str(_without_index(tmp_path))])
    out = capsys.readouterr().out
    assert out.startswith("NVIDIA A10: ") and "pci:" not in out, out


def test_a_hostile_name_is_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["analyze", str(_without_index(tmp_path, name="A10\x1b]0;pwned\x07"))])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "pwned" in out, out
