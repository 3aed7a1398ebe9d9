"""`make device-check` (tools/device_check.py): what it records, its schema, its deadline, and exit 2 without a GPU."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tools import device_check
from tools.device_check import Outcome, main, run_command, scrub_sample, slug

NOW = dt.datetime(2026, 5, 4, 12, 0, tzinfo=dt.UTC)

# What `rigscope doctor --json` prints on a machine without the NVIDIA driver (this one).
NO_DRIVER_DOCTOR = {
    "source": {"kind": "simulated", "detail": "simulated GPU (rtx4090-laptop)"},
    "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4090 Laptop GPU (simulated)"}],
    "fallback": {"active": True, "uses": "simulated GPU (rtx4090-laptop)",
                 "reason": "No NVIDIA driver found: the NVML library (libnvidia-ml.so.1 / nvml.dll) could not be "
                           "loaded. Install the NVIDIA driver to read a real GPU."},
}
H200_DOCTOR = {
    "source": {"kind": "nvml", "detail": "NVIDIA driver 570.86.15"},
    "driver_version": "570.86.15",
    "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-1", "metrics": {"fan_pct": False}}],
    "fallback": {"active": False, "uses": None, "reason": None},
}
STRESS_RESULT = {"exit_code": 0, "status": "completed", "verdict": {"status": "passed", "throttled": False}}


class FakeMachine:
    """Answers the script's commands like a GPU machine would, on a clock that each command moves."""

    def __init__(self, *, doctor: dict[str, Any] = H200_DOCTOR, cuda: bool = True,
                 seconds: dict[str, float] | None = None) -> None:
        self.doctor = doctor
        self.cuda = cuda
        self.seconds = {"doctor": 5.0, "sample": 32.0, "python": 10.0, "stress": 60.0, **(seconds or {})}
        self.now_s = 0.0
        self.calls: list[tuple[list[str], float, float]] = []  # (args, timeout given, time left then)
        self.deadline_s = 450.0

    def clock(self) -> float:
        return self.now_s

    def __call__(self, args: Sequence[str], timeout_s: float) -> Outcome:
        args = list(args)
        self.calls.append((args, timeout_s, self.deadline_s - self.now_s))
        took = self.seconds.get(args[0], 1.0)
        self.now_s += took
        if args[0] == "doctor":
            return Outcome(0, json.dumps(self.doctor), "", took)
        if args[0] == "sample":
            count = int(args[args.index("--count") + 1])
            line = {"gpus": [{"index": 0, "temperature_c": 40.0}],
                    "processes": [{"pid": 7, "gpu_index": 0, "name": "python", "user": "alice"}]}
            return Outcome(0, "".join(json.dumps(line) + "\n" for _ in range(count)), "", took)
        if args[0] == "python":
            probe = {"version": "2.13.0" if self.cuda else "2.13.0+cpu", "cuda": "12.8" if self.cuda else None,
                     "cuda_available": self.cuda}
            return Outcome(0, json.dumps(probe) + "\n", "", took)
        if args[0] == "stress":
            return Outcome(0, json.dumps(STRESS_RESULT), "", took)
        if args[0] == "nvidia-smi":
            return Outcome(0, "==============NVSMI LOG==============\n", "", took)
        raise AssertionError(f"unexpected command {args}")


class FakeSampler:
    """A fake backend sampled in the script's own process during each stress run (counts its ticks)."""

    def __init__(self) -> None:
        from desktop.telemetry.sampler import Sampler
        from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

        self.sampler = Sampler(SimulatedBackend(parse_profile_list("h100")), clock=lambda: 1_777_000_000.0)
        self.ticks = 0
        self.closed = False

    def tick(self) -> Any:
        self.ticks += 1
        return self.sampler.tick()

    def close(self) -> None:
        self.closed = True
        self.sampler.close()


def _record(tmp_path: Path, machine: FakeMachine, *extra: str, sampler: FakeSampler | None = None) -> int:
    source = sampler or FakeSampler()
    return main(["--out", str(tmp_path), *extra], runner=machine, monotonic=machine.clock, now=lambda: NOW,
                load_sampler=lambda: source)


def test_without_an_nvidia_gpu_it_exits_2_and_writes_nothing(tmp_path, capsys):
    assert _record(tmp_path, FakeMachine(doctor=NO_DRIVER_DOCTOR)) == 2
    err = capsys.readouterr().err
    assert "no NVIDIA GPU or driver here: No NVIDIA driver found" in err
    assert "Nothing was written" in err
    assert list(tmp_path.iterdir()) == []


