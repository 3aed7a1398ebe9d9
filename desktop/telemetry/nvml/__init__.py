"""Real NVIDIA GPUs through NVML: ``NvmlBackend`` over the one pynvml gateway (``gateway.py``).

Inside: ``gateway`` (the only importer of pynvml: session, calls, error sorting), ``outcomes`` (what a
call can come to: MISSING, NO_SAMPLES, NvmlLost, and the return codes that decide it), ``call_memory``
(what each GPU's calls have taught: unsupported keys, failures resting), ``values``
(field ids and decoding), ``device`` (one GPU's record), ``reading`` (the per-tick reading),
``info`` (static facts), ``processes``, ``proc_util`` (per-process utilization) and ``mig`` (read
when asked), ``sleep`` (runtime PM)
and ``backend`` (the GpuBackend that ties them together).
"""

from desktop.telemetry.nvml.backend import DEFAULT_SLOW_PERIOD_S, NvmlBackend
from desktop.telemetry.nvml.call_memory import FAILED_RETRY_S

__all__ = ["DEFAULT_SLOW_PERIOD_S", "FAILED_RETRY_S", "NvmlBackend"]
