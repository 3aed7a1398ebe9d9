"""`rigscope stress --gpu N` and `--simulate[=PROFILES]`, as every other command spells them (issue 35 item 3);
`--device` kept as an alias, said so in `--help`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop.cli import build_parser, main


def test_stress_help_offers_gpu_and_simulate_and_calls_device_an_alias(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["stress", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--gpu N" in text and "--simulate [PROFILES]" in text
    assert "an alias kept for --gpu N (cuda:N) and --simulate (sim)" in text


def test_simulate_with_profiles_and_gpu_tests_that_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    code = main(["stress", "--simulate=rtx4090-laptop,rtx4090", "--gpu", "1", "--minutes", "0.03", "--json",
                 "--db", str(db)])
    report = json.loads(capsys.readouterr().out)
    assert code == report["exit_code"] == 7  # too short to judge, as the same run with --device sim
    assert report["device"] == "sim" and report["gpu"]["nvml_index"] == 1
    assert "Laptop" not in report["gpu"]["name"] and "4090" in report["gpu"]["name"]
    # --device sim is the same run (the alias), on the default laptop's GPU 0
    assert main(["stress", "--device", "sim", "--minutes", "0.03", "--json", "--db", str(db)]) == 7
    alias = json.loads(capsys.readouterr().out)
    assert alias["device"] == "sim" and alias["gpu"]["nvml_index"] == 0 and "Laptop" in alias["gpu"]["name"]


@pytest.mark.parametrize(("argv", "said"), [
    (["--simulate", "--gpu", "3"], "there is no GPU 3: the simulated machine has 1 GPU"),
    (["--simulate=no-such-gpu"], "no-such-gpu"),
    (["--simulate", "--device", "cpu"], "--simulate runs on the simulated GPU: leave out --device cpu"),
    (["--simulate", "--gpu", "-1"], "--gpu -1: a GPU's NVML index is 0 or more"),
])
def test_a_gpu_or_profile_that_is_not_there_is_one_line_and_exit_2(
        argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stress", *argv, "--minutes", "0.03", "--db", str(tmp_path / "h.sqlite")]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
