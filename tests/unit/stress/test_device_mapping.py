"""cuda:N is watched on the NVML GPU it really is: matched by UUID or PCI address, refused when it cannot be."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from desktop.errors import UserError
from desktop.sessions.gpu_locks import DeviceLock
from desktop.stress.devices import (
    CudaIdentity,
    DeviceMappingError,
    GpuTarget,
    bus_key,
    map_cuda_device,
    nvml_uuid,
    pci_bus_id,
)
from desktop.stress.run_model import StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.model import GpuInfo
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
from tests.unit.stress.test_workloads_cpu import _gone

ROOT = Path(__file__).resolve().parents[3]

# Two GPUs as NVML numbers them (by bus): an RTX 3090 on bus 0x01 and an RTX 4090 on bus 0x41.
NVML_GPUS = [
    GpuInfo(index=0, uuid="GPU-0c1f3f6e-8a4b-4b8e-9c5d-1e2f3a4b5c6d", name="NVIDIA GeForce RTX 3090",
            pci_bus_id="00000000:01:00.0"),
    GpuInfo(index=1, uuid="GPU-7d9e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", name="NVIDIA GeForce RTX 4090",
            pci_bus_id="00000000:41:00.0"),
]


def test_uuid_and_bus_id_spellings() -> None:
    assert nvml_uuid("7D9E2A1B-3C4D-4E5F-8A9B-0C1D2E3F4A5B") == "GPU-7d9e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
    assert nvml_uuid("GPU-7d9e2a1b-3c4d") == "GPU-7d9e2a1b-3c4d"
    assert nvml_uuid("MIG-11112222-3333") == "MIG-11112222-3333"
    assert nvml_uuid("") is None and nvml_uuid(None) is None
    assert pci_bus_id(0, 0x41, 0) == "00000000:41:00.0"
    assert bus_key("00000000:41:00.0") == bus_key("0000:41:00.0") == bus_key("41:00.0") == (0, 0x41, 0)
    assert bus_key("garbage") is None and bus_key(None) is None


def test_cuda_0_is_the_fastest_gpu_which_nvml_numbers_1() -> None:
    # CUDA's default order is fastest first: cuda:0 is the RTX 4090, NVML's GPU 1.
    identity = CudaIdentity(index=0, count=2, uuid="GPU-7d9e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
                            pci_bus_id="00000000:41:00.0")
    assert map_cuda_device(identity, NVML_GPUS).index == 1


def test_cuda_visible_devices_1_makes_cuda_0_nvml_gpu_1_by_bus_when_the_uuid_is_unknown() -> None:
    identity = CudaIdentity(index=0, count=1, uuid=None, pci_bus_id="0000:41:00.0", visible_devices="1")
    assert map_cuda_device(identity, NVML_GPUS).index == 1
    # A MIG instance's UUID is not its GPU's: the bus address still finds the GPU.
    mig = CudaIdentity(index=0, count=1, uuid="MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                       pci_bus_id="00000000:01:00.0")
    assert map_cuda_device(mig, NVML_GPUS).index == 0


def test_an_index_beyond_cudas_count_is_refused_with_cudas_count() -> None:
    # Two GPUs to NVML, but CUDA_VISIBLE_DEVICES=1 leaves CUDA one: cuda:1 does not exist.
    identity = CudaIdentity(index=1, count=1, visible_devices="1")
    with pytest.raises(DeviceMappingError, match=r"no cuda:1: CUDA sees 1 GPU \(cuda:0 only, "
                                                 r"CUDA_VISIBLE_DEVICES='1'\)"):
        map_cuda_device(identity, NVML_GPUS)
    with pytest.raises(DeviceMappingError, match="CUDA sees no GPU"):
        map_cuda_device(CudaIdentity(index=0, count=0), NVML_GPUS)


def test_no_matching_gpu_is_refused_rather_than_guessed() -> None:
    stranger = CudaIdentity(index=0, count=2, uuid="GPU-99999999-0000-0000-0000-000000000000",
                            pci_bus_id="00000000:81:00.0", name="NVIDIA H100")
    with pytest.raises(DeviceMappingError, match=r"cannot tell which GPU cuda:0 is \(NVIDIA H100.*wrong GPU"):
        map_cuda_device(stranger, NVML_GPUS)
    # Nothing to match on with two GPUs: refused; with one GPU each side it can only be that one.
    with pytest.raises(DeviceMappingError):
        map_cuda_device(CudaIdentity(index=0, count=2), NVML_GPUS)
    assert map_cuda_device(CudaIdentity(index=0, count=1), NVML_GPUS[:1]).index == 0
    assert DeviceMappingError("x").exit_code == 2


needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")


@needs_torch
def test_the_child_reports_its_device_as_nvml_spells_it() -> None:
    # No GPU here: torch.cuda answers for a fake one, with CUDA_VISIBLE_DEVICES=1 as a user sets it.
    script = textwrap.dedent("""
        import json, torch, types
        from desktop.stress import workloads
        props = types.SimpleNamespace(uuid="7D9E2A1B-3C4D-4E5F-8A9B-0C1D2E3F4A5B", pci_domain_id=0,
                                      pci_bus_id=0x41, pci_device_id=0, name="NVIDIA GeForce RTX 4090")
        torch.cuda.device_count = lambda: 1
        torch.cuda.get_device_properties = lambda index: props
        print(json.dumps([workloads.cuda_identity(torch.device("cuda:0")).as_record(),
                          workloads.cuda_identity(torch.device("cuda:1")).as_record()]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"}, check=False)
    assert done.returncode == 0, done.stderr
    first, beyond = json.loads(done.stdout.strip().splitlines()[-1])
    assert first == {"type": "device", "index": 0, "count": 1, "uuid": "GPU-7d9e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
                     "pci_bus_id": "00000000:41:00.0", "name": "NVIDIA GeForce RTX 4090", "visible_devices": "1"}
    assert map_cuda_device(CudaIdentity.from_record(first), NVML_GPUS).index == 1
    assert beyond["count"] == 1 and beyond["uuid"] is None  # cuda:1 is not asked about: it does not exist


# --- the runner, with a stand-in child that speaks the workload protocol -----------------

FAKE_CHILD = """
import json, sys, time
def emit(record):
    sys.stdout.write(json.dumps(record) + "\\n"); sys.stdout.flush()
device = json.loads(sys.argv[1])
emit({"type": "device", **device})
if device["index"] >= device["count"]:
    emit({"type": "error", "message": "no such device"}); sys.exit(2)
emit({"type": "start", "unit": "TFLOP/s", "dtype": "bf16"})
started = time.monotonic()
while time.monotonic() - started < float(sys.argv[2]):
    time.sleep(0.05)
    emit({"type": "progress", "t": time.monotonic() - started, "throughput": 100.0, "errors": 0, "checks": 1})
emit({"type": "done", "errors": 0, "checks": 1})
"""


class FakeCudaRunner(StressRunner):
    """The runner on "cuda:0" with a child that reports ``device`` as its identity (no torch, no GPU)."""

    def __init__(self, device: dict[str, Any], seconds: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.device_record, self.seconds = device, seconds

    def child_command(self) -> list[str]:
        return [sys.executable, "-c", FAKE_CHILD, json.dumps(self.device_record), str(self.seconds)]


class ClosingBackend(SimulatedBackend):
    closed = 0

    def close(self) -> None:
        ClosingBackend.closed += 1


def two_gpus() -> tuple[ClosingBackend, list[GpuInfo]]:
    # Simulated GPU 0 (a laptop part) idles; GPU 1 (the desktop RTX 4090) carries the load.
    backend = ClosingBackend(parse_profile_list("rtx4090-laptop,rtx4090"), ManualLoad(), seed=1)
    assert backend.manual is not None
    backend.manual.set(1, 1.0, 20000.0)
    return backend, backend.devices()


def test_the_runner_watches_guards_and_stores_the_gpu_the_child_runs_on() -> None:
    backend, gpus = two_gpus()
    started: list[tuple[GpuInfo | None, float | None]] = []
    # CUDA_VISIBLE_DEVICES=1: the child's cuda:0 is NVML GPU 1, by its UUID.
    runner = FakeCudaRunner({"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 1.0,
                            config=StressConfig(target=GpuTarget.cuda(0), duration_s=1.0, interval_s=0.05),
                            sampler=Sampler(backend), on_start=lambda info, guard: started.append((info, guard)),
                            owns_sampler=True)
    result = runner.run()
    assert result.status == "completed", result.message
    assert result.gpu is not None and result.gpu.uuid == gpus[1].uuid
    assert result.config.gpu_index == 1 and result.extra["nvml_index"] == 1
    # The finished config's target is the GPU watched (its UUID and bus id), on the CUDA device the child ran on.
    assert result.config.target == GpuTarget.cuda(1, 0).known_as(gpus[1]) and result.config.device == "cuda:0"
    # The guard is GPU 1's (the RTX 4090: shutdown 91 - 5 = 86 °C), not GPU 0's (the laptop: 90 °C).
    assert started == [(gpus[1], runner.guard_c)]
    assert runner.guard_c == 86.0
    # The samples are GPU 1's: loaded (the idle GPU 0 draws a few watts).
    power = result.columns["power_w"]
    assert np.isfinite(power).any() and np.nanmax(power) > 100.0
    assert ClosingBackend.closed >= 1  # the run closed its backend


@pytest.mark.parametrize("device", [
    {"index": 1, "count": 1, "visible_devices": "1"},  # beyond CUDA's count
    {"index": 0, "count": 1, "uuid": "GPU-99999999-0000-0000-0000-000000000000", "pci_bus_id": "0000:81:00.0"},
])
def test_the_runner_refuses_when_the_mapping_cannot_be_made(device: dict[str, Any]) -> None:
    backend, _gpus = two_gpus()
    closed_before = ClosingBackend.closed
    runner = FakeCudaRunner(device, 30.0,
                            config=StressConfig(target=GpuTarget.cuda(0), duration_s=30.0, interval_s=0.05),
                            sampler=Sampler(backend), owns_sampler=True)
    begun = time.monotonic()
    with pytest.raises(DeviceMappingError):
        runner.run()
    assert time.monotonic() - begun < 10.0
    assert runner.child_pid is not None and _gone(runner.child_pid)
    assert ClosingBackend.closed == closed_before + 1


def test_the_runner_refuses_a_guard_at_the_mapped_gpus_shutdown() -> None:
    backend, gpus = two_gpus()
    shutdown_c = gpus[1].temp_shutdown_c
    assert shutdown_c is not None and shutdown_c != gpus[0].temp_shutdown_c
    runner = FakeCudaRunner({"index": 0, "count": 2, "pci_bus_id": gpus[1].pci_bus_id}, 30.0,
                            config=StressConfig(target=GpuTarget.cuda(0), duration_s=30.0, interval_s=0.05,
                                                guard_c=shutdown_c),
                            sampler=Sampler(backend))
    with pytest.raises(UserError, match=f"{shutdown_c:g} °C"):
        runner.run()
    assert runner.child_pid is not None and _gone(runner.child_pid)


class RealLooking(ClosingBackend):
    """Two simulated GPUs that say they are NVML, for the CLI's `cuda` path."""

    def __init__(self) -> None:
        super().__init__(parse_profile_list("rtx4090-laptop,rtx4090"), ManualLoad(), seed=2)

    @property
    def source(self) -> Any:
        from desktop.telemetry.model import SourceInfo

        return SourceInfo(kind="nvml", detail="NVML (stand-in)")


def _fake_child(monkeypatch: pytest.MonkeyPatch, device: dict[str, Any], seconds: float) -> None:
    from desktop.sessions import stress_device as commands

    monkeypatch.setattr(commands, "open_gpu_backend", RealLooking)
    monkeypatch.setattr(StressRunner, "child_command",
                        lambda self: [sys.executable, "-c", FAKE_CHILD, json.dumps(device), str(seconds)])


def test_cli_stores_the_run_under_the_gpu_cuda_runs_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.cli import main
    from desktop.history.store import HistoryStore

    gpus = RealLooking().devices()
    _fake_child(monkeypatch, {"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 1.2)
    db = tmp_path / "h.sqlite"
    main(["stress", "--device", "cuda:0", "--minutes", "0.02", "--json", "--db", str(db)])
    report = json.loads(capsys.readouterr().out)
    assert report["gpu"]["uuid"] == gpus[1].uuid and report["gpu"]["nvml_index"] == 1
    with HistoryStore.open(db, readonly=True) as store:
        assert [r.gpu_uuid for r in store.stress_runs()] == [gpus[1].uuid]


def test_cli_gpu_n_tests_that_nvml_gpu_or_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35 item 3: `stress --gpu N` picks NVML GPU N (as `run --gpu N` does) once, by its UUID: the run on it is
    stored under it; a child that CUDA_VISIBLE_DEVICES puts on another GPU is refused; a GPU not there is one line."""
    from desktop.cli import main
    from desktop.history.store import HistoryStore

    gpus = RealLooking().devices()
    db = tmp_path / "h.sqlite"
    _fake_child(monkeypatch, {"index": 1, "count": 2, "uuid": gpus[1].uuid}, 1.2)
    assert main(["stress", "--gpu", "1", "--minutes", "0.02", "--json", "--db", str(db)]) in (0, 7)
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "cuda:1" and report["gpu"]["uuid"] == gpus[1].uuid
    with HistoryStore.open(db, readonly=True) as store:
        assert [r.gpu_uuid for r in store.stress_runs()] == [gpus[1].uuid]
    _fake_child(monkeypatch, {"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 30.0)
    assert main(["stress", "--gpu", "0", "--minutes", "0.5", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "not GPU 0 (cuda:0) that was picked" in err and "Traceback" not in err
    assert main(["stress", "--gpu", "5", "--minutes", "0.5", "--db", str(db)]) == 2
    assert "there is no GPU 5: NVML sees 2 GPUs (0 to 1)" in capsys.readouterr().err


def test_cli_cuda_index_beyond_cudas_count_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.cli import main

    # Two GPUs to NVML, one to CUDA (CUDA_VISIBLE_DEVICES=1): --device cuda:1 does not exist.
    _fake_child(monkeypatch, {"index": 1, "count": 1, "visible_devices": "1"}, 30.0)
    code = main(["stress", "--device", "cuda:1", "--minutes", "0.5", "--db", str(tmp_path / "h.sqlite")])
    err = capsys.readouterr().err
    assert code == 2
    assert "there is no cuda:1: CUDA sees 1 GPU (cuda:0 only" in err and "Traceback" not in err
    assert not (tmp_path / "h.sqlite").exists()




def test_the_runner_refuses_a_gpu_another_run_holds_and_ends_its_child() -> None:
    from desktop.sessions.gpu_locks import DeviceBusy, gpu_lock

    backend, gpus = two_gpus()
    held = gpu_lock(gpus[1].uuid, gpus[1].name)
    held.acquire()  # another shell's `rigscope stress --device cuda:1` on the same RTX 4090
    try:
        runner = FakeCudaRunner({"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 30.0,
                                config=StressConfig(target=GpuTarget.cuda(0), duration_s=30.0, interval_s=0.05),
                                sampler=Sampler(backend), owns_sampler=True)
        claimed: list[DeviceLock] = []

        def claim(info: GpuInfo) -> None:
            lock = gpu_lock(info.uuid, info.name)
            lock.acquire()
            claimed.append(lock)

        runner.claim = claim
        with pytest.raises(DeviceBusy, match="NVIDIA GeForce RTX 4090"):
            runner.run()
        assert claimed == [] and runner.child_pid is not None and _gone(runner.child_pid)
    finally:
        held.release()


def test_cli_two_shells_whose_cuda_n_is_one_gpu_are_told_apart(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.cli import main
    from desktop.sessions.gpu_locks import gpu_lock

    gpus = RealLooking().devices()
    # This shell: CUDA_VISIBLE_DEVICES=1, so its cuda:0 is the RTX 4090 that another shell loads as cuda:1
    # (whose device lock, "cuda:1", is another file: only the GPU's own lock tells them apart).
    _fake_child(monkeypatch, {"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 30.0)
    other = gpu_lock(gpus[1].uuid, gpus[1].name)
    other.acquire()
    try:
        code = main(["stress", "--device", "cuda:0", "--minutes", "0.5", "--db", str(tmp_path / "h.sqlite")])
    finally:
        other.release()
    err = capsys.readouterr().err
    assert code == 2, err
    assert "already running on NVIDIA GeForce RTX 4090" in err and "Traceback" not in err
    # Once the other run is over, the same command runs.
    _fake_child(monkeypatch, {"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 1.2)
    assert main(["stress", "--device", "cuda:0", "--minutes", "0.02", "--db", str(tmp_path / "h.sqlite")]) in (0, 7)


def test_a_child_that_lands_on_another_gpu_than_the_one_picked_is_refused() -> None:
    """Issue 35 item 3: the GPU picked (``--gpu 0``: its UUID read from NVML once, in the session's ``GpuTarget``)
    travels down to the runner; CUDA_VISIBLE_DEVICES=1 makes the child's cuda:0 NVML GPU 1, which was not picked:
    refused before any load, instead of testing (and storing) another GPU than the user asked for."""
    backend, gpus = two_gpus()
    picked = GpuTarget.cuda(0).known_as(gpus[0])
    runner = FakeCudaRunner({"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 5.0,
                            config=StressConfig(duration_s=5.0, interval_s=0.05, target=picked),
                            sampler=Sampler(backend), owns_sampler=True)
    with pytest.raises(DeviceMappingError, match=r"is NVML GPU 1 .* not GPU 0 \(cuda:0\) that was picked"):
        runner.run()
    # The same child on the GPU picked runs.
    same = FakeCudaRunner({"index": 0, "count": 1, "uuid": gpus[0].uuid}, 0.3,
                          config=StressConfig(duration_s=0.3, interval_s=0.05, target=picked),
                          sampler=Sampler(two_gpus()[0]), owns_sampler=True)
    assert same.run().gpu == gpus[0]
