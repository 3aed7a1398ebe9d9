"""The temperature guard stays below shutdown and the platform's max operating temperature."""

from __future__ import annotations

import pytest

from advisor.guard import SHUTDOWN_MARGIN_C, GuardRefused, check_guard, guard_ceiling, guard_temperature
from desktop.cli import main
from desktop.telemetry.model import GpuInfo


def gpu(slowdown_c: float | None, shutdown_c: float | None, max_operating_c: float | None,
        name: str = "GPU") -> GpuInfo:
    return GpuInfo(index=0, uuid="GPU-x", name=name, temp_slowdown_c=slowdown_c, temp_shutdown_c=shutdown_c,
                   temp_max_operating_c=max_operating_c)


# Slowdown / shutdown / max operating as the real captures print them (absolute form).
RTX3090 = gpu(95.0, 98.0, 93.0, "NVIDIA GeForce RTX 3090")  # nvsmi_q_RTX3090.txt
A10 = gpu(98.0, 101.0, 91.0, "NVIDIA A10")  # nvsmi_q_A10.txt
# ThinkPad T14: the platform holds the GPU far below slowdown (realdata/README.md, other captures).
MX330 = gpu(97.0, 102.0, 57.0, "NVIDIA GeForce MX330")
GTX1050TI = gpu(99.0, 102.0, None, "NVIDIA GeForce GTX 1050 Ti")  # nvsmi_q_GTX1050Ti.txt: max operating N/A


@pytest.mark.parametrize(("info", "expected_c"), [
    (RTX3090, 93.0),   # slowdown + 5 = 100 would sit above shutdown (98): shutdown - 5
    (A10, 94.0),       # 103 above shutdown 101; max operating 91 + 3
    (MX330, 60.0),     # the platform's limit (57) + 3, not 102
    (gpu(87.0, 99.0, 87.0), 90.0),  # an Ada laptop held at its 87 °C limit runs on; past 90 it stops
    (GTX1050TI, 102.0 - SHUTDOWN_MARGIN_C),
    (gpu(87.0, 102.0, None), 92.0),  # room below shutdown: slowdown + 5 as before
    (gpu(None, None, None), None),
])
def test_the_default_guard_never_exceeds_shutdown_less_a_margin_nor_max_operating(
        info: GpuInfo, expected_c: float | None) -> None:
    assert guard_temperature(info, None) == expected_c
    ceiling = guard_ceiling(info)
    if ceiling is not None:
        assert expected_c is not None and expected_c <= ceiling


def test_a_configured_absolute_guard_is_capped_too() -> None:
    assert guard_temperature(MX330, None, absolute_c=85.0) == 60.0
    assert guard_temperature(gpu(87.0, 102.0, None), None, absolute_c=80.0) == 80.0


def test_an_explicit_guard_at_or_above_shutdown_is_refused_naming_it() -> None:
    for guard_c in (98.0, 110.0):
        with pytest.raises(GuardRefused, match=r"shutdown temperature of NVIDIA GeForce RTX 3090 \(98 °C\)"):
            guard_temperature(RTX3090, guard_c)
    # Below shutdown it is the user's call, even above max operating.
    assert guard_temperature(RTX3090, 95.0) == 95.0
    check_guard(gpu(None, None, None), 150.0)  # nothing known: nothing to refuse
    # Advisor's own error, a ValueError: the stress runner says it to the user as a UserError (exit 2, below).
    assert issubclass(GuardRefused, ValueError)


def test_cli_refuses_a_guard_at_shutdown_with_exit_2(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.telemetry.simulated import parse_profile_list

    shutdown_c = parse_profile_list(None)[0].temp_shutdown_c
    code = main(["stress", "--device", "sim", "--minutes", "0.02", "--guard-c", f"{shutdown_c:g}",
                 "--db", f"{tmp_path}/h.sqlite"])
    err = capsys.readouterr().err
    assert code == 2
    assert "shutdown temperature" in err and f"({shutdown_c:g} °C)" in err
    assert "Traceback" not in err
