"""Per-process GPU utilization (SM, memory, encoder, decoder %) from the driver's sample buffer.

One call per GPU at each process poll: ``nvmlDeviceGetProcessesUtilizationInfo`` (R550+, a v1
struct with a version field) where the driver has it, else ``nvmlDeviceGetProcessUtilization``.
Both return the driver's samples newer than ``lastSeenTimeStamp`` (CPU time, µs), one entry per
process *with non-zero utilization* in a driver sample period. So:

- the timestamp passed is the newest sample seen at the previous poll (0 at the first: the whole
  buffer, a few seconds), so each poll covers the time since the last one;
- a process's utilization is the mean over the window's driver sample periods, not its newest
  sample (what nvidia-smi pmon and nvitop show, which made a process busy 1 s of a 10 s window read
  100 % for all 10): the sum of its samples over the number of periods in the window. The window
  runs from the previous poll's end to the GPU's newest field-values timestamp (the same CPU µs
  clock), the period is the smallest gap between the driver's sample stamps seen (1 s until one is
  seen: NVML samples every 1/6 s to 1 s), and the periods are never fewer than the answer's stamps;
- NOT_FOUND ("no sample newer than that") and a pid missing from an answer both mean the process
  ran nothing in the window: 0 %, a reading, not a guess. This assumes polls further apart than
  the driver's sample period (utilization is asked every 10 s, see ``processes``);
- NotSupported (Kepler, Windows WDDM/WSL, a MIG parent): remembered per device, every process n/a
  (None), never 0. A transient failure leaves this poll's values n/a.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from desktop.telemetry.nvml.device import NvmlDevice
from desktop.telemetry.nvml.gateway import NvmlGateway
from desktop.telemetry.nvml.outcomes import MISSING, NO_SAMPLES
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


#: The sample period assumed until the driver's stamps show one (NVML: every 1/6 s to 1 s).
DEFAULT_PERIOD_US: Final = 1_000_000


def _mean(values: list[float | None], periods: int) -> float | None:
    known = [v for v in values if v is not None]
    return min(100.0, sum(known) / periods) if known else None


def average_per_pid(samples: Iterable[Any], *, window_start_us: int | None, window_end_us: int | None,
                    period_us: int | None) -> tuple[dict[int, ProcessUtilization], int, int | None]:
    """Each pid's mean utilization over the window's sample periods; the newest stamp; the period seen.

    ``window_start_us`` None: the window starts one period before the oldest sample (the first poll
    gets the whole buffer); ``window_end_us`` None: it ends at the newest sample.
    """
    rows: dict[int, list[ProcessUtilization]] = {}
    stamps: set[int] = set()
    for sample in samples:
        pid, stamp = as_int(getattr(sample, "pid", None)), as_int(getattr(sample, "timeStamp", None))
        if pid is None or stamp is None:
            continue
        stamps.add(stamp)
        rows.setdefault(pid, []).append(ProcessUtilization(
            _pct(getattr(sample, "smUtil", None)), _pct(getattr(sample, "memUtil", None)),
            _pct(getattr(sample, "encUtil", None)), _pct(getattr(sample, "decUtil", None))))
    if not stamps:
        return {}, 0, period_us
    ordered = sorted(stamps)
    gaps = [b - a for a, b in itertools.pairwise(ordered) if b > a]
    seen_period = min([*gaps, *([period_us] if period_us else [])], default=None)
    period = seen_period or DEFAULT_PERIOD_US
    start = window_start_us if window_start_us else ordered[0] - period
    end = max(window_end_us or 0, ordered[-1])
    periods = max(len(stamps), round((end - start) / period), 1)
    out = {pid: ProcessUtilization(_mean([u.sm_pct for u in us], periods), _mean([u.mem_pct for u in us], periods),
                                   _mean([u.enc_pct for u in us], periods), _mean([u.dec_pct for u in us], periods))
           for pid, us in rows.items()}
    return out, ordered[-1], seen_period


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
            dev.util_window_end_us = max(dev.last_field_stamp_us, dev.util_window_end_us)
            return {}
        found, seen_us, period = average_per_pid(
            answer, window_start_us=dev.util_window_end_us or None, window_end_us=dev.last_field_stamp_us or None,
            period_us=dev.util_period_us)
        dev.util_seen_us = max(dev.util_seen_us, seen_us)
        dev.util_period_us = period
        dev.util_window_end_us = max(dev.last_field_stamp_us, seen_us)
        return found
    return None
