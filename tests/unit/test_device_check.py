"""`make device-check` (tools/device_check.py): what it records, its schema, its deadline, and exit 2 without a GPU."""

from __future__ import annotations

import datetime as dt
import json
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


def _record(tmp_path: Path, machine: FakeMachine, *extra: str) -> int:
    return main(["--out", str(tmp_path), *extra], runner=machine, monotonic=machine.clock, now=lambda: NOW)


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
        ["doctor.json", "samples.jsonl", "nvidia-smi-q.txt", "run.json",
         "stress-gemm.json", "stress-bandwidth.json", "stress-train.json", "stress-infer.json"])
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
    assert not (tmp_path / "nvidia-h200" / "stress-infer.json").exists()
    assert run["complete"] is False
    assert "skipped stress-infer" in capsys.readouterr().err


def test_a_cpu_build_of_torch_skips_the_stress_runs_with_the_fix(tmp_path, capsys):
    assert _record(tmp_path, FakeMachine(cuda=False)) == 1
    run = json.loads((tmp_path / "nvidia-h200" / "run.json").read_text())
    assert [s["name"] for s in run["skipped"]] == [f"stress-{w}" for w in device_check.WORKLOADS]
    assert all("TORCH_SPEC=torch" in s["reason"] for s in run["skipped"])
    assert (tmp_path / "nvidia-h200" / "doctor.json").is_file()
    assert (tmp_path / "nvidia-h200" / "samples.jsonl").is_file()


def test_a_new_recording_replaces_the_old_files_of_its_gpu(tmp_path):
    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    (folder / "stress-train.json").write_text("{}")
    assert _record(tmp_path, FakeMachine(cuda=False)) == 1
    assert not (folder / "stress-train.json").exists()


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
    assert sorted(p.name for p in folder.iterdir()) == ["doctor.json", "run.json", "samples.jsonl", "stress-gemm.json"]
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
    for workload in run["workloads"]:
        path = folder / f"stress-{workload}.json"
        if any(s["name"] == f"stress-{workload}" for s in run["skipped"]):
            assert not path.exists()
            continue
        result = json.loads(path.read_text())
        assert result["workload"] == workload
        assert {"exit_code", "status", "verdict", "gpu"} <= set(result)
        assert {"status", "throttled", "sustained_ratio", "sentence"} <= set(result["verdict"])
