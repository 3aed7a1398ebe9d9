"""The NVML ids, codes and C structs the stand-ins answer with, held here rather than read from ``pynvml``.

A driver answers by the numbers in its own ``nvml.h``, whatever binding the application was built
with; the stand-ins (fake_pynvml.py, nvml_driver*.py, personalities*.py) take them from this table, so
the NVML tests run over any binding the project declares (``nvidia-ml-py>=12.535``: 12.535 lacks the
``NVML_FI_DEV_CLOCKS_EVENT_REASON_*`` and ``NVML_FI_DEV_PCIE_COUNT_*`` names, the 24-byte
``c_nvmlProcessInfo_v3_t`` and ``c_nvmlProcessUtilizationInfo_v1_t``). Values are the NVIDIA
headers' (CUDA 13.1 ``nvml.h``, as nvidia-ml-py 13.615.71's ``pynvml.py`` spells them); the ids that
moved between driver branches are in personalities_counters.py. Only the error classes and
``_PrintableStructure`` still come from the installed binding: the application's ``except`` clauses
and ``nvmlStructToFriendlyObject`` are the binding's.
"""

from __future__ import annotations

import ctypes
from typing import ClassVar, Final

import pynvml as _nv

# nvmlReturn_t
NVML_SUCCESS: Final = 0
NVML_ERROR_UNINITIALIZED: Final = 1
NVML_ERROR_INVALID_ARGUMENT: Final = 2
NVML_ERROR_NOT_SUPPORTED: Final = 3
NVML_ERROR_NO_PERMISSION: Final = 4
NVML_ERROR_NOT_FOUND: Final = 6
NVML_ERROR_INSUFFICIENT_SIZE: Final = 7
NVML_ERROR_FUNCTION_NOT_FOUND: Final = 13
NVML_ERROR_GPU_IS_LOST: Final = 15
NVML_ERROR_ARGUMENT_VERSION_MISMATCH: Final = 25
NVML_ERROR_UNKNOWN: Final = 999

# Field ids (nvmlFieldValue_t.fieldId)
NVML_FI_DEV_PERF_POLICY_POWER: Final = 74
NVML_FI_DEV_PERF_POLICY_THERMAL: Final = 75
NVML_FI_DEV_MEMORY_TEMP: Final = 82
NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: Final = 83
NVML_FI_DEV_POWER_AVERAGE: Final = 185
NVML_FI_DEV_POWER_INSTANT: Final = 186
NVML_FI_DEV_POWER_CURRENT_LIMIT: Final = 190
NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT: Final = 193
NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT: Final = 194
NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT: Final = 195
NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT: Final = 196
NVML_FI_DEV_PCIE_COUNT_TX_BYTES: Final = 197
NVML_FI_DEV_PCIE_COUNT_RX_BYTES: Final = 198
NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP: Final = NVML_FI_DEV_PERF_POLICY_POWER
# R580.82 and later (13.580.82+); R575 and R580.65 answer these three at 251-253.
NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN: Final = 269
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN: Final = 270
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN: Final = 271

# nvmlValueType_t
NVML_VALUE_TYPE_UNSIGNED_INT: Final = 1
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: Final = 3
NVML_VALUE_TYPE_SIGNED_INT: Final = 5

# Sensors, thresholds, clocks, PCIe counters, compute mode, architectures
NVML_TEMPERATURE_GPU: Final = 0
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: Final = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: Final = 1
NVML_TEMPERATURE_THRESHOLD_MEM_MAX: Final = 2
NVML_TEMPERATURE_THRESHOLD_GPU_MAX: Final = 3
NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR: Final = 5
NVML_CLOCK_GRAPHICS: Final = 0
NVML_CLOCK_SM: Final = 1
NVML_CLOCK_MEM: Final = 2
NVML_CLOCK_VIDEO: Final = 3
NVML_CLOCK_ID_CURRENT: Final = 0
NVML_CLOCK_ID_CUSTOMER_BOOST_MAX: Final = 3
NVML_PCIE_UTIL_TX_BYTES: Final = 0
NVML_PCIE_UTIL_RX_BYTES: Final = 1
NVML_COMPUTEMODE_DEFAULT: Final = 0
NVML_DEVICE_ARCH_KEPLER: Final = 2
NVML_DEVICE_ARCH_PASCAL: Final = 4
NVML_DEVICE_ARCH_VOLTA: Final = 5
NVML_DEVICE_ARCH_ADA: Final = 8
NVML_DEVICE_ARCH_HOPPER: Final = 9
NVML_DEVICE_ARCH_UNKNOWN: Final = 0xFFFFFFFF

