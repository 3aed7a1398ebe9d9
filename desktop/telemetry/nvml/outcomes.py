"""What one NVML call can come to, and the return codes that decide it (no pynvml here).

A call made through the gateway (gateway.py) gives its value, ``MISSING`` (the metric is n/a:
NotSupported & co., a transient or an unknown error), ``NO_SAMPLES`` (a sample-buffer call with
nothing newer than the timestamp passed) or raises ``NvmlLost`` (the GPU itself is gone). The
gateway sorts each error by the code tables here; ``reason_for_init_error`` says in the user's
words why NVML could not start.
"""

from __future__ import annotations

from typing import Final

# NVML return codes by how a caller should treat them (codes, not classes: old bindings lack some).
MISSING_CODES: Final = frozenset({
    2,  # INVALID_ARGUMENT: e.g. a clock or sensor type this GPU does not have
    3,  # NOT_SUPPORTED
    4,  # NO_PERMISSION
    6,  # NOT_FOUND
    8,  # INSUFFICIENT_POWER
    13,  # FUNCTION_NOT_FOUND: the driver predates the call
    14,  # CORRUPTED_INFOROM
    21,  # NO_DATA
    22,  # VGPU_ECC_NOT_SUPPORTED
    24,  # FREQ_NOT_SUPPORTED
    25,  # ARGUMENT_VERSION_MISMATCH
    26,  # DEPRECATED
    30,  # RESET_TYPE_NOT_SUPPORTED
})
TRANSIENT_CODES: Final = frozenset({5, 7, 10, 19, 20, 23, 27, 29})  # busy, timeout, in use, memory, not ready...
#: Codes that cost the whole GPU (LOST until its handle comes back); every other error costs only
#: the metric asked for (UNKNOWN 999, OPERATING_SYSTEM 17, IRQ_ISSUE 11 on a failing sensor).
LOST_CODES: Final = frozenset({
    15,  # GPU_IS_LOST: fell off the bus
    16,  # RESET_REQUIRED: nothing reads until the GPU is reset
    28,  # GPU_NOT_FOUND
    1,  # UNINITIALIZED: the NVML session is gone (renewed by reinit when every GPU is lost)
    9,  # DRIVER_NOT_LOADED
    18,  # LIB_RM_VERSION_MISMATCH: the driver was upgraded underneath
})
FUNCTION_NOT_FOUND: Final = 13


class _Missing:
    """Sentinel: the call gave no value (unsupported, transient or unknown)."""


MISSING: Final = _Missing()


class _NoSamples:
    """Sentinel: a sample-buffer call answered, with nothing newer than the timestamp passed."""


NO_SAMPLES: Final = _NoSamples()
#: What a sample-buffer call (``nvmlDeviceGetProcessUtilization`` & co.) answers when no sample is
#: newer than the timestamp passed: NOT_FOUND (6); SUCCESS (0) where pynvml's wrapper raises on a
#: size query that found nothing to size.
NO_SAMPLE_CODES: Final = frozenset({0, 6})


class NvmlLost(Exception):
    """A fatal per-device NVML error: the device is LOST until its handle is got again."""


def reason_for_init_error(code: int | None, text: str) -> str:
    """Why NVML cannot be used here, in the user's words."""
    if code == 12:
        return ("No NVIDIA driver found: the NVML library (libnvidia-ml.so.1 / nvml.dll) could not be "
                "loaded. Install the NVIDIA driver to read a real GPU.")
    if code == 9:
        return "The NVIDIA driver is installed but not loaded (check `nvidia-smi`; a reboot may help)."
    if code == 4:
        return "No permission to talk to the NVIDIA driver (check access to /dev/nvidia*)."
    if code == 18:
        return ("Driver/library version mismatch: the NVIDIA driver was upgraded but the old kernel module is "
                "still loaded: reboot (or reload the nvidia kernel modules).")
    return f"NVML could not start: {text}"


def error_code(exc: BaseException) -> int | None:
    """The NVML return code an exception carries (``NVMLError.value``), if any."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None
