"""Where a stress test runs and what runs it: the session's device (one ``GpuTarget``, made once) and its runners.

``resolve_device`` turns the request's device and GPU (``--gpu N``, ``--simulate``, ``--device``, the Stress
page's picker) into one ``GpuTarget`` (desktop/stress/devices.py); ``own_runner`` builds the command line's
runner on a backend of its own (``simulated_gpus`` for ``--simulate=PROFILES``), ``window_runners`` the window's
over the backend it shows, with ``device_for`` that backend. desktop/sessions/stress.py is the session that uses
them.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable

from advisor.wording import count_text
from desktop.errors import UserError
from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import Clock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.stress.runner_factory import runner_factory
from desktop.telemetry.backend import GpuBackend
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import SharedLoads, SimulatedBackend, parse_profile_list

_CUDA = re.compile(r"^cuda(:\d+)?$")

RunnerFactory = Callable[[StressConfig], StressRunner]


def resolve_device(requested: str | None, gpu_index: int | None = None) -> GpuTarget:
    """The device for ``requested``, made once: cuda:N (NVML GPU N, ``gpu_index`` when given) when an NVIDIA GPU
    answers, else the simulated GPU, said out loud. A GPU picked by index on the default device is checked against
    NVML's list and known by its UUID and bus id from then on."""
    if requested:
        if requested not in ("cpu", "sim") and not _CUDA.match(requested):
            raise UserError(f"unknown device {requested!r}: use cuda:0, cpu or sim (or --gpu N, --simulate)")
        if requested.startswith("cuda"):
            return GpuTarget.cuda(gpu_index if gpu_index is not None else int(requested.partition(":")[2] or 0))
        return GpuTarget(requested, gpu_index or 0)
    backend = open_gpu_backend()
    try:
        simulated = backend.source.simulated
        reason = backend.source.fallback_reason
        gpus = list(backend.devices()) if not simulated else []
    finally:
        backend.close()
    index = gpu_index or 0
    if simulated:
        return GpuTarget("sim", index,
                         note=(f"no NVIDIA GPU here ({reason}); running on the simulated GPU — "
                               "use --device cpu for a real CPU run"))
    if gpu_index is None:  # no GPU picked: cuda:0 as CUDA numbers it (CUDA_VISIBLE_DEVICES may pick it for us)
        return GpuTarget.cuda(0)
    info = next((g for g in gpus if g.index == index), None)
    if info is None:
        raise UserError(f"there is no GPU {index}: NVML sees {count_text(len(gpus), 'GPU')}"
                        + (f" (0 to {len(gpus) - 1})" if gpus else ""))
    # Picked by NVML index (--gpu N): known by its UUID from here on, so the runner refuses a child on another GPU.
    return GpuTarget.cuda(index).known_as(info)


def device_for(backend: GpuBackend) -> str:
    """The device a stress test on ``backend``'s GPUs runs on: ``sim`` on the simulated GPU, else ``cuda`` (the
    session resolves ``cuda:N`` from the GPU picked)."""
    return "sim" if backend.source.simulated else "cuda"


def window_runners(backend: GpuBackend, clock: Clock | None = None) -> RunnerFactory:
    """The runners of the window's stress tests, over the backend it shows: on the simulated GPU each run reads the
    window's own machine (``SimulatedBackend.view``: its load shows on the Dashboard), on NVML each opens a backend
    of its own (the run closes it, its NVML session with it). ``clock``: an accelerated one in tests."""
    open_backend = backend.view if isinstance(backend, SimulatedBackend) else open_gpu_backend
    return runner_factory(open_backend, clock=clock)


def needs_torch(device: str) -> bool:
    """Whether a test on ``device`` runs a PyTorch workload child (every device but the simulated GPU)."""
    return device != "sim"


def _need_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise UserError("PyTorch is not installed: `pip install rigscope[stress]`, or use --simulate")


def simulated_gpus(profiles: str | None, gpu_index: int = 0) -> SimulatedBackend:
    """A simulated machine of ``profiles`` (None: the default laptop) with the GPU ``gpu_index`` in it (UserError
    naming the choices when a profile is unknown or the index is not there)."""
    try:
        backend = SimulatedBackend(parse_profile_list(profiles), shared=SharedLoads())
    except ValueError as exc:
        raise UserError(str(exc)) from None
    count = len(backend.devices())
    if not 0 <= gpu_index < count:
        backend.close()
        raise UserError(f"there is no GPU {gpu_index}: the simulated machine has {count_text(count, 'GPU')}")
    return backend


def own_runner(config: StressConfig, profiles: str | None = None) -> StressRunner:
    """A runner on a backend of its own (the command line's): a new simulated GPU (of ``profiles``), or NVML for
    CUDA.

    The runner owns the sampler: it closes it (and the backend's NVML session) however the run ends."""
    sampler: Sampler | None = None
    if config.device == "sim":
        sampler = Sampler(simulated_gpus(profiles, config.gpu_index))
    elif config.device.startswith("cuda"):
        _need_torch()
        backend = open_gpu_backend()
        if backend.source.simulated:
            backend.close()
            raise UserError(f"no NVIDIA GPU answers here ({backend.source.fallback_reason}); "
                            "try --device cpu or --simulate")
        # Which NVML GPU cuda:N is (and whether CUDA has an N) only the workload child can say:
        # the runner maps it from the child's first record, and refuses when it cannot.
        sampler = Sampler(backend)
    else:
        _need_torch()
    return StressRunner(config, sampler, owns_sampler=True)
