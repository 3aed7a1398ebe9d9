"""The Quick test once per firmware mode on the simulated laptop, compared; real sysfs modes switched or asked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from advisor.mode_compare import ModeFigures, mode_sentences, pair_sentence
from desktop.sessions.stress import StressRequest, StressSession
from desktop.stress.per_mode import SimulatedModes, SysfsModes, choose_modes, run_modes, wait_cool
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.envelope import EnvelopeReader
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def test_pair_sentence_as_the_issue_writes_it() -> None:
    fast = ModeFigures("Extreme Performance", 80.0, "TFLOP/s", 170.0, 84.0)
    slow = ModeFigures("Balanced", 72.0, "TFLOP/s", 152.0, 78.0)
    assert pair_sentence(fast, slow) == "Extreme Performance buys 11 % over Balanced at +18 W and +6 °C"
    same = ModeFigures("Extreme Performance", 72.3, power_w=170.0)
    assert pair_sentence(same, slow) == ("Extreme Performance is no faster than Balanced (within 1%) at +18 W: "
                                         "the extra power buys nothing here")
    eco = ModeFigures("Eco", 50.0, power_w=80.0, temperature_c=60.0)
    assert mode_sentences([slow, eco, fast]) == [
        "Extreme Performance buys 11 % over Balanced at +18 W and +6 °C",
        "Balanced buys 44 % over Eco at +72 W and +18 °C",
    ]


def test_per_mode_on_the_simulated_laptop(tmp_path: Path) -> None:
    clock = SimClock()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=3)
    switch = SimulatedModes(backend.machine)
    modes = choose_modes(["turbo", "comfort", "eco"], switch.available())
    asked: list[str] = []

    def runner(config: StressConfig) -> StressRunner:
        return StressRunner(config, Sampler(backend.view(), clock=clock.now), clock=clock)

    # Each mode's run is the stress session's (locks, judging, saving), as `rigscope stress --per-mode` runs it.
    session = StressSession(StressRequest(device="sim", duration_s=120.0, db_path=tmp_path / "h.sqlite"),
                            make_runner=runner, lock_folder=tmp_path)

    def read_temp() -> float | None:
        sample = backend.sample(clock.now())[0].sample
        return sample.temperature_c if sample is not None else None

    start = read_temp()
    assert start is not None
    runs = run_modes(modes, switch, lambda _mode: session.run_next(), ask=asked.append,
                     cool_down=lambda: wait_cool(read_temp, start + 3.0, clock, limit_s=600.0))
    assert asked == []  # the simulated laptop switches itself
    assert [r.name for r in runs] == ["Extreme Performance", "Balanced", "Eco"]
    limits = [r.record.environment.power_limit_w for r in runs]
    assert limits == [175.0, 150.0, 80.0]
    assert [r.result.extra["firmware_mode"] for r in runs] == ["turbo", "comfort", "eco"]
    ids = [r.run_id for r in runs]  # each stored by the session as it ended
    assert None not in ids and ids == sorted(ids) and len(set(ids)) == 3 and {r.save_error for r in runs} == {None}
    turbo, comfort, eco = (r.figures() for r in runs)
    assert turbo.throughput and comfort.throughput and eco.throughput
    assert turbo.throughput > comfort.throughput > eco.throughput
    assert turbo.power_w and comfort.power_w and turbo.power_w > comfort.power_w
    # Each run started cool: the cool-down brought the GPU back near its first start.
    starts = [float(r.result.columns["temperature_c"][0]) for r in runs]
    assert max(starts) - min(starts) < 6.0
    sentences = mode_sentences([turbo, comfort, eco])
    assert sentences[0].startswith("Extreme Performance buys ") and " over Balanced at +" in sentences[0]
    assert sentences[1].startswith("Balanced buys ") and " over Eco at +" in sentences[1]


def test_choose_modes_errors() -> None:
    with pytest.raises(ValueError, match="this machine has turbo, eco"):
        choose_modes(["sport"], ("turbo", "eco"))
    with pytest.raises(ValueError, match="at least two"):
        choose_modes(["eco"], ("turbo", "eco"))
    with pytest.raises(ValueError, match="no firmware modes"):
        choose_modes([], ())
    assert choose_modes([], ("turbo", "eco", "comfort")) == ["turbo", "eco", "comfort"]


def _copy_tree(src: Path, dst: Path) -> Path:
    for path in src.rglob("*"):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return dst


def test_sysfs_modes_write_only_when_allowed(tmp_path: Path) -> None:
    root = _copy_tree(FIXTURES / "msi_ec_eco" / "sys", tmp_path / "sys")
    reader = EnvelopeReader(root, tmp_path / "proc", [])
    refused = SysfsModes(reader, allow_write=False)
    assert refused.kind == "msi-ec" and refused.available() == ("turbo", "eco", "comfort")
    assert refused.set("turbo") is False and refused.current() == "eco"
    allowed = SysfsModes(reader, allow_write=True)
    assert allowed.set("turbo") is True and allowed.current() == "turbo"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a read-only file")
def test_sysfs_mode_file_not_writable_asks(tmp_path: Path) -> None:
    root = _copy_tree(FIXTURES / "msi_ec_eco" / "sys", tmp_path / "sys")
    (root / "devices" / "platform" / "msi-ec" / "shift_mode").chmod(0o444)
    assert SysfsModes(EnvelopeReader(root, tmp_path / "proc", []), allow_write=True).set("turbo") is False


def test_platform_profile_modes(tmp_path: Path) -> None:
    root = _copy_tree(FIXTURES / "platform_profile_low_power" / "sys", tmp_path / "sys")
    modes = SysfsModes(EnvelopeReader(root, tmp_path / "proc", []), allow_write=True)
    assert modes.kind == "platform_profile" and modes.available() == ("low-power", "balanced", "performance")
    assert modes.set("performance") and modes.current() == "performance"


def test_mode_steps_one_at_a_time_stop_where_run_modes_stops() -> None:
    """`ModeSteps`, the steps `run_modes` loops over and the Stress page drives from its callbacks: a declined
    switch ends them (declined), a cool-down only between modes, nothing after `stop` or an aborted run."""
    import threading
    from types import SimpleNamespace

    from desktop.stress.per_mode import ModeSteps

    machine = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad()).machine

    class AskOnly(SimulatedModes):
        def set(self, mode: str) -> bool:
            return False

    asked: list[str] = []
    declined = ModeSteps(["turbo", "eco"], AskOnly(machine), ask=lambda text: asked.append(text) or False,
                         prompt="{name} ({kind} {mode})?")
    assert declined.switch_next() is None and declined.declined and declined.over
    assert asked == ["Extreme Performance (simulated turbo)?"]

    cooled: list[int] = []
    stop = threading.Event()
    steps = ModeSteps(["turbo", "eco", "comfort"], SimulatedModes(machine), ask=lambda _text: None,
                      cool_down=lambda: cooled.append(1), stop=stop)
    first = steps.switch_next()
    assert first == "turbo" and not steps.cooling_due and steps.cool() and cooled == []
    run = SimpleNamespace(result=SimpleNamespace(aborted=False), verdict=None, run_id=1, save_error=None)
    steps.runs.append(run)  # type: ignore[arg-type]  # what `add` records; only `aborted` is read here
    assert steps.switch_next() == "eco" and steps.cooling_due and steps.cool() and cooled == [1]
    stop.set()  # Ctrl+C, SIGTERM, the page's Cancel
    assert steps.over and steps.switch_next() is None and not steps.declined
    aborted = ModeSteps(["turbo", "eco"], SimulatedModes(machine), ask=lambda _text: None)
    aborted.runs.append(SimpleNamespace(result=SimpleNamespace(aborted=True)))  # type: ignore[arg-type]
    assert aborted.over and aborted.switch_next() is None
