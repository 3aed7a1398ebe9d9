"""`rigscope analyze` on real-shaped nvidia-smi logs with idle time (issue 11, defect 6).

The fixtures come from tests/fixtures/make_nvsmi_fixtures.py (public H800 / H100 / A10
figures, cited there).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from advisor.log_verdict import load_segments, verdicts_for_log
from desktop.cli import main
from desktop.history.nvsmi_csv import parse_nvsmi_csv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BURSTS = FIXTURES / "nvsmi_h800_gemm_bursts.csv"
POWER_CAPPED = FIXTURES / "nvsmi_h800_power_capped_gemm.csv"
A10_IDLE = FIXTURES / "nvsmi_a10_idle_power_cap.csv"
H800_THREE_POWER = FIXTURES / "nvsmi_h800_three_power_columns.csv"
H100_PCIE = FIXTURES / "nvsmi_h100_pcie_power_capped.csv"


def percentages(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) %", text)]


def test_h800_gemm_bursts_are_too_short_not_112_percent_of_peak(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: short bursts with idle between them said "Held its speed: sustained clock 112 % of peak"."""
    assert main(["analyze", str(BURSTS)]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert len(lines) == 3, out
    for number, (line, seconds) in enumerate(zip(lines, ("45 s", "40 s", "50 s"), strict=True), start=1):
        assert line.startswith(f"GPU 0 NVIDIA H800, run {number} of 3 ")
        assert f"Load of {seconds}: too short for a sustained verdict (needs 1 min)" in line
        assert "of the highest clock in the log (1,965 MHz)" in line
    assert "peak" not in out
    assert max(percentages(out)) <= 100.0
    assert main(["analyze", str(BURSTS), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["runs"], r["status"], r["throttled"]) for r in runs] == [
        (1, 3, "too_short", False), (2, 3, "too_short", False), (3, 3, "too_short", False)]
    assert [round(r["end_s"] - r["start_s"]) for r in runs] == [45, 40, 50]
    assert all(r["sm_clock_max_source"] == "log" and r["sm_clock_max_mhz"] == 1965.0 for r in runs)


def test_h800_power_capped_runs_get_one_verdict_each(capsys: pytest.CaptureFixture[str]) -> None:
    """Two GEMM runs at the 700 W cap from the first second: each held its speed, at its power limit (exit 0)."""
    assert main(["analyze", str(POWER_CAPPED)]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    # The cap named as what it is: the limit holds the clock, and that is normal for a GEMM.
    assert lines[0].startswith("GPU 0 NVIDIA H800, run 1 of 2 (10:00:30, 5 min): Held its speed at its 700 W power "
                               "limit 79 % of the run: normal for a dense GEMM; the clock at 91 % of the GPU's "
                               "reported max (1,980 MHz) is what that limit buys; sustained clock")
    assert lines[1].startswith("GPU 0 NVIDIA H800, run 2 of 2 (10:07:00, 4 min): Held its speed at its 700 W power "
                               "limit")
    for line in lines:
        assert "of the GPU's reported max (1,980 MHz) is what that limit buys" in line
        assert "peak" not in line
    assert max(percentages(out)) <= 100.0
    assert main(["analyze", str(POWER_CAPPED), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["status"], r["cause"], r["power_limited"]) for r in runs] == [
        (1, "passed", "power_cap", True), (2, "passed", "power_cap", True)]
    # The 4-second pause inside run 1 is bridged, and its samples (no load, clock at max) are not judged.
    assert runs[0]["load_s"] == pytest.approx(296.0, abs=1.0)
    assert 0.72 <= runs[0]["cause_shares"]["power_cap"] <= 0.82


def test_a10_power_cap_at_idle_is_not_mentioned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(A10_IDLE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GPU 0 NVIDIA A10: Held its speed: sustained clock 100 % of its early sustained level "
                          "(1,695 vs 1,695 MHz)")
    assert "power" not in out
    assert "100 % of the GPU's reported max (1,695 MHz)" in out


def test_without_a_max_column_the_highest_clock_in_the_log_is_named() -> None:
    ((time_s, columns),) = parse_nvsmi_csv(POWER_CAPPED).series.values()
    runs = verdicts_for_log(time_s, columns, power_limit_w=700.0)
    assert len(runs) == 2
    for run in runs:
        # The highest clock in this log is the 1980 MHz of the short pause inside run 1 (no load, no cap).
        assert run.verdict.sm_clock_max_source == "log" and run.verdict.sm_clock_max_mhz == 1980.0
        assert "of the highest clock in the log (1,980 MHz)" in run.verdict.sentence


def test_load_segments_bridge_small_gaps_and_split_on_long_ones() -> None:
    time_s = np.arange(100.0)
    util = np.zeros(100)
    util[10:30] = 100.0
    util[33:40] = 90.0  # 3 s gap: bridged
    util[60:80] = 100.0  # 20 s gap: a new run
    util[95] = 100.0  # a lone busy sample 15 s later is no run
    segments = load_segments(time_s, util)
    assert [(s.start, s.stop) for s in segments] == [(10, 40), (60, 80)]
    # A hole in the log itself (the logger stopped) splits as well.
    gap = np.concatenate([np.arange(50.0), 500.0 + np.arange(50.0)])
    assert [(s.start, s.stop) for s in load_segments(gap, np.full(100, 100.0))] == [(0, 50), (50, 100)]
    # Without a utilization column the whole log is one run.
    assert [(s.start, s.stop) for s in load_segments(time_s, None)] == [(0, 100)]


def test_an_idle_log_says_there_was_no_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = BURSTS.read_text().splitlines()
    idle = [lines[0], *(line for line in lines[1:] if " 0 %," in line)]
    log = tmp_path / "idle.csv"
    log.write_text("\n".join(idle) + "\n")
    assert main(["analyze", str(log)]) == 0
    assert capsys.readouterr().out.startswith("GPU 0 NVIDIA H800: No load in the log")
    assert main(["analyze", str(log), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["status"] == "no_load" and entry["runs"] == 0 and not entry["throttled"]


def test_analyze_help_reads_well(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "nvidia-smi" in out and "--from" in out


# --- the power cap, named (issue 22) --------------------------------------------------------

AT_THE_LIMIT = "the whole run: normal for a dense GEMM"


def _without_columns(source: Path, target: Path, names: tuple[str, ...]) -> Path:
    """``source`` with the columns ``names`` removed (a log written with fewer --query-gpu fields)."""
    rows = [line.split(", ") for line in source.read_text().splitlines()]
    drop = {i for i, cell in enumerate(rows[0]) if cell.split(" [")[0] in names}
    target.write_text("\n".join(", ".join(c for i, c in enumerate(row) if i not in drop) for row in rows) + "\n")
    return target


def test_short_h800_bursts_at_the_cap_name_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Bursts at 693-699 W of 700 W, cap bit set the whole load, read power_limited false and no word of the cap."""
    assert main(["analyze", str(H800_THREE_POWER), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 5
    for run in runs[:3]:
        assert run["status"] == "too_short" and run["power_limited"] and run["cause"] == "power_cap"
        assert run["power_cap"] == "at_limit" and run["power_limit_w"] == 700.0 and run["power_limit_source"] == "log"
        assert 693.0 <= run["power_level_w"] <= 699.0
        assert f"at its 700 W power limit {AT_THE_LIMIT}" in run["sentence"]
        assert "is what that limit buys" in run["sentence"]
    # All-zero data: the cap bit at 405-465 W, flat clock: not the board power.
    for run in runs[3:]:
        assert run["power_limited"] and run["power_cap"] == "below_limit"
        assert 405.0 <= run["power_level_w"] <= 465.0
        assert "another limit than the board power (a clock setting or power policy)" in run["sentence"]
        assert AT_THE_LIMIT not in run["sentence"]
    assert all("peak" not in run["sentence"] for run in runs)


def test_h100_pcie_pinned_at_its_limit_with_a_limit_column(capsys: pytest.CaptureFixture[str]) -> None:
    """348 of 350 W for 3 minutes at 47 % of the max clock read "Held its speed ... 47 %", power_limited false."""
    assert main(["analyze", str(H100_PCIE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"GPU 0 NVIDIA H100 PCIe: Held its speed at its 350 W power limit {AT_THE_LIMIT}; "
                          "the clock at 47 % of the GPU's reported max (1,755 MHz) is what that limit buys")
    assert "peak" not in out
    assert main(["analyze", str(H100_PCIE), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["power_limited"] and run["cause"] == "power_cap" and run["power_limit_source"] == "log"


def test_without_a_limit_column_the_datasheet_limit_of_the_named_gpu_is_used(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _without_columns(H100_PCIE, tmp_path / "h100.csv", ("power.limit", "enforced.power.limit"))
    assert main(["analyze", str(log), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["power_limited"] and run["power_limit_w"] == 350.0 and run["power_limit_source"] == "datasheet"
    assert "at its 350 W power limit (the datasheet figure for an NVIDIA H100 PCIe)" in run["sentence"]
    # The older H800 bursts log has neither a limit column nor a max clock: the datasheet's 700 W.
    assert main(["analyze", str(BURSTS), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["power_limited"], r["cause"], r["power_limit_w"]) for r in runs] == [(True, "power_cap", 700.0)] * 3


def test_a_flat_power_plateau_while_the_clock_moves_is_held_at_a_limit(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """No limit anywhere (no column, a name no datasheet knows): the shape of the log still says it."""
    log = _without_columns(H100_PCIE, tmp_path / "anon.csv", ("power.limit", "enforced.power.limit", "name"))
    assert main(["analyze", str(log), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["power_limited"] and run["power_cap"] == "plateau" and run["power_limit_w"] is None
    assert "held at a power limit near 348 W (no limit in the log)" in run["sentence"]
    # A steady load that draws what it needs at a fixed clock is no plateau: the A10 never mentions power.
    assert main(["analyze", str(_without_columns(A10_IDLE, tmp_path / "a10.csv", ("power.limit", "name"))),
                 "--json"]) == 0
    (a10,) = json.loads(capsys.readouterr().out)
    assert not a10["power_limited"] and "power" not in a10["sentence"]


# --- bounded memory (issue 22): a 7 ms log made every window a copy of rows x window -------------


def test_the_rolling_median_of_a_fast_log_holds_no_rows_x_window_copy() -> None:
    import tracemalloc

    from advisor.signal_level import rolling_median

    rng = np.random.default_rng(7)
    n, window = 60_000, 715  # 7 ms samples, the verdict's 5 s window: 343 MB as one copy
    values = 1800.0 + rng.normal(0.0, 40.0, n)
    values[20_000:40_000] -= 300.0  # a drop the median must follow
    values[rng.integers(0, n, 500)] = np.nan
    tracemalloc.start()
    try:
        smooth = rolling_median(values, window)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"{peak / 2**20:.0f} MiB"
    half = window // 2
    for i in (0, 100, 19_000, 20_500, 30_000, 39_000, n - 1):
        exact = float(np.nanmedian(values[max(0, i - half):i + half + 1]))
        assert abs(smooth[i] - exact) < 12.0, (i, smooth[i], exact)


def test_a_stress_run_at_its_limit_without_reason_bits_names_the_cap() -> None:
    """The stress verdict too: 45 s of GEMM at 345-349 of 350 W, throughput steady, no reason bits in the trace."""
    from advisor.verdict import RunTrace, judge

    rng = np.random.default_rng(3)
    n = 45
    trace = RunTrace(time_s=np.arange(n, dtype=np.float64), throughput=390.0 + rng.normal(0.0, 2.0, n),
                     unit="TFLOP/s", sm_clock_mhz=825.0 + rng.normal(0.0, 30.0, n),
                     power_w=347.0 + rng.uniform(-2.0, 2.0, n), utilization_gpu_pct=np.full(n, 100.0),
                     sm_clock_max_mhz=1755.0, power_limit_w=350.0)
    verdict = judge(trace, min_load_s=30.0)
    assert verdict.status == "passed" and verdict.power_limited and verdict.cause == "power_cap"
    assert verdict.sentence.startswith(f"Held its speed at its 350 W power limit {AT_THE_LIMIT}; the clock at 47 % "
                                       "of the GPU's reported max (1,755 MHz) is what that limit buys; sustained "
                                       "throughput")
    # Far from the limit, nothing is said of it.
    light = judge(RunTrace(**{**trace.__dict__, "power_w": np.full(n, 200.0)}), min_load_s=30.0)
    assert not light.power_limited and "power" not in light.sentence
