"""The job's throughput read from its output (tqdm bars redrawn with \\r, split anywhere) and from the
RIGSCOPE_PROGRESS protocol file, and turned into a series at the sample times."""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.progress import (
    ItemsReading,
    OutputProgress,
    ProtocolProgress,
    RateReading,
    rate_in,
    throughput_series,
)

# What tqdm 4.x really writes (format_meter), as captured from `for _ in tqdm(range(100)): ...`.
TQDM_REDRAWS = (b"\r  0%|          | 0/100 [00:00<?, ?it/s]"
                b"\r 12%|\xe2\x96\x88\xe2\x96\x8f        | 12/100 [00:01<00:08,  9.85it/s]"
                b"\r 24%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8d       | 24/100 [00:02<00:07, 10.02it/s]")


@pytest.mark.parametrize(("text", "expected"), [
    (b" 45%|####5     | 45/100 [00:04<00:05,  9.85it/s]", (9.85, "it")),
    (b" 3/10 [00:09<00:21,  3.20s/it]", (1 / 3.2, "it")),
    (b"100%|##| 10/10 [00:01<00:00, 1.23ksamples/s]", (1230.0, "samples")),
    (b"50/100 [00:10<00:10, 12.5foo/s, loss=0.2]", (12.5, "foo")),  # any unit inside a tqdm bracket
    (b"step 5: 5123.4 tok/s loss 2.1", (5123.4, "tok")),  # a known unit anywhere
    (b"epoch 1 | 812 samples/s", (812.0, "samples")),
    (b"took 3.5s/step", (1 / 3.5, "step")),
])
def test_rates_are_read(text: bytes, expected: tuple[float, str]) -> None:
    found = rate_in(text)
    assert found is not None
    assert found[0] == pytest.approx(expected[0])
    assert found[1] == expected[1]


@pytest.mark.parametrize("text", [
    b"downloading 12.3MB/s", b"[00:00<?, ?it/s]", b"see http://host/s", b"0 items", b"42 frobs/s",
    b"value: 3.5s/foo",
])
def test_what_is_not_a_job_rate_is_left_alone(text: bytes) -> None:
    assert rate_in(text) is None


def test_the_newest_redraw_wins_and_a_bar_split_across_chunks_is_read_whole() -> None:
    parser = OutputProgress()
    data = TQDM_REDRAWS + b"\r"
    for i in range(0, len(data), 7):  # the pty hands it over in pieces
        parser.feed(data[i:i + 7], time_s=float(i))
    assert [r.rate for r in parser.readings][-1] == pytest.approx(10.02)
    assert {r.unit for r in parser.readings} == {"it"}


def test_a_last_bar_without_newline_counts_at_the_end() -> None:
    parser = OutputProgress()
    parser.feed(b"\r 99/100 [00:09<00:00, 11.0it/s]", 1.0)
    assert parser.readings == []
    parser.finish(2.0)
    assert parser.readings == [RateReading(2.0, 11.0, "it")]


def test_colour_codes_around_a_bar_do_not_hide_it() -> None:
    parser = OutputProgress()
    parser.feed(b"\x1b[32m 5/9 [00:01<00:01,  4.00it/s]\x1b[0m\n", 1.0)
    assert parser.readings == [RateReading(1.0, 4.0, "it")]


def test_protocol_lines_are_deltas_and_a_torn_line_waits_for_its_end() -> None:
    proto = ProtocolProgress()
    proto.feed(b'{"items": 512, "unit": "samples"}\n{"items": 5', 10.0)
    proto.feed(b'12, "unit": "samples", "time": 11.5}\nnot json\n{"unit": "x"}\n', 12.0)
    assert proto.readings == [ItemsReading(10.0, 512.0, "samples"), ItemsReading(11.5, 512.0, "samples")]
    assert proto.bad_lines == 2


def test_the_series_from_protocol_is_items_per_second_between_samples() -> None:
    items = [ItemsReading(t, 100.0, "samples") for t in (0.5, 1.5, 1.7, 2.5)]
    series, unit = throughput_series([0.0, 1.0, 2.0, 3.0], [], items)
    assert unit == "samples/s"
    assert np.isnan(series.throughput[0])
    assert series.throughput[1:].tolist() == [100.0, 200.0, 100.0]


