"""Making a StressRunner for each run over a backend of its own (the window's and the stress session's runners).

The runner itself (desktop.stress.runner) takes a sampler; here each run gets its own backend and
sampler, and a GPU picked by its NVML index is known by its UUID and bus id before the run starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from desktop.stress.run_model import Clock, RealClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.backend import GpuBackend
from desktop.telemetry.sampler import Sampler


def runner_factory(open_backend: Callable[[], GpuBackend], *, guard_offset_c: float | None = None,
                   guard_absolute_c: float | None = None,
                   clock: Clock | None = None) -> Callable[[StressConfig], StressRunner]:
    """What the GUI passes to its Stress page: each run gets its own backend and sampler.

    The config is the stress session's, settings included; ``guard_offset_c``/``guard_absolute_c``
    (None: the config's own) override its guard, for tests that drive a runner without a session.

    Its own backend, not the app's: a run closes it when it ends (its NVML session), and its
    throttle counters and process polls are its own. On the simulated GPU, ``open_backend``
    gives another reader of the window's machine (``SimulatedBackend.view``), not a second
    machine: the run's load is the one the Dashboard shows.
    """

    def make(config: StressConfig) -> StressRunner:
        if guard_offset_c is not None:
            config = replace(config, guard_offset_c=guard_offset_c)
        if guard_absolute_c is not None:
            config = replace(config, guard_absolute_c=guard_absolute_c)
        if config.device == "cpu":
            return StressRunner(config, None, clock=clock)
        backend = open_backend()
        target = config.target
        if target.kind == "cuda" and target.uuid is None:
            # The GPU picked by its NVML index: known by its UUID and bus id from here on (the runner then refuses
            # a child that CUDA_VISIBLE_DEVICES puts on another GPU, as `stress --gpu N` does).
            info = next((i for i in backend.devices() if i.index == target.nvml_index), None)
            if info is not None:
                config = replace(config, target=target.known_as(info))
        # The run owns this backend: it closes it (its NVML session) when it ends, however it ends.
        return StressRunner(config, Sampler(backend, clock=(clock or RealClock()).now), clock=clock,
                            owns_sampler=True)

    return make
