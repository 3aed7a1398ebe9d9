"""A job on a cloud GPU: what limits it here, and how much of it a faster GPU would speed up (Amdahl).

Pure. A faster GPU speeds up only the part of the job's running time the GPU was the limit:
the busy share (``advisor.busy``'s seconds over the running time) scaled by how hard the GPU
worked while busy (the effective load, where it is known: a memory-bound or starved kernel at
40 % of the GPU's full load does not get 13x faster on a GPU with 13x the TFLOP/s). The rest
(waiting for the data loader, CPU work, a sleep) takes as long there as here:

    cloud time = running time x (gpu_part / speed + (1 - gpu_part))

A job whose GPU part is small says what limits it ("the data loader limits this job: a faster
GPU would not help much"), and every cloud row gives its overall speed-up beside the GPU's.
The guard's pauses are not part of the running time (a data-centre GPU needs no thermal guard).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from advisor.costs import CloudOffer, GpuSpec, find_spec, relative_speed
from advisor.thresholds import Thresholds

#: How many cloud offers the card keeps (the cheapest).
CLOUD_ROWS = 3
#: The shipped ``[advisor]`` thresholds (a caller passes the user's).
DEFAULT_THRESHOLDS = Thresholds()
#: Below this busy share the job "mostly waits": the GPU idles most of its running time.
IDLE_SHARE = 0.3


@dataclass(frozen=True)
class CloudEquivalent:
    """The same job on one cloud offer: its GPUs for ``hours``, priced on demand (and spot when offered)."""

    provider: str
    gpu_model: str
    gpus: int
    #: The cloud GPU's speed against this one (datasheet or measured: ``JobCard.speed_basis``).
    relative_speed: float
    hours: float
    on_demand_usd: float
    spot_usd: float | None
    #: The whole job's speed-up there: only its GPU-bound part runs ``relative_speed`` times faster.
    overall_speed: float | None = None


@dataclass(frozen=True)
class Bound:
    """What limits a job, and the share of its running time a faster GPU would speed up."""

    #: "gpu" | "light" (busy, at a low effective load) | "input" (the GPU waits: data loader, I/O) |
    #: "cpu" (the GPU waits on a saturated CPU) | "idle" (the GPU mostly idle) | None (unknown).
    kind: str | None
    #: The GPU-bound share of the running time (0-1): busy share x effective load.
    gpu_part: float
    #: The sentence the card shows; "" for a GPU-bound job.
    text: str


def job_bound(busy_share: float | None, effective_load_pct: float | None, cpu_pct: float | None,
              thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Bound:
    """What limits the job from its busy share, its mean effective load while busy and the mean CPU meanwhile."""
    if busy_share is None:
        return Bound(None, 1.0, "GPU busy time unknown: the cloud comparison counts the whole run as GPU-bound.")
    busy = min(max(busy_share, 0.0), 1.0)
    load = None if effective_load_pct is None else min(max(effective_load_pct / 100.0, 0.0), 1.0)
    part = busy * (load if load is not None else 1.0)
    shown = f"{busy * 100.0:.0f} %"
    if busy < IDLE_SHARE:
        return Bound("idle", part, f"the GPU was busy only {shown} of the running time: this job mostly waits "
                                   "(CPU work, I/O, sleeps), and a faster GPU would not help much")
    if busy < thresholds.low_utilization_pct / 100.0:
        if cpu_pct is not None and cpu_pct >= thresholds.cpu_saturated_pct:
            return Bound("cpu", part, f"the CPU limits this job: a faster GPU would not help much (CPU "
                                      f"{cpu_pct:.0f} %, the GPU busy {shown} of the running time)")
        return Bound("input", part, "the data loader limits this job: a faster GPU would not help much (the GPU "
                                    f"was busy {shown} of the running time, waiting for input the rest)")
    if load is not None and load * 100.0 <= thresholds.low_effective_load_pct:
        return Bound("light", part, f"the GPU was busy but worked at {load * 100.0:.0f} % of its full load "
                                    "(memory-bound or small kernels): a faster GPU helps far less than its speed")
    return Bound("gpu", part, "")


def cloud_time_s(running_s: float, gpu_part: float, speed: float) -> float:
    """Amdahl: the GPU-bound part runs ``speed`` times faster, the rest as long as here."""
    return running_s * (gpu_part / speed + (1.0 - gpu_part))


def cloud_equivalents(gpu_name: str, gpus: int, running_s: float, *, bound: Bound, peak_vram_mib: float | None,
                      offers: Sequence[CloudOffer], specs: Sequence[GpuSpec], measured_tflops: float | None,
                      rows: int = CLOUD_ROWS) -> tuple[tuple[CloudEquivalent, ...], list[str]]:
    """The cheapest offers (on demand) that hold the job, each with the hours it would take there; and notes."""
    local = find_spec(gpu_name, list(specs))
    if local is None:
        return (), [f"No spec for {gpu_name!r} in gpu_specs.csv: no cloud comparison."]
    need_gb = (peak_vram_mib or 0.0) / 1024.0
    out = []
    for offer in offers:
        spec = find_spec(offer.gpu_model, list(specs))
        if spec is None or offer.vram_gb < need_gb:
            continue
        speed = relative_speed(spec, local, measured_tflops)
        if speed <= 0:
            continue
        seconds = cloud_time_s(running_s, bound.gpu_part, speed)
        overall = running_s / seconds if seconds > 0 else None
        hours = seconds / 3600.0
        spot = gpus * hours * offer.spot_usd_h if offer.spot_usd_h is not None else None
        out.append(CloudEquivalent(provider=offer.provider, gpu_model=offer.gpu_model, gpus=gpus, relative_speed=speed,
                                   hours=hours, on_demand_usd=gpus * hours * offer.on_demand_usd_h, spot_usd=spot,
                                   overall_speed=overall))
    out.sort(key=lambda c: (c.on_demand_usd, c.provider))
    return tuple(out[:rows]), []
