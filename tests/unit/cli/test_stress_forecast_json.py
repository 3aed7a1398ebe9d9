"""`rigscope stress --json` carries the temperature forecast (issue 32 item 8), or null with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop.cli import main
from desktop.cli.stress import _json_report
from desktop.stress.records import exit_code, judge_run
from tests.unit.stress.test_runner_sim import sim_runner


def test_the_quick_runs_json_carries_the_forecast_as_a_forecast() -> None:
    runner, _backend, _seen = sim_runner(duration_s=120.0)  # the Quick test on the simulated RTX 4090 Laptop
    result = runner.run()
    verdict = judge_run(result)
    report = json.loads(json.dumps(_json_report(result, verdict, None, exit_code(result, verdict), None),
                                   default=str))
    forecast = report["forecast"]
    assert forecast is not None and report["forecast_unavailable"] is None
    assert forecast["measured"] is False and forecast["reaches_slowdown"] is True and forecast["slowdown_c"] == 87.0
    low, high = forecast["interval_c"]
    assert low <= forecast["steady_temperature_c"] <= high and high - low < 10.0
    assert 95.0 <= forecast["steady_temperature_c"] <= 105.0  # the model's 25 °C + 0.5 °C/W x 150 W = 100 °C
    assert 60.0 <= forecast["time_constant_s"] <= 120.0 and forecast["basis"].startswith("first-order fit")
    assert report["verdict"]["forecast"] == forecast  # one forecast, in the verdict too
    assert report["verdict"]["clock_reference_basis"] == "early"


def test_a_run_too_short_to_fit_says_why_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stress", "--device", "sim", "--minutes", "0.03", "--json", "--db", str(tmp_path / "h.sqlite")])
    report = json.loads(capsys.readouterr().out)
    assert code == 7 and "forecast" in report and report["forecast"] is None
    assert isinstance(report["forecast_unavailable"], str) and report["forecast_unavailable"]
