"""`rigscope fleet`: the table (escaped names, DCGM-only said so, attention words) and its one-line refusals."""

from __future__ import annotations

import pytest

from desktop import cli
from desktop.cli.fleet import format_fleet
from desktop.fleet.client import Sample
from desktop.fleet.reader import GPU_QUERIES, HOST_QUERIES, build_fleet

NOW_S = 1_790_000_000.0
EVIL = "ws-\x1b[31mred\u202eevil"


def _answers() -> dict[str, list[Sample]]:
    answers: dict[str, list[Sample]] = {key: [] for key in GPU_QUERIES | HOST_QUERIES}

    def gpu(host: str, uuid: str, live: bool, **values: float) -> None:
        labels = {"Hostname": host, "UUID": uuid, "gpu": "0", "modelName": "NVIDIA RTX A6000"}
        answers["last_seen_s"].append(Sample(labels, NOW_S - (5.0 if live else 900.0), NOW_S))
        for key, value in values.items():
            if key == "reason":
                continue
            answers[key].append(Sample(labels, value, NOW_S))

    gpu(EVIL, "GPU-1", True, temperature_c=70.0, power_w=250.0, power_limit_w=300.0, utilization_pct=99.0,
        vram_used_mib=2048.0, vram_free_mib=2048.0, sm_clock_mhz=1800.0, sm_clock_max_mhz=2100.0)
    answers["clock_event_active"] += [Sample({"Hostname": EVIL, "UUID": "GPU-1", "gpu": "0"}, 0.0, NOW_S),
                                      Sample({"Hostname": EVIL, "UUID": "GPU-1", "gpu": "0",
                                              "reason": "sw_power_cap"}, 1.0, NOW_S)]
    answers["recorder_up"].append(Sample({"Hostname": EVIL}, 1.0, NOW_S))
    gpu("dgx-1", "GPU-2", True, temperature_c=60.0, power_w=300.0, utilization_pct=50.0)
    gpu("gone-1", "GPU-3", False)
    return answers


def test_the_table_escapes_names_and_says_what_needs_attention() -> None:
    fleet = build_fleet(_answers(), hot_c=85.0, server="http://prom:9090", queried_at_s=NOW_S, requests=18)
    text = format_fleet(fleet)
    assert "\x1b" not in text and "\u202e" not in text and "ws-\\x1b[31mred" in text
    lines = text.splitlines()
    assert lines[0] == "3 machines, 3 GPUs from Prometheus at http://prom:9090 (18 queries), most in need of " \
                       "attention first"
    rows = lines[2:5]
    assert rows[0].strip().startswith("gone-1 (DCGM only)") and "DOWN" in rows[0] and "15 min ago" in rows[0]
    assert rows[1].strip().startswith("ws-") and "sw_power_cap" in rows[1] and "250 / 300 W" in rows[1]
    assert "1800 / 2100 MHz" in rows[1] and "2.0/4 GiB" in rows[1] and "writing" in rows[1] and "5 s ago" in rows[1]
    assert rows[2].strip().startswith("dgx-1 (DCGM only)") and "n/a" in rows[2] and "300 W" in rows[2]
    assert "dgx-1: DCGM only (dcgm-exporter): no throttle reasons, power limit, max SM clock, last stress " \
           "verdict, recorder health" in text


def test_no_server_anywhere_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fleet"], now_s=NOW_S) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("rigscope fleet: no Prometheus server given: pass --prometheus URL")


def test_a_password_in_the_url_is_refused_without_showing_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fleet", "--prometheus", "http://bob:hunter2-secret@prom:9090"], now_s=NOW_S) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "give no user or password in the URL" in captured.err
    assert "hunter2-secret" not in captured.err + captured.out


@pytest.mark.parametrize("timeout", ["0", "abc", "301"])
def test_a_timeout_out_of_range_is_a_usage_error(timeout: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["fleet", "--prometheus", "http://prom:9090", "--timeout", timeout])
    assert exit_.value.code == 2 and "--timeout" in capsys.readouterr().err
