"""Measured SM, tensor, DRAM and graphics-engine activity from NVML's GPU performance monitoring (GPM: Hopper,
Blackwell).

GPM metrics are rates between two samples the caller takes: ``nvmlGpmSampleGet`` fills a sample
buffer (allocated once with ``nvmlGpmSampleAlloc``), ``nvmlGpmMetricsGet`` computes the metrics
over the previous and the newest one. So per GPU:

- ``nvmlGpmQueryDeviceSupport`` once, when the GPU is opened; a GPU that says no (every GeForce
  before Blackwell, Ampere and older) or lacks the call is never asked again: 0 calls per tick;
- two sample buffers per supported GPU, used in turn (the newest reading becomes the previous
  one), freed when the GPU is lost, the backend re-initialises or closes;
- per tick two calls: one sample, one metrics computation over the last two samples. The first
  sample after opening has nothing to compare with (it is taken by the priming read at open);
- under MIG the parent's GPM is per GPU instance (``nvmlGpmMigSampleGet``): not asked, the
  estimate serves.

Which metric is "activity": ``NVML_GPM_METRIC_SM_UTIL``, the share of SMs that were busy, what
DCGM calls SM_ACTIVE (``DCGM_FI_PROF_SM_ACTIVE``), not ``SM_OCCUPANCY`` (resident warps against
the theoretical maximum, DCGM's SM_OCCUPANCY), which a well-tuned GEMM keeps far below 100 %. A
memory-bound kernel that fills every SM reads high SM activity: DRAM bandwidth tells those apart.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Final

from desktop.telemetry.model import GpmActivity
from desktop.telemetry.nvml.device import GpmSamples, NvmlDevice
from desktop.telemetry.nvml.gateway import NvmlGateway
from desktop.telemetry.nvml.outcomes import MISSING

log = logging.getLogger(__name__)

#: (GpmActivity field, pynvml constant, its value in nvml.h).
METRICS: Final = (
    ("sm_active_pct", "NVML_GPM_METRIC_SM_UTIL", 2),
    ("tensor_active_pct", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5),
    ("dram_active_pct", "NVML_GPM_METRIC_DRAM_BW_UTIL", 10),
    ("graphics_active_pct", "NVML_GPM_METRIC_GRAPHICS_UTIL", 1),
)
#: Call keys in the device's ``CallMemory``.
SUPPORT_KEY: Final = "gpm_support"
ALLOC_KEY: Final = "gpm_alloc"
SAMPLE_KEY: Final = "gpm_sample"
METRICS_KEY: Final = "gpm_metrics"


def _supported(answer: Any) -> bool:
    flag = getattr(answer, "isSupportedDevice", None)
    return isinstance(flag, int) and flag != 0


def open_gpm(gateway: NvmlGateway, dev: NvmlDevice) -> None:
    """Ask once whether ``dev`` has GPM; where it has, allocate its two samples and say so in its info.

    Raises ``NvmlLost`` with the GPU.
    """
    if dev.gpm_checked:
        return
    dev.gpm_checked = True
    if dev.info.mig_enabled:
        return  # per GPU instance under MIG: not read here
    answer = gateway.device_call(dev.calls, SUPPORT_KEY, "nvmlGpmQueryDeviceSupport", dev.handle)
    if answer is MISSING or not _supported(answer):
        return
    if gateway.binding_attr("c_nvmlGpmMetricsGet_t") is None:
        log.info("GPU %d has GPM but these NVML bindings cannot ask for its metrics: effective load is estimated",
                 dev.index)
        return
    first = gateway.device_call(dev.calls, ALLOC_KEY, "nvmlGpmSampleAlloc")
    second = gateway.device_call(dev.calls, ALLOC_KEY, "nvmlGpmSampleAlloc") if first is not MISSING else MISSING
    if second is MISSING:
        if first is not MISSING:
            gateway.call("nvmlGpmSampleFree", first)
        return
    dev.gpm = GpmSamples(first, second)
    dev.info = replace(dev.info, gpm_supported=True)


def close_gpm(gateway: NvmlGateway, dev: NvmlDevice) -> None:
    """Free ``dev``'s GPM samples (a lost GPU, a re-init, the backend's close); nothing when it has none."""
    samples, dev.gpm = dev.gpm, None
    if samples is None:
        return
    for sample in (samples.previous, samples.spare):
        gateway.call("nvmlGpmSampleFree", sample)


def _give_up(gateway: NvmlGateway, dev: NvmlDevice, key: str) -> None:
    """GPM stopped answering for good on ``dev``: free its samples, estimate from now on."""
    log.info("GPU %d: GPM (%s) is not available after all; effective load is estimated from power and clock",
             dev.index, key)
    close_gpm(gateway, dev)
    dev.info = replace(dev.info, gpm_supported=False)


def _percent(entry: Any) -> float | None:
    if getattr(entry, "nvmlReturn", 1) != 0:
        return None
    value = getattr(entry, "value", None)
    if not isinstance(value, float) or not 0.0 <= value <= 100.0:
        return None  # NaN, or garbage from an interval the driver could not measure
    return value


def read_gpm(gateway: NvmlGateway, dev: NvmlDevice) -> GpmActivity | None:
    """The activity since the previous GPM sample of ``dev``; None without GPM or before a second sample.

    Raises ``NvmlLost`` with the GPU.
    """
    samples = dev.gpm
    if samples is None:
        return None
    taken = gateway.device_call(dev.calls, SAMPLE_KEY, "nvmlGpmSampleGet", dev.handle, samples.spare)
    if taken is MISSING:
        if dev.calls.is_unsupported(SAMPLE_KEY):
            _give_up(gateway, dev, SAMPLE_KEY)
        return None  # a transient failure: the previous sample stays, the next interval is longer
    newest, previous = samples.spare, samples.previous
    samples.previous, samples.spare = newest, previous
    if not samples.primed:
        samples.primed = True
        return None
    request = gateway.binding_attr("c_nvmlGpmMetricsGet_t")()
    request.version = gateway.const("NVML_GPM_METRICS_GET_VERSION", 1)
    request.numMetrics = len(METRICS)
    request.sample1, request.sample2 = previous, newest
    for slot, (_, name, default) in enumerate(METRICS):
        request.metrics[slot].metricId = gateway.const(name, default)
    answer = gateway.device_call(dev.calls, METRICS_KEY, "nvmlGpmMetricsGet", request)
    if answer is MISSING:
        if dev.calls.is_unsupported(METRICS_KEY):
            _give_up(gateway, dev, METRICS_KEY)
        return None
    values = {field: _percent(answer.metrics[slot]) for slot, (field, _, _) in enumerate(METRICS)}
    return GpmActivity(**values)
