"""Driver personalities for the clock-event time counters: R575, R580.65 and R580.82+ under load.

The field ids of SW thermal / HW thermal / HW power brake moved inside R580 (the table and its
sources are in ``desktop/telemetry/nvml/counters.py``): 251-253 in nvidia-ml-py 12.575.51 and the
CUDA 13.0.39 ``nvml.h`` (driver 580.65), 269-271 from 13.580.82 on, where 251-268 became power
smoothing. Each personality here answers its counters at its branch's ids and, where power
smoothing is supported, the other branch's ids with power smoothing's constants.

All start from the H200 capture (``nvsmi_q_H200.txt``, idle, driver 550). The under-load part is
modelled: a throttling timeline (SW power cap, then HW thermal, then HW power brake) whose reason
bits the counters integrate. Power smoothing is modelled too (the capture's driver predates it; an
RTX 5090 on 570 prints "Power Smoothing: N/A"); its values are plausible settings, not captured.
The HBM temperature (field 82) is the capture's "Memory Current Temp: 25 C".
"""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.personalities import DriverSpec, Personality, hopper

SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80

#: Seconds after the driver's start -> the mask from then on (a GEMM that heats, then brakes).
LOAD_TIMELINE: tuple[tuple[float, int], ...] = (
    (0.0, 0x1),  # idle
    (3.0, SW_POWER_CAP),  # at its power limit
    (8.0, HW_SLOWDOWN | HW_THERMAL),  # hot: HW thermal slowdown
    (14.0, HW_SLOWDOWN | HW_POWER_BRAKE),  # the board's power brake
    (18.0, SW_POWER_CAP | SW_THERMAL),  # SW thermal with the cap
)

#: The per-cause counter ids of each branch (SW thermal, HW thermal, HW power brake).
IDS_R575 = (251, 252, 253)
IDS_R580_82 = (269, 270, 271)

#: Power smoothing as 12.575.51 numbers it (254/255 sync balancing, 256-273 smoothing), modelled values.
SMOOTHING_R575 = {254: 0, 255: 0, 256: 1, 257: 0, 258: 1, 259: 700_000, 260: 560_000, 261: 90, 262: 0, 263: 100,
                  264: 5, 265: 80, 266: 5_000, 267: 5_000, 268: 100, 269: 0, 270: 80, 271: 5_000, 272: 5_000,
                  273: 100}
#: The same settings at the ids 13.580.82 gives them (251-268 smoothing, 272/273 sync balancing).
SMOOTHING_R580_82 = {fid - 5: value for fid, value in SMOOTHING_R575.items() if 256 <= fid <= 273} | {272: 0, 273: 0}


def _h200(key: str, description: str, driver: DriverSpec, counter_ids: tuple[int, int, int],
          smoothing: dict[int, int] | None) -> Personality:
    base = hopper()
    gpu = base.gpus[0]
    gpu.source += " (driver branch, load timeline and power smoothing modelled)"
    gpu.clock_event_timeline = LOAD_TIMELINE
    gpu.counter_field_bits = {74: SW_POWER_CAP, 75: SW_THERMAL, counter_ids[0]: SW_THERMAL,
                              counter_ids[1]: HW_THERMAL, counter_ids[2]: HW_POWER_BRAKE}
    gpu.constant_fields = dict(smoothing or {})
    gpu.memory_temperature_c = 25
    gpu.power_draw_w = 690.0
    gpu.fields = gpu.fields | set(gpu.counter_field_bits) | set(gpu.constant_fields) | {82}
    return Personality(key, description, driver, [gpu])


def h200_r575(*, smoothing: bool = True) -> Personality:
    """H200 on 575.57.08: counters at 251-253; 256-273 power smoothing (269-271 constants there)."""
    return _h200("h200_r575" + ("" if smoothing else "-smoothing"), "H200, driver 575.57.08",
                 DriverSpec("575.57.08", 12090), IDS_R575, SMOOTHING_R575 if smoothing else None)


def h200_r580_65() -> Personality:
    """H200 on 580.65.06 (the CUDA 13.0.39 header's ids): counters still at 251-253."""
    return _h200("h200_r580_65", "H200, driver 580.65.06", DriverSpec("580.65.06", 13000), IDS_R575, SMOOTHING_R575)


def h200_r580_82(version: str = "580.82.07") -> Personality:
    """H200 on 580.82.07 and later (the GPU machine runs 580.159): counters at 269-271, 251-268 smoothing."""
    return _h200("h200_r580_82" if version == "580.82.07" else f"h200_{version}", f"H200, driver {version}",
                 DriverSpec(version, 13000), IDS_R580_82, SMOOTHING_R580_82)


def h200_r580_ambiguous() -> Personality:
    """H200 on a 580 driver between the two headers (580.76.05): which set it uses is not known up front."""
    out = h200_r580_82("580.76.05")
    out.key = "h200_r580_ambiguous"
    return out


COUNTER_PERSONALITIES: dict[str, Callable[[], Personality]] = {
    "h200_r575": h200_r575,
    "h200_r575-smoothing": lambda: h200_r575(smoothing=False),
    "h200_r580_65": h200_r580_65,
    "h200_r580_82": h200_r580_82,
    "h200_r580_159": lambda: h200_r580_82("580.159.03"),
    "h200_r580_ambiguous": h200_r580_ambiguous,
}
