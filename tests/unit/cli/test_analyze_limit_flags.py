"""`rigscope analyze --power-limit W` and `--gpu NAME` for logs that carry no limit and no name (issue 32, item 2).

``--gpu`` was an int index only (``--gpu "H100 PCIe"``: "invalid int value"); a log without a limit
column could not be given one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from desktop import cli
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuInfo, GpuSample
from tests.unit.history.helpers import snapshot

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
H100_PCIE = FIXTURES / "nvsmi_h100_pcie_power_capped.csv"
LAPTOP = FIXTURES / "nvsmi_rtx4080_laptop_dynamic_boost.csv"


def _anonymous(tmp_path: Path) -> Path:
    """The H100 PCIe log without its limit columns and its name: nothing in it says what GPU or what limit."""
    lines = H100_PCIE.read_text(encoding="utf-8").splitlines()
    header = [c.strip() for c in lines[0].split(",")]
    drop = {i for i, c in enumerate(header) if c.split("[")[0].strip() in ("power.limit", "enforced.power.limit",
                                                                             "name")}
    out = tmp_path / "anon.csv"
    out.write_text("\n".join(", ".join(c for i, c in enumerate(line.split(", ")) if i not in drop)
                             for line in lines) + "\n", encoding="utf-8")
    return out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_power_limit_gives_a_log_without_one_its_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["analyze", str(_anonymous(tmp_path)), "--power-limit", "350", "--json"], capsys)
    assert code == 0, err
    (run,) = json.loads(out)
    assert (run["power_cap"], run["power_limit_w"], run["power_limit_source"]) == ("at_limit", 350.0, "given")
    assert "at its 350 W power limit (as given with --power-limit) the whole run" in run["sentence"]


def test_power_limit_replaces_the_logs_moving_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["analyze", str(LAPTOP), "--power-limit", "80 W", "--json"], capsys)
    assert code == 0
    runs = json.loads(out)
    assert [(r["power_limit_w"], r["power_limit_source"], r["power_limit_steps"]) for r in runs] == [
        (80.0, "given", []), (80.0, "given", [])]


def test_gpu_name_gives_the_datasheet_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("NVIDIA H100 PCIe", "h100  pcie"):  # any case and spacing, "NVIDIA " optional
        code, out, err = _run(["analyze", str(_anonymous(tmp_path)), "--gpu", name, "--json"], capsys)
        assert code == 0, err
        (run,) = json.loads(out)
        assert (run["power_limit_w"], run["power_limit_source"]) == (350.0, "datasheet")
        assert "at its 350 W power limit (the datasheet figure for an NVIDIA H100 PCIe)" in run["sentence"]


def test_digits_still_choose_a_gpu_by_index(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["analyze", str(H100_PCIE), "--gpu", "0"], capsys)
    assert code == 0 and out.startswith("GPU 0 NVIDIA H100 PCIe: ")
    code, _, err = _run(["analyze", str(H100_PCIE), "--gpu", "1"], capsys)
    assert code == 2 and "--gpu 1 is not one of them" in err


@pytest.mark.parametrize(("name", "says"), [
    ("H100 PCI", "did you mean NVIDIA H100 PCIe"),
    ("banana", "`rigscope analyze --help` says how to choose one"),
    ("RTX 4080 Laptop GPU", "a laptop GPU has no datasheet power limit"),
])
def test_an_unknown_name_is_one_line_and_exit_2(name: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["analyze", str(H100_PCIE), "--gpu", name], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err, err


@pytest.mark.parametrize("value", ["-3", "0", "abc", "nan", "1e9"])
def test_a_bad_power_limit_is_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["analyze", str(H100_PCIE), "--power-limit", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--power-limit" in err and "Traceback" not in err


def test_the_help_says_both(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["analyze", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--gpu INDEX|NAME" in text and "datasheet power limit" in text
    assert "--power-limit W" in text and "for a log that has none" in text


def test_a_stored_range_takes_both_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The history of a GPU that reported no limit: the flags work on stored ranges as on files."""
    t0 = time.time() - 600.0  # analyze's default range is the last hour
    info = GpuInfo(index=0, uuid="GPU-anon", name="Some GPU")
    rng = np.random.default_rng(5)
    db = tmp_path / "h.sqlite"
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(t0 + i, info=info, sample=GpuSample(
            utilization_gpu_pct=100.0, power_w=round(348.0 + float(rng.normal(0.0, 0.5)), 1),
            sm_clock_mhz=825.0 + 15.0 * float(rng.integers(-4, 5)), temperature_c=70.0)) for i in range(240)])
    code, out, err = _run(["analyze", "--db", str(db), "--power-limit", "350", "--json"], capsys)
    assert code == 0, err
    (run,) = json.loads(out)
    assert (run["power_limit_w"], run["power_limit_source"], run["power_cap"]) == (350.0, "given", "at_limit")
    code, out, err = _run(["analyze", "--db", str(db), "--gpu", "H100 PCIe", "--json"], capsys)
    assert code == 0, err
    (run,) = json.loads(out)
    assert (run["power_limit_w"], run["power_limit_source"]) == (350.0, "datasheet")
