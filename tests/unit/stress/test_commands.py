"""`rigscope stress` and `rigscope analyze` end to end: exit codes, JSON, history and comparison."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from advisor.log_verdict import verdicts_for_log
from desktop.cli import main
from desktop.history.store import HistoryStore
from desktop.sessions.stress_device import resolve_device
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list


def test_sim_stress_prints_json_saves_the_run_and_compares_the_next(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "history.sqlite"
    code = main(["stress", "--device", "sim", "--minutes", "0.03", "--json", "--db", str(db)])
    report = json.loads(capsys.readouterr().out)
    # 1.8 s of load is too short to judge: said so, with its own exit code (7, inconclusive).
    assert code == report["exit_code"] == 7
    assert report["verdict"]["status"] == "too_short" and "too short" in report["verdict"]["sentence"]
    assert report["device"] == "sim" and report["status"] == "completed"
    assert report["verdict"]["unit"] == "TFLOP/s" and report["verdict"]["sustained"] > 0
    with HistoryStore.open(db, readonly=True) as store:
        runs = store.stress_runs(gpu_uuid=report["gpu"]["uuid"], workload="gemm")
        assert [r.run_id for r in runs] == [report["run_id"]]
        time_s, columns = store.stress_points(report["run_id"])
        assert time_s.size >= 2 and columns["throughput"].size == time_s.size
        assert "temperature_c" in columns
    main(["stress", "--device", "sim", "--minutes", "0.03", "--db", str(db)])
    text = capsys.readouterr().out
    assert "baseline" not in text  # a run too short to judge is no one's baseline
    assert "Saved as run" in text


def test_usage_mistakes_exit_2_with_a_message(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = str(tmp_path / "h.sqlite")
    assert main(["stress", "--device", "tpu", "--db", db]) == 2
    assert "unknown device" in capsys.readouterr().err
    assert main(["stress", "--device", "sim", "--minutes", "-1", "--db", db]) == 2
    assert main(["stress", "--device", "sim", "--workload", "train", "--db", db]) == 2
    assert main(["stress", "--device", "cpu", "--dtype", "tf32", "--db", db]) == 2
    capsys.readouterr()
    assert main(["stress", "--device", "sim", "--minutes", "1441", "--db", db]) == 2
    assert "beyond a day" in capsys.readouterr().err
    assert main(["stress", "--device", "sim", "--guard-c", "20", "--db", db]) == 2
    assert "below room temperature" in capsys.readouterr().err
    for endless in ("inf", "nan"):  # issue 34 item 7: "inf" read as below room temperature
        assert main(["stress", "--device", "sim", "--guard-c", endless, "--db", db]) == 2
        assert f"--guard-c {endless}: a temperature must be a finite number of °C" in capsys.readouterr().err
    assert main(["stress", "--device", "sim", "--guard-c", "nan", "--db", db]) == 2


def test_default_device_without_nvidia_is_the_simulator_said_out_loud() -> None:
    resolved = resolve_device(None)
    device, note = resolved.name, resolved.note
    # This machine has no NVIDIA driver; on one with a GPU the default is cuda:0 and no note.
    if device == "sim":
        assert note is not None and "simulated GPU" in note
    else:
        assert device == "cuda:0" and note is None


def test_log_verdict_skips_idle_minutes_and_finds_thermal_throttling() -> None:
    manual = ManualLoad()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), manual, seed=2)
    backend.model.advance(0.0)
    idle = backend.model.trace(0, 0.0, 300.0)
    manual.set(0, 1.0)
    busy = backend.model.trace(0, 300.0, 900.0)
    time_s = np.concatenate([idle.time_s, busy.time_s])
    columns = {k: np.concatenate([idle.columns[k], busy.columns[k]]) for k in busy.columns}
    (run,) = verdicts_for_log(time_s, columns)
    assert run.start_s >= 300.0
    verdict = run.verdict
    assert verdict.basis == "clock" and verdict.throttled and verdict.cause_family == "thermal"


def _nvsmi_log(path: Path) -> float:
    """An `nvidia-smi --query-gpu=... --format=csv -l 1` log of the simulated laptop: 2 idle minutes, then 8 loaded."""
    manual = ManualLoad()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), manual, seed=4)
    start = 1_793_620_800.0
    backend.model.advance(start)
    idle = backend.model.trace(0, start, start + 120.0)
    manual.set(0, 1.0)
    busy = backend.model.trace(0, start + 120.0, start + 600.0)
    lines = ["timestamp, index, name, utilization.gpu [%], temperature.gpu, power.draw [W], clocks.sm [MHz], "
             "clocks.max.sm [MHz], power.limit [W], clocks_event_reasons.active"]
    for trace in (idle, busy):
        c = trace.columns
        for i, t in enumerate(trace.time_s):
            stamp = datetime.fromtimestamp(t, tz=UTC).strftime("%Y/%m/%d %H:%M:%S.000")
            lines.append(f"{stamp}, 0, NVIDIA GeForce RTX 4090 Laptop GPU, {c['utilization_gpu_pct'][i]:.0f} %, "
                         f"{c['temperature_c'][i]:.0f}, {c['power_w'][i]:.2f} W, {c['sm_clock_mhz'][i]:.0f} MHz, "
                         f"2040 MHz, 150.00 W, 0x{int(c['clock_event_reasons'][i]):016X}")
    path.write_text("\n".join(lines) + "\n")
    thermal = np.flatnonzero(busy.columns["clock_event_reasons"].astype(np.int64) & 0x60)
    return float(busy.time_s[thermal[0]] - busy.time_s[0])  # the true onset, from the load's start


def test_analyze_an_nvidia_smi_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "nvsmi.csv"
    true_onset_s = _nvsmi_log(log)
    assert main(["analyze", str(log)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("GPU 0 NVIDIA GeForce RTX 4090 Laptop GPU: Throttled after")
    assert "SW thermal slowdown" in out
    assert main(["analyze", str(log), "--json"]) == 1
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["basis"] == "clock" and verdict["cause_family"] == "thermal"
    assert verdict["onset_s"] is not None and abs(verdict["onset_s"] - true_onset_s) <= 10.0
    assert main(["analyze", str(tmp_path / "missing.csv")]) == 2


def test_analyze_a_stored_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.stress.run_model import SimClock
    from desktop.telemetry.sampler import Sampler

    clock = SimClock(time_s=1_793_620_800.0)
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=6)
    sampler = Sampler(backend, clock=clock.now, monotonic=clock.now)
    assert backend.manual is not None
    backend.manual.set(0, 1.0, 8000.0)
    snapshots = []
    for _ in range(600):
        snapshots.append(sampler.tick())
        clock.time_s += 1.0
    db = tmp_path / "history.sqlite"
    with HistoryStore.open(db) as store:
        store.write_snapshots(snapshots)
    start = datetime.fromtimestamp(1_793_620_800.0, tz=UTC).isoformat()
    end = datetime.fromtimestamp(1_793_620_800.0 + 600, tz=UTC).isoformat()
    assert main(["analyze", "--db", str(db), "--from", start, "--to", end, "--json"]) == 1
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["gpu"].startswith("GPU 0") and verdict["cause_family"] == "thermal"
    assert main(["analyze", "--db", str(tmp_path / "none.sqlite")]) == 2
