"""Issue 35 item 3: a stress config names its GPU once, as its ``GpuTarget``; ``device`` and ``gpu_index`` are views.

The config once carried the device string, the NVML index and the target side by side, free to disagree (a config
for cuda:1 watching NVML GPU 0 by a stale index). Now the target is the only carrier: these pin the views for each
kind of device, that a config has no field left to carry another device in, and that a session over a runner
keeps the runner's target whole (its UUID and bus id too, not a "cuda:N" re-parsed into a bare target).
"""

from __future__ import annotations

import dataclasses

import pytest

from desktop.sessions.stress import StressSession
from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.model import GpuInfo


@pytest.mark.parametrize(("target", "device", "gpu_index"), [
    (GpuTarget("sim"), "sim", 0),
    (GpuTarget("sim", 1), "sim", 1),  # `--simulate=laptop,desktop --gpu 1`
    (GpuTarget("cpu"), "cpu", 0),
    (GpuTarget.cuda(1), "cuda:1", 1),  # PCI bus order: CUDA's number is NVML's
    (GpuTarget.cuda(2, 0), "cuda:0", 2),  # CUDA_VISIBLE_DEVICES=2: the child's cuda:0 is NVML GPU 2
])
def test_the_device_and_the_gpu_index_are_read_from_the_target(target: GpuTarget, device: str,
                                                                gpu_index: int) -> None:
    config = StressConfig(target=target, duration_s=60.0)
    assert (config.device, config.gpu_index) == (device, gpu_index)
    assert config.device == target.name and config.gpu_index == target.nvml_index


def test_a_config_made_without_a_target_is_the_simulated_gpu_0() -> None:
    config = StressConfig()
    assert config.target == GpuTarget("sim") and (config.device, config.gpu_index) == ("sim", 0)
    assert StressConfig().target is not None


def test_a_config_has_nowhere_to_carry_a_device_other_than_its_target() -> None:
    assert {f.name for f in dataclasses.fields(StressConfig)} & {"device", "gpu_index"} == set()
    config = StressConfig(target=GpuTarget.cuda(2, 0))
    with pytest.raises(TypeError):
        StressConfig(device="cuda:1", target=GpuTarget("cpu"))  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        StressConfig(gpu_index=3)  # type: ignore[call-arg]
    with pytest.raises((TypeError, ValueError)):
        dataclasses.replace(config, gpu_index=0)  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        config.device = "sim"  # type: ignore[misc]
    # Another GPU is another target: both views follow it.
    moved = dataclasses.replace(config, target=dataclasses.replace(config.target, nvml_index=1))
    assert (moved.device, moved.gpu_index) == ("cuda:0", 1)


def test_a_session_over_a_runner_keeps_the_runners_target_whole() -> None:
    """The window's and the tests' ``StressSession.for_runner``: its device is the config's target itself (the
    GPU lock and the stored run name the same GPU), UUID and bus id included."""
    info = GpuInfo(index=2, uuid="GPU-2b2b2b2b-0000-0000-0000-000000000002", name="NVIDIA GeForce RTX 4090",
                   pci_bus_id="00000000:81:00.0")
    target = GpuTarget.cuda(2, 0).known_as(info)
    runner = StressRunner(StressConfig(target=target, duration_s=30.0))
    session = StressSession.for_runner(runner, lock_simulated=False)
    assert session.device == target
    assert session.config.target == target and session.config.device == "cuda:0"
