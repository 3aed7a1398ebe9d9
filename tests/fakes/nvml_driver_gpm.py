"""The GPM (GPU performance monitoring) symbols of the NVML stand-in, in the driver's own layouts (nvml.h).

``nvmlGpmSampleAlloc`` hands out a driver-owned buffer (kept in ``NvmlDriver.gpm_samples`` until
``nvmlGpmSampleFree``: a test sees a leak there), ``nvmlGpmSampleGet`` copies the GPU's active
seconds per metric into it (they grow with the driver's clock at the personality's
``gpm_activity_pct``), ``nvmlGpmMetricsGet`` answers each metric as the active share of the time
between its two samples. A GPU without GPM answers ``isSupportedDevice = 0``; a MIG parent's
``nvmlGpmSampleGet`` answers NotSupported (per GPU instance only; modelled).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

from tests.fakes import nvml_abi as abi
from tests.fakes.nvml_driver import _P, INVALID, NOT_SUPPORTED, OK, _Dev

if TYPE_CHECKING:
    from tests.fakes.nvml_driver import NvmlDriver

_VERSION_MISMATCH = abi.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
#: NVML_GPM_SUPPORT_VERSION and NVML_GPM_METRICS_GET_VERSION in nvml.h: plain 1, not NVML_STRUCT_VERSION.
_SUPPORT_VERSION = 1
_METRICS_GET_VERSION = 1


class _GpmSupport(ctypes.Structure):  # nvmlGpmSupport_t
    _fields_ = [("version", ctypes.c_uint), ("isSupportedDevice", ctypes.c_uint)]


class _MetricInfo(ctypes.Structure):
    _fields_ = [("shortName", ctypes.c_char_p), ("longName", ctypes.c_char_p), ("unit", ctypes.c_char_p)]


class _GpmMetric(ctypes.Structure):  # nvmlGpmMetric_t
    _fields_ = [("metricId", ctypes.c_uint), ("nvmlReturn", ctypes.c_int), ("value", ctypes.c_double),
                ("metricInfo", _MetricInfo)]


class _GpmMetricsGetHead(ctypes.Structure):  # nvmlGpmMetricsGet_t up to its metrics[NVML_GPM_METRIC_MAX]
    _fields_ = [("version", ctypes.c_uint), ("numMetrics", ctypes.c_uint), ("sample1", ctypes.c_void_p),
                ("sample2", ctypes.c_void_p)]


#: Where metrics[0] starts: after the head, at the metric's own alignment (its double).
_METRICS_OFFSET = -(-ctypes.sizeof(_GpmMetricsGetHead) // ctypes.alignment(_GpmMetric)) * ctypes.alignment(_GpmMetric)


def gpm_symbols(d: NvmlDriver) -> dict[str, tuple[tuple[Any, ...], Any, Any]]:
    """{C symbol: (argtypes, thunk, restype)} for the GPM calls."""

    def support(dev: _Dev, ptr: int | None) -> int:
        if not ptr:
            return INVALID
        out = _GpmSupport.from_address(ptr)
        if out.version != _SUPPORT_VERSION:
            return _VERSION_MISMATCH
        out.isSupportedDevice = int(dev.spec.gpm and dev.mig is None)
        return OK

    def alloc(out: int | None) -> int:
        if not out:
            return INVALID
        buffer = ctypes.create_string_buffer(64)  # opaque to the caller
        address = ctypes.addressof(buffer)
        d.gpm_buffers[address], d.gpm_samples[address] = buffer, None
        ctypes.c_void_p.from_address(out).value = address
        return OK

    def free(sample: int | None) -> int:
        if not sample or sample not in d.gpm_samples:
            return INVALID  # freed twice, or never allocated
        del d.gpm_samples[sample], d.gpm_buffers[sample]
        return OK

    def sample_get(dev: _Dev, sample: int | None) -> int:
        if not sample or sample not in d.gpm_samples:
            return INVALID
        if not dev.spec.gpm or dev.mig is not None or (dev.spec.mig_mode or (0,))[0] == 1:
            return NOT_SUPPORTED
        d.gpm_samples[sample] = (dev.gpu, d.now_us, dict(d.gpm_active_s.get(dev.gpu, {})))
        return OK

    def metrics_get(ptr: int | None) -> int:
        if not ptr:
            return INVALID
        head = _GpmMetricsGetHead.from_address(ptr)
        if head.version != _METRICS_GET_VERSION:
            return _VERSION_MISMATCH
        first, second = d.gpm_samples.get(head.sample1 or 0), d.gpm_samples.get(head.sample2 or 0)
        if first is None or second is None or first[0] != second[0] or second[1] <= first[1]:
            return INVALID
        if not 0 < head.numMetrics <= abi.NVML_GPM_METRIC_MAX:
            return INVALID
        elapsed_s = (second[1] - first[1]) / 1e6
        spec = d.personality.gpus[second[0]]
        for entry in (_GpmMetric * head.numMetrics).from_address(ptr + _METRICS_OFFSET):
            if entry.metricId not in spec.gpm_activity_pct:
                entry.nvmlReturn = NOT_SUPPORTED
                continue
            active_s = second[2].get(entry.metricId, 0.0) - first[2].get(entry.metricId, 0.0)
            entry.value, entry.nvmlReturn = 100.0 * active_s / elapsed_s, OK
        return OK

    return {
        "nvmlGpmQueryDeviceSupport": d._device("nvmlGpmQueryDeviceSupport", support, _P),
        "nvmlGpmSampleAlloc": d._system("nvmlGpmSampleAlloc", alloc, _P),
        "nvmlGpmSampleFree": d._system("nvmlGpmSampleFree", free, _P),
        "nvmlGpmSampleGet": d._device("nvmlGpmSampleGet", sample_get, _P),
        "nvmlGpmMetricsGet": d._system("nvmlGpmMetricsGet", metrics_get, _P),
    }
