"""Per-process GPU utilization (SM, memory, encoder, decoder %) from the driver's sample buffer.

One call per GPU at each process poll: ``nvmlDeviceGetProcessesUtilizationInfo`` (R550+, a v1
struct with a version field) where the driver has it, else ``nvmlDeviceGetProcessUtilization``.
Both return the driver's samples newer than ``lastSeenTimeStamp`` (CPU time, µs), one entry per
process *with non-zero utilization* in a driver sample period. So:

- the timestamp passed is the newest sample seen at the previous poll (0 at the first: the whole
  buffer, a few seconds), so each poll covers the time since the last one;
- several samples of one pid in an answer: the latest is kept (what nvidia-smi pmon and nvitop
  show); a mean over the answer would overstate, since the periods a process sat idle are left out;
- NOT_FOUND ("no sample newer than that") and a pid missing from an answer both mean the process
  ran nothing in the window: 0 %, a reading, not a guess. This assumes polls further apart than
  the driver's sample period (1/6 s to 1 s; utilization is asked every 10 s, see ``processes``);
- NotSupported (Kepler, Windows WDDM/WSL, a MIG parent): remembered per device, every process n/a
  (None), never 0. A transient failure leaves this poll's values n/a.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from desktop.telemetry.nvml.device import NvmlDevice
from desktop.telemetry.nvml.gateway import MISSING, NO_SAMPLES, NvmlGateway
from desktop.telemetry.nvml.values import as_int

#: (call key, pynvml function), newest first; both take (handle, lastSeenTimeStamp µs).
UTILIZATION_CALLS: Final = (
    ("proc_util_info", "nvmlDeviceGetProcessesUtilizationInfo"),
    ("proc_util", "nvmlDeviceGetProcessUtilization"),
)


@dataclass(frozen=True, slots=True)
class ProcessUtilization:
    """One process's utilization over the last poll window, in %; None: the driver gave no usable value."""

    sm_pct: float | None
    mem_pct: float | None
    enc_pct: float | None
    dec_pct: float | None


#: A process the driver did not list in a supported answer: idle in the window.
IDLE: Final = ProcessUtilization(0.0, 0.0, 0.0, 0.0)


def _pct(value: Any) -> float | None:
    number = as_int(value)
    # A per-process share above 100 % is garbage (an unset 0xFFFFFFFF), never a reading.
    return float(number) if number is not None and 0 <= number <= 100 else None


def latest_per_pid(samples: Iterable[Any]) -> tuple[dict[int, ProcessUtilization], int]:
    """The latest sample of each pid, and the newest timestamp seen (µs; 0 when none)."""
    newest: dict[int, tuple[int, ProcessUtilization]] = {}
    seen_us = 0
    for sample in samples:
        pid, stamp = as_int(getattr(sample, "pid", None)), as_int(getattr(sample, "timeStamp", None))
        if pid is None or stamp is None:
            continue
        seen_us = max(seen_us, stamp)
        kept = newest.get(pid)
        if kept is None or stamp >= kept[0]:
            newest[pid] = (stamp, ProcessUtilization(
                _pct(getattr(sample, "smUtil", None)), _pct(getattr(sample, "memUtil", None)),
                _pct(getattr(sample, "encUtil", None)), _pct(getattr(sample, "decUtil", None))))
    return {pid: util for pid, (_, util) in newest.items()}, seen_us


def read_process_utilization(gateway: NvmlGateway, dev: NvmlDevice) -> dict[int, ProcessUtilization] | None:
    """The utilization of the processes that ran on ``dev`` since the last poll; None: n/a for every process.

    A pid absent from the result ran nothing in the window (``IDLE``). Raises ``NvmlLost`` with the GPU.
    """
    for key, func in UTILIZATION_CALLS:
        answer = gateway.sampled_call(dev.calls, key, func, dev.handle, dev.util_seen_us)
        if answer is MISSING:
            if dev.calls.is_unsupported(key) or dev.calls.failure(key) is not None:
                continue  # this driver or GPU lacks the call (or it keeps failing): the older one may answer
            return None  # a transient or unknown failure: n/a for this poll only
        if answer is NO_SAMPLES:
            return {}
        found, seen_us = latest_per_pid(answer)
        dev.util_seen_us = max(dev.util_seen_us, seen_us)
        return found
    return None
