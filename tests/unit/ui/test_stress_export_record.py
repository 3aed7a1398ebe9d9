"""The Stress page's "Export JSON…" writes the portable run record `rigscope stress -o` writes (an HTML page beside
it): `rigscope compare` and the Compare dialog read it (they refused the page's old export: "not a Rigscope run
record")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pytestqt.qtbot import QtBot

from desktop import cli
from desktop.stress.devices import GpuTarget
from desktop.stress.portable import read_record, record_from_stress
from desktop.stress.records import judge_run
from desktop.stress.run_model import RunResult, StressConfig
from desktop.telemetry.model import GpuInfo
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.theme import resolve

T0 = 1_795_000_000.0


def _result() -> RunResult:
    time_s = T0 + np.arange(120.0)
    return RunResult(status="completed", message="finished",
                     config=StressConfig(workload="gemm", target=GpuTarget.cuda(0)),
                     started_s=T0, ended_s=T0 + 120.0, unit="TFLOP/s", dtype="bf16", time_s=time_s,
                     throughput=np.full(120, 60.0), columns={"power_w": np.full(120, 149.0),
                                                             "sm_clock_mhz": np.full(120, 1900.0),
                                                             "temperature_c": np.full(120, 70.0)},
                     gpu=GpuInfo(index=0, uuid="GPU-A", name="NVIDIA GeForce RTX 4090 Laptop GPU",
                                 power_limit_enforced_w=150.0))


def test_export_json_writes_the_record_stress_o_writes_and_compare_reads_it(
        qtbot: QtBot, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(_config: object) -> object:
        raise ValueError("no GPU here")

    page = StressPage(resolve("light"), refuse)  # type: ignore[arg-type]
    qtbot.addWidget(page)
    result = _result()
    page.result, page.verdict = result, judge_run(result)
    page.export_json(tmp_path / "run.json")
    exported = read_record(tmp_path / "run.json")
    same = record_from_stress(result, page.verdict)
    # The same record as `stress -o` (the host's name and versions aside: both capture this machine).
    assert exported == same
    assert "<h1>Rigscope stress test</h1>" in (tmp_path / "run.html").read_text()
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "run.json"), str(tmp_path / "run.json")]) == 0
    assert "not a Rigscope run record" not in capsys.readouterr().err
