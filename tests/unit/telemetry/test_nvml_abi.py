"""The stand-ins' own NVML table (tests/fakes/nvml_abi.py) against the installed binding; the floor run's binding."""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
from pathlib import Path

import pynvml
import pytest

from tests.fakes import nvml_abi as abi

#: Names whose value moved between the headers bindings were built from: the per-cause counters (251-253 in
#: 12.575's header, 269-271 from 13.580.82; personalities_counters.py models both) and the GPM array bound.
MOVED = {"NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN", "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN",
         "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN", "NVML_GPM_METRIC_MAX"}


def test_the_table_agrees_with_the_installed_binding_where_both_define_a_name() -> None:
    """A typo in the stand-ins' table would make every NVML test agree with itself: the binding checks it."""
    compared = 0
    for name, ours in abi.BINDING_NAMES.items():
        theirs = getattr(pynvml, name, None)
        if theirs is None or name in MOVED:
            continue
        if isinstance(ours, int):
            assert ours == theirs, name
        else:
            assert isinstance(ours, type) and isinstance(theirs, type), name
            assert ctypes.sizeof(ours) == ctypes.sizeof(theirs), name
            theirs_fields = [f[0] for f in theirs._fields_]  # a newer header may append (c_nvmlValue_t's usVal)
            assert [f[0] for f in ours._fields_][: len(theirs_fields)] == theirs_fields, name
        compared += 1
    assert compared >= 50


def test_the_floor_run_uses_the_binding_make_test_fetched() -> None:
    """`make test` runs this folder again over the oldest declared binding: that run must really load it."""
    expected = os.environ.get("RIGSCOPE_EXPECT_PYNVML")
    if not expected:
        pytest.skip("not the floor-binding run (make test sets RIGSCOPE_EXPECT_PYNVML)")
    assert importlib.metadata.version("nvidia-ml-py") == expected
    first = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    assert Path(pynvml.__file__).resolve().parent == Path(first).resolve()
