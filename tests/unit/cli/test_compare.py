"""`rigscope compare A.json B.json [--json]`: records from two machines side by side, the driver gap flagged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.portable import Environment, Latency, PortableRecord, Spread
from desktop.cli import main
from desktop.stress.portable import write_record


def _laptop() -> PortableRecord:
    return PortableRecord(
        kind="stress", workload="gemm", started_s=1_790_000_000.0, duration_s=600.0,
        environment=Environment(gpu_name="NVIDIA GeForce RTX 4090 Laptop GPU", driver="550.54.14", cuda_driver="12.4",
                                cuda_runtime="12.1", torch="2.3.1", rigscope="0.1.0", power_limit_w=150.0),
        machine="vector", device="cuda:0", dtype="bf16", unit="TFLOP/s", throughput=66.6, peak_throughput=72.3,
        power_w=Spread(140.0, 148.0, 150.0, 148.0), temperature_c=Spread(80.0, 86.0, 88.0, 85.0), energy_j=88_800.0,
        verdict="throttled", throttled=True, price_per_hour=0.20, currency="USD")


def _cloud() -> PortableRecord:
    laptop = _laptop()
    return replace(laptop, machine="runpod-h100", throughput=740.0, peak_throughput=760.0,
                   power_w=Spread(650.0, 690.0, 700.0, 690.0), verdict="passed", throttled=False, price_per_hour=2.99,
                   environment=replace(laptop.environment, gpu_name="NVIDIA H100 80GB HBM3", driver="535.104.05",
                                       power_limit_w=700.0))


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "laptop.json", tmp_path / "cloud.json"
    write_record(a, _laptop())
    write_record(b, _cloud())
    return a, b


def test_compare_shows_ratios_and_flags_the_driver_difference(two_files: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_files
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    lines = {line.strip().split("  ")[0]: line for line in out.splitlines() if line.strip()}
    assert "A: vector · NVIDIA GeForce RTX 4090 Laptop GPU" in out and "B: runpod-h100 · NVIDIA H100" in out
    assert "66.6 TFLOP/s (1.00×)" in lines["throughput (sustained)"]
    assert "740 TFLOP/s (11.11×)" in lines["throughput (sustained)"]
    assert "550.54.14" in lines["! NVIDIA driver"] and "535.104.05" in lines["! NVIDIA driver"]
    assert "! power limit" in lines and "PyTorch" in lines and "! PyTorch" not in lines  # same torch: not flagged
    assert "USD per 1M TFLOP" in lines["cost of work"]
    assert "Differences that can explain a gap: NVIDIA driver 550.54.14 vs 535.104.05" in out


def test_compare_json_carries_ratios_and_flags(two_files: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_files
    assert main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    laptop, cloud = data["records"]
    assert laptop["file"] == str(a) and cloud["record"]["environment"]["driver"] == "535.104.05"
    assert cloud["throughput_ratio"] == pytest.approx(740.0 / 66.6)
    assert cloud["work_per_joule"] == pytest.approx(740.0 / 690.0) and cloud["work_per_joule_unit"] == "TFLOP/J"
    assert cloud["cost_per_unit"] == pytest.approx(2.99 / 3600 / 740.0) and cloud["cost_unit"] == "TFLOP"
    flagged = [d["key"] for d in data["differences"] if d["flagged"]]
    assert flagged == ["driver", "power_limit_w"]


def test_three_records_compare_against_the_first(two_files: tuple[Path, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_files
    c = tmp_path / "infer.json"
    write_record(c, replace(_laptop(), workload="infer", unit="steps/s", throughput=400.0,
                            latency=Latency(2.0, 2.4, 3.1)))
    assert main(["compare", str(a), str(b), str(c), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["throughput_ratio"] for r in data["records"]] == [None, None, None]
    assert any("measure different things" in note for note in data["notes"])


def test_a_hostile_name_in_a_record_reaches_the_terminal_escaped(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_record(a, _laptop())
    write_record(b, replace(_cloud(), machine="evil\x1b]0;pwned\x07\u202e"))
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b" in out


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("", "not valid JSON"),
    ('{"format": "rigscope-run", "version": 9}', "newer Rigscope"),
    ('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": "x"}',
     '"started_s" must be a number'),
    (b"\xff\xfe\x00garbage", "not UTF-8 text"),
])
def test_a_missing_or_damaged_file_is_exit_2_naming_it(two_files: tuple[Path, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str], content: str | bytes | None,
                                                       message: str) -> None:
    a, _b = two_files
    bad = tmp_path / "bad.json"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    elif content is not None:
        bad.write_text(content, encoding="utf-8")
    assert main(["compare", str(a), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and message in err and "Traceback" not in err


def test_compare_needs_two_files(two_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(two_files[0])]) == 2
    assert "two or more" in capsys.readouterr().err


def test_a_folder_is_not_a_record(two_files: tuple[Path, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(two_files[0]), str(tmp_path)]) == 2
    assert "it is a folder" in capsys.readouterr().err


HOSTILE_HEAD = '{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1'


@pytest.mark.parametrize(("body", "field"), [
    (', "throughput": {"sustained": ' + "9" * 400 + "}}", "throughput.sustained"),  # OverflowError before
    (', "energy_j": ' + "1" * 4301 + "}", "energy_j"),  # ValueError (int digit limit) before
    (', "machine": "box\\ud800"}', "machine"),  # UnicodeEncodeError before
    (', "power_w": {"mean": -Infinity}}', "power_w.mean"),
])
def test_a_hostile_record_is_one_line_naming_file_and_field_exit_2(
        two_files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str,
        field: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(HOSTILE_HEAD + body, encoding="utf-8")
    assert main(["compare", str(two_files[0]), str(bad), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and f'"{field}"' in lines[0], captured.err


def test_nesting_and_size_are_refused_in_one_line(two_files: tuple[Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    deep, huge = tmp_path / "deep.json", tmp_path / "huge.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    huge.write_bytes(b" " * 5_000_000)
    for bad in (deep, huge):
        assert main(["compare", str(two_files[0]), str(bad)]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and str(bad) in err and "Traceback" not in err


def test_compare_json_on_a_tiny_baseline_has_only_finite_numbers(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    tiny, big = tmp_path / "tiny.json", tmp_path / "big.json"
    write_record(tiny, replace(_laptop(), throughput=1e-9, power_w=Spread(mean=1e15), price_per_hour=1e-9))
    write_record(big, replace(_cloud(), throughput=1e15, power_w=Spread(mean=1e-9), price_per_hour=1e15))
    assert main(["compare", str(tiny), str(big), "--json"]) == 0
    out = capsys.readouterr().out
    assert "Infinity" not in out and "NaN" not in out
    json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


def test_a_subnormal_baseline_is_refused_not_an_infinite_ratio(two_files: tuple[Path, Path], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    tiny = tmp_path / "tiny.json"
    tiny.write_text(HOSTILE_HEAD + ', "throughput": {"sustained": 5e-324, "unit": "TFLOP/s"}}', encoding="utf-8")
    assert main(["compare", str(tiny), str(two_files[1]), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and '"throughput.sustained"' in captured.err and "Infinity" not in captured.err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_or_dev_zero_as_a_compare_input_is_one_line_not_a_hang(two_files: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    """Issue 34 item 5: opening a FIFO with no writer blocked `compare` for ever."""
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    repo = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for hostile, why in ((fifo, "is a FIFO (named pipe), not a regular file"),
                         (Path("/dev/zero"), "is a character device, not a regular file")):
        try:
            done = subprocess.run([sys.executable, "-m", "desktop", "compare", str(two_files[0]), str(hostile)],
                                  capture_output=True, text=True, env=env, check=False, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"compare blocked on {hostile}")
        assert done.returncode == 2 and f"cannot read {hostile}: it {why}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
