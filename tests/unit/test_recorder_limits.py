"""The recorder stores each GPU's limit in force when it moves (schema v11), as its envelope events say it.

The simulated RTX 4090 Laptop's firmware moves its enforced limit at once on a mode switch or an unplug (as the
NVML backend's re-read finds it on a real laptop); the recorder writes through the real HistoryWriter.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from desktop.history.frames import load_frame
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from desktop.recorder import Recorder
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

T0 = 1_790_000_000.0


def test_a_mode_switch_and_an_unplug_store_the_limit_then_in_force(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    clock = [T0]
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=1)
    (info,) = backend.devices()
    sampler = Sampler(backend, clock=lambda: clock[0])
    writer = HistoryWriter(path)
    writer.start()
    changes = {3: {"shift_mode": "eco"}, 6: {"on_ac": False}, 9: {"on_ac": True, "shift_mode": "comfort"}}
    try:
        recorder = Recorder(sampler, writer, clock=lambda: clock[0], maintenance_period_s=1e9)
        for step in range(12):
            if step in changes:
                backend.machine.set_envelope(**changes[step])  # type: ignore[arg-type]
            recorder.step()
            clock[0] += 1
        writer.flush()
    finally:
        writer.close()
    with HistoryStore.open(path, readonly=True) as store:
        gid = store.gpu_id(info.uuid)
        stored = [(ts / 1000.0 - T0, watts / 10.0) for ts, watts in store.conn.execute(
            "SELECT ts, power_limit_w FROM gpu_limits WHERE gpu = ? ORDER BY ts", (gid,))]
        events = [(e.time_s - T0, float(re.match(r"capped at (\d+) W|at its rated power \((\d+) W", e.detail)
                                         .group(1) or 0)) for e in store.events(T0 - 1, T0 + 20, ["envelope.limit"])]
        frame = load_frame(store, T0, T0 + 12)
    # A row per change, written when it changed, each as the envelope's line says it (one figure, one source).
    assert stored == events and len(stored) == 4
    assert [w for _, w in stored] == [150.0, 80.0, 56.0, 150.0]
    per_row = frame.gpus[0].power_limit_w
    assert per_row is not None
    assert np.array_equal(per_row, np.repeat([150.0, 80.0, 56.0, 150.0], 3))


def test_the_window_s_own_history_with_a_mode_switch_gives_a_power_cap_card_at_the_limits_in_force(
        tmp_path: Path) -> None:
    """The recorder under full load on the simulated laptop: 5 minutes in Balanced (150 W), then Extreme
    Performance (175 W). The card names the limit in force while capped and the power the capped samples drew."""
    from advisor.rules import run_rules

    path = tmp_path / "h.sqlite"
    clock = [T0]
    load = ManualLoad()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), load, seed=1)
    sampler = Sampler(backend, clock=lambda: clock[0])
    writer = HistoryWriter(path)
    writer.start()
    try:
        recorder = Recorder(sampler, writer, clock=lambda: clock[0], maintenance_period_s=1e9)
        load.set(0, 1.0, 8000.0, "train.py", 4242)
        for step in range(600):
            if step == 300:
                backend.machine.set_envelope(shift_mode="turbo")
            recorder.step()
            clock[0] += 1
        writer.flush()
    finally:
        writer.close()
    with HistoryStore.open(path, readonly=True) as store:
        frame = load_frame(store, T0, T0 + 600)
    assert frame.gpus[0].meta.power_limit_w == 175.0  # the last one read
    [card] = [r for r in run_rules(frame) if r.rule_id == "power_cap"]
    # All its capped time was in Balanced (at 175 W the simulated laptop draws less than its limit): before,
    # "power cap set under load (mean 150 W of its 175 W limit)".
    assert card.title == "GPU 0: held at its power limit (150 W)"
    assert card.evidence_value("Power limit") == 150.0
    gpu = frame.gpus[0]
    capped = (gpu.clock_event_reasons & 0x4) != 0
    assert capped.any() and gpu.time_s[capped].max() < T0 + 300  # capped only before the switch
    assert card.evidence_value("Mean power while capped") == pytest.approx(float(gpu.power_w[capped].mean()), abs=0.5)