def test_a_gpu_machine_gets_every_step_recorded_within_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(device_check.shutil, "which", lambda name: f"/usr/bin/{name}")
    machine = FakeMachine()
    assert _record(tmp_path, machine) == 0
    folder = tmp_path / "nvidia-h200"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["doctor.json", "samples.jsonl", "samples-load.jsonl", "nvidia-smi-q.txt", "run.json", "stress.json"])
    assert len(list(folder.iterdir())) <= device_check.MAX_FILES
    assert all(p.stat().st_size <= device_check.MAX_FILE_BYTES for p in folder.iterdir())
    assert sorted(json.loads((folder / "stress.json").read_text())) == sorted(device_check.WORKLOADS)
    stress = [args for args, _, _ in machine.calls if args[0] == "stress"]
    assert [a[a.index("--workload") + 1] for a in stress] == ["gemm", "bandwidth", "train", "infer"]
    assert all(a[a.index("--device") + 1] == "cuda:0" and "--json" in a and "--db" in a for a in stress)
    sample = next(args for args, _, _ in machine.calls if args[0] == "sample")
    assert sample[sample.index("--count") + 1] == "30" and sample[sample.index("--interval") + 1] == "1.0"
    assert all(timeout <= left for _, timeout, left in machine.calls)  # nothing may outlive the deadline
    run = json.loads((folder / "run.json").read_text())
    assert run["complete"] is True and run["skipped"] == [] and run["simulated"] is False
    assert run["recorded_at"] == "2026-05-04T12:00:00+00:00"
    assert run["torch"]["cuda_available"] is True
    assert machine.now_s <= 450.0 <= 8 * 60 - 15
    lines = [json.loads(t) for t in (folder / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 30 and {p["user"] for line in lines for p in line["processes"]} == {"user"}


def test_the_deadline_skips_a_run_that_would_not_fit_and_says_so(tmp_path, capsys):
    machine = FakeMachine(seconds={"stress": 120.0})  # slow start-ups: 2 min a run
    assert _record(tmp_path, machine) == 1
    run = json.loads((tmp_path / "nvidia-h200" / "run.json").read_text())
    assert [s["name"] for s in run["skipped"]] == ["stress-infer"]
    assert "deadline" in run["skipped"][0]["reason"]
    assert "infer" not in json.loads((tmp_path / "nvidia-h200" / "stress.json").read_text())
    assert run["complete"] is False
    assert "skipped stress-infer" in capsys.readouterr().err


def test_a_cpu_build_of_torch_skips_the_stress_runs_with_the_fix(tmp_path, capsys):
    assert _record(tmp_path, FakeMachine(cuda=False)) == 1
    run = json.loads((tmp_path / "nvidia-h200" / "run.json").read_text())
    assert [s["name"] for s in run["skipped"]] == [f"stress-{w}" for w in device_check.WORKLOADS]
    assert all("CUDA build of PyTorch" in s["reason"] for s in run["skipped"])
    assert (tmp_path / "nvidia-h200" / "doctor.json").is_file()
    assert (tmp_path / "nvidia-h200" / "samples.jsonl").is_file()


def test_a_new_recording_replaces_the_old_files_of_its_gpu(tmp_path):
    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    (folder / "stress-train.json").write_text("{}")  # the schema-1 layout
    (folder / "stress.json").write_text("{}")
    assert _record(tmp_path, FakeMachine(cuda=False)) == 1
    assert not (folder / "stress-train.json").exists() and not (folder / "stress.json").exists()


@pytest.mark.parametrize("argv", [
    ["--simulate"],  # a synthetic recording must not land among the real ones
    ["--simulate", "--out", str(device_check.REAL_FIXTURES)],
    ["--workloads", "gemm,burn"],
    ["--stress-minutes", "0"],
])
def test_bad_options_exit_2(argv, capsys):
    assert main(argv, runner=FakeMachine()) == 2
    assert capsys.readouterr().err.startswith("device-check: ")


def test_names_become_folder_names():
    assert slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert slug("NVIDIA GeForce RTX 4070 Laptop GPU", 2) == "nvidia-geforce-rtx-4070-laptop-gpu-x2"
    assert slug("???") == "gpu"


def test_process_owners_are_blanked_in_samples():
    line = scrub_sample({"processes": [{"pid": 1, "user": "alice"}, {"pid": 2, "user": None}]})
    assert [p["user"] for p in line["processes"]] == ["user", None]


def test_a_command_past_its_time_is_interrupted_and_reported_as_timed_out():
    outcome = run_command([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 1.0)
    assert outcome.timed_out and outcome.exit_code is None
    assert outcome.stdout == "started\n"
    assert outcome.duration_s < 30.0


@pytest.mark.slow
def test_a_synthetic_recording_of_the_simulated_gpu_has_every_file_in_its_schema(tmp_path):
    """The real commands, on the simulated GPU: the files a GPU machine would produce, in the same schema."""
    assert main(["--simulate", "--out", str(tmp_path), "--sample-s", "3", "--stress-minutes", "0.02"]) == 0
    (folder,) = tmp_path.iterdir()
    assert folder.name == "nvidia-geforce-rtx-4090-laptop-gpu-simulated"
    assert sorted(p.name for p in folder.iterdir()) == ["doctor.json", "run.json", "samples-load.jsonl",
                                                        "samples.jsonl", "stress.json"]
    check_recording(folder)
    run = json.loads((folder / "run.json").read_text())
    assert run["simulated"] is True and run["complete"] is True and run["workloads"] == ["gemm"]


def check_recording(folder: Path) -> None:
    """The schema every recording (real or synthetic) follows; the replay test relies on it."""
    doctor = json.loads((folder / "doctor.json").read_text())
    assert doctor["source"]["kind"] in ("nvml", "simulated")
    for gpu in doctor["gpus"]:
        assert {"index", "name", "uuid", "vram_total_mib", "metrics", "state"} <= set(gpu)
        assert all(isinstance(v, bool) for v in gpu["metrics"].values())
    samples = [json.loads(t) for t in (folder / "samples.jsonl").read_text().splitlines()]
    assert samples
    for line in samples:
        assert {"time_s", "source", "gpus", "host", "processes"} <= set(line)
        assert [g["index"] for g in line["gpus"]] == [g["index"] for g in doctor["gpus"]]
    run = json.loads((folder / "run.json").read_text())
    assert run["schema"] == device_check.SCHEMA_VERSION
    assert {"recorded_at", "simulated", "complete", "steps", "skipped", "notes", "deadline_s", "elapsed_s",
            "stress_minutes", "workloads", "torch"} <= set(run)
    assert run["elapsed_s"] <= run["deadline_s"]
    for step in run["steps"]:
        assert {"name", "command", "exit_code", "timed_out", "duration_s", "stderr", "file", "ok"} <= set(step)
    stress = json.loads((folder / "stress.json").read_text()) if (folder / "stress.json").exists() else {}
    load = [json.loads(t) for t in (folder / "samples-load.jsonl").read_text().splitlines()] \
        if (folder / "samples-load.jsonl").exists() else []
    for workload in run["workloads"]:
        if any(s["name"] == f"stress-{workload}" for s in run["skipped"]):
            assert workload not in stress
            assert not [line for line in load if line["phase"] == f"stress-{workload}"]
            continue
        result = stress[workload]
        assert result["workload"] == workload
        assert [line for line in load if line["phase"] == f"stress-{workload}"]
        assert {"exit_code", "status", "verdict", "gpu"} <= set(result)
        assert {"status", "throttled", "sustained_ratio", "sentence"} <= set(result["verdict"])
    assert len(list(folder.iterdir())) <= device_check.MAX_FILES


def test_samples_are_recorded_during_each_stress_workload(tmp_path):
    sampler = FakeSampler()
    assert _record(tmp_path, FakeMachine(), sampler=sampler) == 0
    folder = tmp_path / "nvidia-h200"
    load = [json.loads(t) for t in (folder / "samples-load.jsonl").read_text().splitlines()]
    phases = [line["phase"] for line in load]
    for workload in device_check.WORKLOADS:  # one at its start and one at its end, whatever the speed
        assert phases.count(f"stress-{workload}") >= 2
    assert phases == sorted(phases, key=lambda p: device_check.WORKLOADS.index(p.removeprefix("stress-")))
    assert all(line["gpus"] and "clock_event_reasons" in line["gpus"][0] for line in load)
    run = json.loads((folder / "run.json").read_text())
    assert all(s["load_samples"] >= 2 for s in run["steps"] if s["name"].startswith("stress-"))
    assert sampler.closed and sampler.ticks == len(load)


def test_it_never_creates_a_venv_installs_or_reaches_the_network(tmp_path, monkeypatch):
    import socket
    import subprocess

    def no_network(*args, **kwargs):
        raise AssertionError("the device check reached for the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    started: list[list[str]] = []
    monkeypatch.setattr(subprocess, "Popen", lambda argv, *a, **k: started.append(list(argv)) or no_network())
    machine = FakeMachine()
    assert _record(tmp_path, machine) == 0
    assert started == []  # every command went through the given runner
    for args, _, _ in machine.calls:
        assert not {"pip", "venv", "ensurepip", "install"} & set(args), args
    env = device_check.child_env({"PATH": "/usr/bin"})
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(device_check.REPO_ROOT)
    assert env["PIP_NO_INDEX"] == "1" and "VIRTUAL_ENV" not in env


def test_a_missing_module_is_named_with_the_fix_and_nothing_runs(tmp_path, capsys):
    machine = FakeMachine()
    code = main(["--out", str(tmp_path)], runner=machine, load_sampler=FakeSampler,
                required_modules=("numpy", "no_such_module_xyz"))
    assert code == 2 and machine.calls == []
    err = capsys.readouterr().err
    assert "cannot import no_such_module_xyz" in err and "tools/fetch_wheels.py" in err
    assert list(tmp_path.iterdir()) == []


def test_a_file_over_the_size_limit_keeps_evenly_spaced_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(device_check, "MAX_FILE_BYTES", 6_000)
    machine = FakeMachine()
    assert _record(tmp_path, machine) == 0
    folder = tmp_path / "nvidia-h200"
    assert all(p.stat().st_size <= 6_000 for p in folder.iterdir() if p.suffix == ".jsonl")
    run = json.loads((folder / "run.json").read_text())
    assert any("lines dropped" in note for note in run["notes"])
    lines = [f"{i:03d}\n" for i in range(100)]
    kept, dropped = device_check.fit_lines(lines, 40)
    assert len(kept) == 10 and dropped == 90 and kept[0] == "000\n" and kept[1] == "010\n"
