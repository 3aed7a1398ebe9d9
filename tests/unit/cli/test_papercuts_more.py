"""More command-line papercuts (issue 14, item 5): `advise` shows both dates when a span crosses
midnight and its JSON carries the thin-history sentence; `sample`'s table names clock-event reasons
and says the fallback reason once; a stress run without a terminal writes a line per minute."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from advisor.clock_events import ClockEventReason
from advisor.rules.base import Recommendation
from desktop import cli, config
from desktop.advice import Advice, advice_json, compute_advice
from desktop.cli import advise, sample, stress
from desktop.cli.common import ProgressBar
from desktop.sessions.stress import StressRequest, StressSession
from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import Progress, StressConfig
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from tests.fakes.fake_pynvml import FakeNvml, desktop_gpu
from tests.unit.advisor.demo_db import DEMO_WEEK_END_S, stored_demo_week
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, demo_week_frame

NOW_S = 1_800_000_000.0


@pytest.fixture
def utc_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC for the test (the spans are printed in local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


# --- advise: spans across midnight ------------------------------------------------------------


@pytest.mark.usefixtures("utc_local_time")
def test_a_span_across_midnight_names_both_dates() -> None:
    overnight = advise.time_span(_utc(2026, 11, 23, 22, 10), _utc(2026, 11, 24, 1, 30))
    assert overnight == "Mon 23 Nov 22:10 – Tue 24 Nov 01:30"
    assert advise.time_span(_utc(2026, 11, 23, 20, 0), _utc(2026, 11, 23, 23, 40)) == "Mon 23 Nov 20:00 – 23:40"


def _five_minutes() -> Advice:
    frame = demo_week_frame(start_s=DEMO_WEEK_START_S + 10 * 3600, days=300 / 86400)
    frame = dataclasses.replace(frame, start_s=frame.end_s - 7 * 86400, demo=False)
    return compute_advice(frame, config.Settings())


@pytest.mark.usefixtures("utc_local_time")
def test_advise_text_shows_both_dates_of_an_overnight_span() -> None:
    rec = Recommendation("idle_night", "info", "Idle overnight", (), "Turn it off",
                         time_ranges=((_utc(2026, 11, 23, 22, 10), _utc(2026, 11, 24, 1, 30)),))
    advice = dataclasses.replace(_five_minutes(), recommendations=(rec,))
    text = advise.format_advice(advice)
    assert "  When: Mon 23 Nov 22:10 – Tue 24 Nov 01:30 (3.3 h)" in text.splitlines(), text


# --- advise --json: the thin-history sentence ---------------------------------------------------


def test_advise_json_carries_the_shortfall_sentence() -> None:
    advice = _five_minutes()
    data = json.loads(json.dumps(advice_json(advice)))
    assert data["shortfall"] == advice.shortfall() and "you have 5 minutes" in data["shortfall"]
    assert data["recorded_s"] == 300.0 and data["needed_s"] == advice.needed_s
    week = json.loads(json.dumps(advice_json(compute_advice(demo_week_frame(), config.Settings()))))
    assert week["shortfall"] is None


def test_rigscope_advise_json_says_the_history_is_thin(capsys: pytest.CaptureFixture[str]) -> None:
    db = stored_demo_week()  # cached, shared with the other command tests; its 8 days end at DEMO_WEEK_END_S
    ten_minutes_in_s = DEMO_WEEK_END_S - 8 * 86400 + 600  # "now" ten minutes after its first sample
    assert cli.main(["advise", "--json", "--days", "7", "--db", str(db)], now_s=ten_minutes_in_s) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["shortfall"] and "needs at least" in data["shortfall"], data.get("shortfall")
    assert "you have 10 minutes of recording" in data["shortfall"] and data["recorded_s"] < data["needed_s"]


# --- sample: clock-event reasons in words, the fallback reason once -----------------------------


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"json": False, "detail": True, "count": 3, "interval": 0.1, "simulate": ""}
    base.update(kw)
    return argparse.Namespace(**base)


def test_clock_event_reasons_are_words_from_the_one_vocabulary() -> None:
    mask = int(ClockEventReason.SW_POWER_CAP | ClockEventReason.SW_THERMAL_SLOWDOWN)
    assert sample.clock_event_text(mask) == "Power cap, SW thermal"
    assert sample.clock_event_text(0) == "none"
    assert sample.clock_event_text(None) == "n/a"


def test_sample_table_decodes_the_mask(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    FakeNvml([desktop_gpu(clock_event_reasons=0x24)]).install(monkeypatch)
    assert sample.main(_args(simulate=None, count=1)) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "Clock-event reasons" in line)
    assert "Power cap, SW thermal" in row and "0x" not in row, row


def test_sample_says_the_fallback_reason_once(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def no_driver(_simulate: object) -> SimulatedBackend:  # what open_backend falls back to without NVML
        return SimulatedBackend(parse_profile_list("rtx4090"), reason="NVML library not found")

    monkeypatch.setattr(sample, "open_backend", no_driver)
    assert sample.main(_args(simulate=None, count=3)) == 0  # stdout is not a terminal: the tables scroll
    out = capsys.readouterr().out
    assert out.count("GPU utilization") == 3  # three tables
    reason_lines = [line for line in out.splitlines() if line.startswith("(simulated:")]
    assert reason_lines == ["(simulated: NVML library not found)"], out


# --- stress without a terminal: one line per minute ---------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_bar_without_a_terminal_writes_a_line_per_period() -> None:
    stream, clock = io.StringIO(), _Clock()
    bar = ProgressBar(1.0, stream=stream, line_every_s=60.0, clock=clock)
    for second in range(0, 185, 5):  # three minutes and a bit, an update every 5 s
        clock.now = 1000.0 + second
        bar.update(second / 300, f"{300 - second} s left")
    bar.close()
    assert stream.getvalue().splitlines() == ["20.0%  240 s left", "40.0%  180 s left", "60.0%  120 s left"]


def test_progress_bar_without_a_terminal_and_no_period_stays_silent() -> None:
    stream, clock = io.StringIO(), _Clock()
    bar = ProgressBar(1.0, stream=stream, clock=clock)
    clock.now += 3600
    bar.update(0.5, "half")
    bar.close()
    assert stream.getvalue() == ""


def test_stress_progress_without_a_terminal_is_one_line_per_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[ProgressBar] = []
    stream, clock = io.StringIO(), _Clock()

    def make_bar(total: float, *args: object, **kwargs: object) -> ProgressBar:
        bar = ProgressBar(total, stream=stream, clock=clock, **kwargs)  # type: ignore[arg-type]
        created.append(bar)
        return bar

    monkeypatch.setattr(stress, "ProgressBar", make_bar)

    class Stop(Exception):
        pass

    class Runner:
        """Reports 2.5 minutes of a 10-minute run through the session's progress callback, then stops."""

        config = StressConfig(target=GpuTarget("sim"), duration_s=600.0)
        on_progress: Callable[[Progress], None] | None = None
        on_start: object = None
        claim: object = None

        def run(self) -> object:
            assert callable(self.on_progress)
            for second in range(0, 150, 10):
                clock.now = 1000.0 + second
                self.on_progress(Progress(elapsed_s=second, duration_s=600.0, throughput=100.0, unit="TFLOP/s",
                                          temperature_c=70.0))
            raise Stop

        def cancel(self) -> None:
            pass

    session = StressSession(StressRequest(device="sim"), make_runner=lambda _config: Runner())  # type: ignore[arg-type,return-value]
    with pytest.raises(Stop):
        stress._run(argparse.Namespace(), session)
    assert created and created[0].line_every_s == stress.PROGRESS_LINE_EVERY_S == 60.0
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("10.0%  9 min left") and "70 °C" in lines[0], lines