# Clock-event reason bits (nvmlClocksEventReason*)
nvmlClocksEventReasonSwPowerCap: Final = 0x4
nvmlClocksEventReasonSwThermalSlowdown: Final = 0x20
nvmlClocksEventReasonHwThermalSlowdown: Final = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown: Final = 0x80

# GPM (nvmlGpmMetricId_t; the struct versions)
NVML_GPM_METRIC_GRAPHICS_UTIL: Final = 1
NVML_GPM_METRIC_SM_UTIL: Final = 2
NVML_GPM_METRIC_SM_OCCUPANCY: Final = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL: Final = 5
NVML_GPM_METRIC_DRAM_BW_UTIL: Final = 10
#: The largest metrics[] array a header declares (98 in R535's, 477 in CUDA 13.1's): the bound on numMetrics.
NVML_GPM_METRIC_MAX: Final = 477
NVML_GPM_METRICS_GET_VERSION: Final = 1
NVML_GPM_SUPPORT_VERSION: Final = 1

NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE: Final = 32
NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE: Final = 16


class _Struct(_nv._PrintableStructure):
    """A header struct that the binding's ``nvmlStructToFriendlyObject`` and printing accept."""


class c_nvmlValue_t(ctypes.Union):
    _fields_: ClassVar = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong),
                          ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong), ("siVal", ctypes.c_int),
                          ("usVal", ctypes.c_ushort)]


class c_nvmlFieldValue_t(_Struct):
    _fields_: ClassVar = [("fieldId", ctypes.c_uint32), ("scopeId", ctypes.c_uint32), ("timestamp", ctypes.c_int64),
                          ("latencyUsec", ctypes.c_int64), ("valueType", ctypes.c_uint), ("nvmlReturn", ctypes.c_uint),
                          ("value", c_nvmlValue_t)]


class nvmlPciInfo_t(_Struct):
    _fields_: ClassVar = [("busIdLegacy", ctypes.c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE),
                          ("domain", ctypes.c_uint), ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                          ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                          ("busId", ctypes.c_char * NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE)]


class c_nvmlMemory_t(_Struct):
    _fields_: ClassVar = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class c_nvmlMemory_v2_t(_Struct):
    _fields_: ClassVar = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                          ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class c_nvmlUtilization_t(_Struct):
    _fields_: ClassVar = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class c_nvmlProcessInfo_v2_t(_Struct):
    _fields_: ClassVar = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                          ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


c_nvmlProcessInfo_v3_t = c_nvmlProcessInfo_v2_t


class c_nvmlProcessUtilizationSample_t(_Struct):
    _fields_: ClassVar = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                          ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class c_nvmlProcessUtilizationInfo_v1_t(_Struct):
    _fields_: ClassVar = [("timeStamp", ctypes.c_ulonglong), ("pid", ctypes.c_uint), ("smUtil", ctypes.c_uint),
                          ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint),
                          ("jpgUtil", ctypes.c_uint), ("ofaUtil", ctypes.c_uint)]


class c_nvmlGpmSupport_t(_Struct):
    _fields_: ClassVar = [("version", ctypes.c_uint), ("isSupportedDevice", ctypes.c_uint)]


#: Every id, code and struct above by name: what the fake binding (fake_pynvml.py) exports over pynvml's own.
BINDING_NAMES: Final[dict[str, object]] = {
    name: value for name, value in dict(globals()).items()
    if name.startswith(("NVML_", "nvml", "c_nvml")) and not name.startswith("__")
}
