"""A canned fleet for the Fleet page's screenshot: two Rigscope machines and one DCGM-only server.

Built from Prometheus-shaped answers through the reader's own grouping (``build_fleet``), so the
picture shows what the page shows for a real server: ``ws-anna`` (an RTX 4090 Laptop, its recorder
running), ``ws-lab`` (two H100s, one held back by its power cap now) and ``dgx-01`` (two A100s
scraped from plain dcgm-exporter: fewer fields, said so). ``demo_history`` gives ws-lab's last hour.
"""

from __future__ import annotations

import math

from desktop.fleet.advice import FleetAdvice, GpuUse, fleet_advice
from desktop.fleet.client import Sample
from desktop.fleet.history import MachineHistory, step_for
from desktop.fleet.model import Fleet
from desktop.fleet.reader import build_fleet

SERVER = "http://prometheus.lab:9090"
HOT_C = 85.0

#: host, source, [(index, uuid, model, util %, vram used/free MiB, temp °C, power W, limit W, SM MHz, max MHz,
#: active throttle reasons)]
_MACHINES: tuple[tuple[str, str, list[tuple[int, str, str, float, float, float, float, float, float | None, float,
                                               float | None, tuple[str, ...]]]], ...] = (
    ("ws-anna", "rigscope", [(0, "GPU-7d1c", "NVIDIA GeForce RTX 4090 Laptop GPU", 97.0, 14100.0, 2276.0, 79.0, 148.0,
                              150.0, 2040.0, 2655.0, ())]),
    ("ws-lab", "rigscope", [(0, "GPU-3a90", "NVIDIA H100 80GB HBM3", 100.0, 71200.0, 10359.0, 71.0, 698.0, 700.0,
                             1590.0, 1980.0, ("sw_power_cap",)),
                            (1, "GPU-3a91", "NVIDIA H100 80GB HBM3", 8.0, 1100.0, 80459.0, 38.0, 92.0, 700.0, 345.0,
                             1980.0, ())]),
    ("dgx-01", "dcgm", [(0, "GPU-b210", "NVIDIA A100-SXM4-80GB", 64.0, 40200.0, 40800.0, 58.0, 281.0, None, 1410.0,
                         None, ()),
                        (1, "GPU-b211", "NVIDIA A100-SXM4-80GB", 0.0, 0.0, 81000.0, 31.0, 61.0, None, 210.0, None,
                         ())]),
)


def demo_fleet(now_s: float) -> Fleet:
    answers: dict[str, list[Sample]] = {}

    def add(key: str, labels: dict[str, str], value: float | None) -> None:
        if value is not None:
            answers.setdefault(key, []).append(Sample(labels, value, now_s))

    for host, source, gpus in _MACHINES:
        if source == "rigscope":
            add("info", {"Hostname": host, "version": "0.1.0", "source": "nvml"}, 1.0)
            add("recorder_up", {"Hostname": host}, 1.0)
            add("recorder_last_write_s", {"Hostname": host}, now_s - 2.0)
        for index, uuid, model, util, used, free, temp, power, limit, sm, sm_max, reasons in gpus:
            labels = {"Hostname": host, "gpu": str(index), "UUID": uuid, "modelName": model}
            for key, value in (("utilization_pct", util), ("vram_used_mib", used), ("vram_free_mib", free),
                               ("temperature_c", temp), ("power_w", power), ("sm_clock_mhz", sm),
                               ("last_seen_s", now_s - 3.0)):
                add(key, labels, value)
            if source == "rigscope":
                add("power_limit_w", labels, limit)
                add("sm_clock_max_mhz", labels, sm_max)
                add("vram_total_mib", labels, used + free)
                add("slowdown_temperature_c", labels, 87.0)
                add("clock_event_active", labels, 0.0)
                for reason in reasons:
                    add("clock_event_active", {**labels, "reason": reason}, 1.0)
                stress = {"Hostname": host, "UUID": uuid, "modelName": model, "workload": "gemm"}
                add("stress_throttled", stress, 1.0 if reasons else 0.0)
                add("stress_ended_s", stress, now_s - 86400.0)
    return build_fleet(answers, hot_c=HOT_C, server=SERVER, queried_at_s=now_s, requests=18)


def demo_history(now_s: float, window_s: float = 3600.0) -> MachineHistory:
    """ws-lab's last hour: GPU 0 training at its power cap (capped for stretches), GPU 1 mostly idle."""
    step = step_for(window_s)
    times = [now_s - window_s + step * i for i in range(int(window_s / step) + 1)]
    out = MachineHistory("ws-lab", window_s, now_s - window_s, now_s, step, requests=6)
    for uuid, busy in (("GPU-3a90", 1.0), ("GPU-3a91", 0.08)):
        wave = [0.5 + 0.5 * math.sin(t / 300.0) for t in times]
        out.series[uuid] = {
            "util": [(t, 100.0 * busy * (0.9 + 0.1 * w)) for t, w in zip(times, wave, strict=True)],
            "vram": [(t, 71200.0 * busy + 1100.0) for t in times],
            "temp": [(t, 36.0 + 35.0 * busy * (0.9 + 0.1 * w)) for t, w in zip(times, wave, strict=True)],
            "power": [(t, 90.0 + 608.0 * busy * (0.95 + 0.05 * w)) for t, w in zip(times, wave, strict=True)],
            "clock": [(t, 345.0 + 1350.0 * busy - 120.0 * busy * w) for t, w in zip(times, wave, strict=True)],
        }
        out.lanes[uuid] = {"sw_power_cap": [(t, busy * max(0.0, 2 * w - 1.0)) for t, w in
                                            zip(times, wave, strict=True)]}
    return out


def demo_advice() -> FleetAdvice:
    """A week of the canned fleet: ws-lab's GPU 0 at its power cap a fifth of its busy time, dgx-01 mostly idle."""
    from desktop.advice import cost_inputs_from, load_cloud_offers, load_gpu_specs
    from desktop.config import Settings

    h = 3600.0
    uses = [GpuUse("ws-anna", "GPU-7d1c", "NVIDIA GeForce RTX 4090 Laptop GPU", 61 * h, 168 * h, 6.5, index="0"),
            GpuUse("ws-lab", "GPU-3a90", "NVIDIA H100 80GB HBM3", 122 * h, 168 * h, 78.0,
                   {"sw_power_cap": 26 * h}, index="0"),
            GpuUse("ws-lab", "GPU-3a91", "NVIDIA H100 80GB HBM3", 71 * h, 168 * h, 40.0, index="1"),
            GpuUse("dgx-01", "GPU-b210", "NVIDIA A100-SXM4-80GB", 21 * h, 168 * h, 14.0, index="0"),
            GpuUse("dgx-01", "GPU-b211", "NVIDIA A100-SXM4-80GB", 0.0, 168 * h, 10.0, index="1")]
    vram = {"NVIDIA GeForce RTX 4090 Laptop GPU": 16376.0, "NVIDIA H100 80GB HBM3": 81559.0,
            "NVIDIA A100-SXM4-80GB": 81000.0}
    return fleet_advice(uses, offers=load_cloud_offers(), specs=load_gpu_specs(),
                        inputs=cost_inputs_from(Settings().costs), vram_mib=vram, requests=5)
