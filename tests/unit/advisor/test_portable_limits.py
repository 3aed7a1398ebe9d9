"""Run records from anywhere: one parser with limits (size, depth, digits, finite numbers, valid UTF-8).

Each hostile file of the attack run (issue 21, defect 9) is refused with one line naming the
field, never a traceback; no comparison ever holds a number JSON cannot carry.
"""

from __future__ import annotations

import json
import math

import pytest

from advisor.portable import PortableRecord, finite_json
from advisor.portable_read import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_RECORD_BYTES,
    PortableError,
    parse_record,
    parse_record_bytes,
)
from advisor.run_compare import compare

HEAD = '{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1'


def _refusal(text: str | bytes) -> str:
    with pytest.raises(PortableError) as caught:
        parse_record_bytes(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_400_digit_integer_is_refused_naming_its_field() -> None:
    message = _refusal(HEAD + ', "throughput": {"sustained": ' + "9" * 400 + "}}")
    assert '"throughput.sustained"' in message and "400-digit" in message


def test_an_integer_past_python_s_4300_digit_limit_is_refused_naming_its_field() -> None:
    message = _refusal(HEAD + ', "energy_j": ' + "1" * 4301 + "}")
    assert '"energy_j"' in message and "4301-digit" in message


def test_a_long_integer_in_a_field_nobody_reads_is_harmless() -> None:
    record = parse_record_bytes((HEAD + ', "comment": ' + "7" * 5000 + "}").encode())
    assert record.workload == "gemm"


def test_a_lone_surrogate_is_refused_naming_its_field() -> None:
    message = _refusal(HEAD + ', "machine": "box\\ud800"}')
    assert '"machine"' in message and "UTF-8" in message


def test_raw_surrogate_bytes_are_not_utf_8() -> None:
    message = _refusal(HEAD.encode() + b', "machine": "box\xed\xa0\x80"}')
    assert "UTF-8" in message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_non_finite_numbers_are_refused_naming_their_field(constant: str) -> None:
    message = _refusal(HEAD + ', "power_w": {"mean": ' + constant + "}}")
    assert '"power_w.mean"' in message


def test_nesting_100000_deep_is_refused_before_it_is_parsed() -> None:
    message = _refusal(HEAD + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert f"nested deeper than {MAX_DEPTH}" in message


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    record = parse_record_bytes((HEAD + ', "machine": "' + "[" * 500 + '\\"{"}').encode())
    assert record.machine == "[" * 500 + '"{'


def test_a_huge_file_is_refused_without_parsing_it() -> None:
    message = _refusal(b" " * (MAX_RECORD_BYTES + 1))
    assert "kB" in message


def test_magnitudes_outside_any_measurement_are_refused() -> None:
    message = _refusal(HEAD + ', "throughput": {"sustained": 1e-300}}')
    assert '"throughput.sustained"' in message
    message = _refusal(HEAD + ', "throughput": {"sustained": 1e300}}')
    assert '"throughput.sustained"' in message


def test_the_limits_hold_for_text_too() -> None:
    assert MAX_INT_DIGITS < 100
    with pytest.raises(PortableError, match="UTF-8"):
        parse_record(HEAD + ', "machine": "a\udcff"}')


def _tiny() -> PortableRecord:
    return PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=10.0, unit="TFLOP/s",
                          throughput=1e-9, price_per_hour=1e-9, currency="USD")


def test_a_tiny_baseline_gives_finite_ratios_or_none() -> None:
    from advisor.portable import Spread

    big = PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=10.0, unit="TFLOP/s",
                         throughput=1e15, power_w=Spread(mean=1e-9), price_per_hour=1e15, currency="USD")
    tiny = PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=10.0, unit="TFLOP/s",
                          throughput=5e-324, power_w=Spread(mean=1e15), price_per_hour=1e-9, currency="USD")
    text = json.dumps(compare([tiny, big]).as_dict(), allow_nan=False)  # raises on NaN/Infinity
    assert "Infinity" not in text and "NaN" not in text


def test_finite_json_leaves_no_non_finite_number() -> None:
    data = finite_json({"a": math.inf, "b": [-math.inf, math.nan, 1.5], "c": {"d": 2}})
    assert data == {"a": None, "b": [None, None, 1.5], "c": {"d": 2}}
    record = PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=math.inf,
                            throughput=math.nan)
    assert "Infinity" not in record.to_json() and "NaN" not in record.to_json()