def test_the_protocol_wins_over_output_rates() -> None:
    series, unit = throughput_series([0.0, 1.0], [RateReading(0.2, 5.0, "it")], [ItemsReading(0.5, 7.0, "tok")])
    assert unit == "tok/s"
    assert series.throughput[1] == 7.0


def test_the_series_from_output_holds_the_last_rate_then_goes_stale_and_is_blank_while_paused() -> None:
    rates = [RateReading(0.5, 10.0, "it"), RateReading(2.5, 12.0, "it")]
    times = [0.0, 1.0, 2.0, 3.0, 4.0, 40.0]
    series, unit = throughput_series(times, rates, [], paused=[(3.5, 4.5)])
    assert unit == "it/s"
    out = series.throughput
    assert np.isnan(out[0]) and out[1] == 10.0 and out[2] == 10.0 and out[3] == 12.0
    assert np.isnan(out[4])  # paused
    assert np.isnan(out[5])  # nothing read for 37 s


def test_no_progress_at_all_is_no_series() -> None:
    series, unit = throughput_series([0.0, 1.0], [], [])
    assert unit is None and series.time_s.size == 0


def test_a_huge_protocol_value_is_json_not_code() -> None:
    proto = ProtocolProgress()
    proto.feed(json.dumps({"items": "1e3", "unit": "tok"}).encode() + b"\n", 1.0)
    assert proto.readings == [ItemsReading(1.0, 1000.0, "tok")]


@pytest.mark.parametrize("line", [
    b'{"items": ' + b"9" * 400 + b'}',  # a float() of it overflowed: a traceback and exit 1 (issue 21, defect 3)
    b'{"items": ' + b"9" * 5000 + b'}',  # over Python's 4300-digit int limit
    b"[" * 100_000 + b"]" * 100_000,  # nested 100,000 deep: RecursionError
    b'{"items": ' + b"[" * 50 + b"1" + b"]" * 50 + b'}',
    b'{"items": NaN}', b'{"items": Infinity}', b'{"items": -1}', b'{"items": 1e300}', b'{"items": true}',
    b'{"items": 5, "time": 1e308}', b'{"items": 5, "time": "soon"}', b'{"items": 5, "unit": {"a": 1}}',
    b'{"items": "' + b"1" * 400 + b'"}', b'[1, 2]', b'"items"', b'{"items": 5, "unit": "' + b"x" * 5000 + b'"}',
    b"\xff\xfe{}",
])
def test_a_bad_protocol_line_is_skipped_and_counted_and_the_next_one_read(line: bytes) -> None:
    proto = ProtocolProgress()
    proto.feed(line + b'\n{"items": 3, "unit": "tok"}\n', 100.0)
    assert proto.bad_lines == 1
    assert proto.readings == [ItemsReading(100.0, 3.0, "tok")]


def test_an_endless_line_is_not_kept_and_counts_once_when_it_ends() -> None:
    proto = ProtocolProgress()
    for _ in range(64):
        proto.feed(b"9" * 65536, 1.0)  # 4 MiB without a newline
    assert len(proto._tail) == 0
    proto.feed(b'999}\n{"items": 2}\n', 2.0)
    assert proto.bad_lines == 1 and proto.readings == [ItemsReading(2.0, 2.0, "items")]
    proto.feed(b"7" * 10000, 3.0)
    proto.finish(3.0)
    assert proto.bad_lines == 2


def test_protocol_times_out_of_order_are_kept_in_order() -> None:
    proto = ProtocolProgress()
    proto.feed(b'{"items": 1, "time": 50}\n{"items": 1, "time": 40}\n', 60.0)
    assert [r.time_s for r in proto.readings] == [50.0, 50.0]


@pytest.mark.parametrize("text", [b"[00:01<00:02, 1e-300s/it]", b"[00:01<00:02, 1e300it/s]"])
def test_a_rate_out_of_range_is_not_read(text: bytes) -> None:
    assert rate_in(text) is None
