"""The fleet reader over canned Prometheus API answers: grouping, machine names, DCGM-only, attention order,
one request per metric."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import httpx
import pytest

from desktop.fleet.client import Connection, PrometheusClient
from desktop.fleet.reader import GPU_QUERIES, HOST_QUERIES, gpu_key, machine_name, read_fleet
from desktop.telemetry import metric_names as names

NOW_S = 1_790_000_000.0
HOT_C = 85.0


def _gpu_labels(host: dict[str, str], index: int, uuid: str, model: str = "NVIDIA H100 80GB HBM3") -> dict[str, str]:
    return {"gpu": str(index), "UUID": uuid, "device": f"nvidia{index}", "modelName": model, "job": "gpus",
            "instance": "10.0.0.9:9400", **host}


class Canned:
    """A Prometheus that answers each query from a table: PromQL -> [(labels, value)]; counts requests."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[dict[str, str], float]]] = {}
        self.asked: list[str] = []
        self.times: list[str | None] = []

    def add(self, query_key: str, labels: dict[str, str], value: float) -> None:
        promql = (GPU_QUERIES | HOST_QUERIES)[query_key]
        self.answers.setdefault(promql, []).append((labels, value))

    def gpu(self, host: dict[str, str], index: int, uuid: str, *, temp: float = 50.0, live: bool = True,
            rigscope: bool = True, reasons: tuple[str, ...] = (), stress_throttled: bool | None = None,
            mask: int | None = None) -> None:
        labels = _gpu_labels(host, index, uuid)
        self.add("last_seen_s", labels, NOW_S - (1.0 if live else 600.0))
        if live:
            for key, value in (("temperature_c", temp), ("power_w", 300.0), ("utilization_pct", 90.0),
                               ("vram_used_mib", 1000.0), ("vram_free_mib", 3000.0), ("sm_clock_mhz", 1500.0)):
                self.add(key, labels, value)
            if mask is not None:
                self.add("clock_event_mask", labels, float(mask))
            if rigscope:
                self.add("power_limit_w", labels, 700.0)
                # As the query answers: each active reason, and one series without a reason for the GPU.
                self.add("clock_event_active", labels, 0.0)
                for reason in reasons:
                    self.add("clock_event_active", {**labels, "reason": reason}, 1.0)
        if stress_throttled is not None:
            stress = {"UUID": uuid, "modelName": labels["modelName"], **host, "workload": "gemm"}
            self.add("stress_throttled", stress, 1.0 if stress_throttled else 0.0)
            self.add("stress_ended_s", stress, NOW_S - 3600.0)

    def host(self, host: dict[str, str], recorder_up: bool | None = None) -> None:
        self.add("info", {**host, "version": "0.1.0", "source": "nvml"}, 1.0)
        if recorder_up is not None:
            self.add("recorder_up", dict(host), 1.0 if recorder_up else 0.0)

    def handler(self, request: httpx.Request) -> httpx.Response:
        params = urllib.parse.parse_qs(request.url.query.decode())
        query = params["query"][0]
        self.asked.append(query)
        self.times.append(params.get("time", [None])[0])
        result = [{"metric": labels, "value": [NOW_S, repr(value)]} for labels, value in self.answers.get(query, [])]
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": result}})

    def read(self, at_s: float | None = NOW_S) -> Any:
        client = PrometheusClient(Connection("http://prometheus.test:9090"),
                                  transport=httpx.MockTransport(self.handler))
        with client:
            return read_fleet(client, hot_c=HOT_C, at_s=at_s)


@pytest.mark.parametrize(("labels", "name"), [
    ({"Hostname": "ws-1", "hostname": "other", "instance": "10.0.0.1:9835"}, "ws-1"),
    ({"hostname": "ws-2", "instance": "10.0.0.2:9400"}, "ws-2"),
    ({"instance": "10.0.0.3:9400"}, "10.0.0.3:9400"),
    ({"Hostname": "", "instance": "10.0.0.4:9400"}, "10.0.0.4:9400"),
])
def test_machine_name_is_hostname_then_lowercase_then_instance(labels: dict[str, str], name: str) -> None:
    assert machine_name(labels) == name


def test_a_gpu_is_its_uuid_else_its_index() -> None:
    assert gpu_key({"UUID": "GPU-1", "gpu": "0"}) == "GPU-1"
    assert gpu_key({"gpu": "3"}) == "gpu3"


def test_series_group_by_machine_and_gpu_whatever_the_host_label() -> None:
    canned = Canned()
    canned.host({"Hostname": "ws-upper"})
    canned.gpu({"Hostname": "ws-upper"}, 0, "GPU-a")
    canned.gpu({"Hostname": "ws-upper"}, 1, "GPU-b")
    canned.gpu({"hostname": "srv-lower"}, 0, "GPU-c", rigscope=False)
    canned.gpu({"instance": "10.0.0.7:9400"}, 0, "GPU-d", rigscope=False)
    fleet = canned.read()
    by_name = {m.name: m for m in fleet.machines}
    # The instance-only GPU carries the helper's instance label too, but no host label: it is named by it.
    assert set(by_name) == {"ws-upper", "srv-lower", "10.0.0.7:9400"}
    assert [g.uuid for g in by_name["ws-upper"].gpus] == ["GPU-a", "GPU-b"]
    assert [g.index for g in by_name["ws-upper"].gpus] == ["0", "1"]
    assert by_name["ws-upper"].gpus[0].vram_total_mib == 4000.0  # used + free where no rigscope total
    assert by_name["srv-lower"].gpus[0].uuid == "GPU-c"


def test_rigscope_and_dcgm_only_machines_are_told_apart() -> None:
    canned = Canned()
    canned.host({"Hostname": "ws"}, recorder_up=True)
    canned.gpu({"Hostname": "ws"}, 0, "GPU-r")
    canned.gpu({"Hostname": "dgx"}, 0, "GPU-d", rigscope=False)
    by_name = {m.name: m for m in canned.read().machines}
    ws, dgx = by_name["ws"], by_name["dgx"]
    assert (ws.source, ws.recorder_up, ws.data_source, ws.version, ws.missing) == ("rigscope", True, "nvml", "0.1.0",
                                                                                   ())
    assert ws.gpus[0].power_limit_w == 700.0 and ws.gpus[0].throttle_reasons == ()
    assert dgx.source == "dcgm" and dgx.recorder_up is None and "throttle reasons" in dgx.missing
    gpu = dgx.gpus[0]
    assert gpu.throttle_reasons is None and gpu.throttled is None and gpu.power_limit_w is None  # unknown, not 0
    assert gpu.temperature_c == 50.0 and gpu.power_w == 300.0


def test_machines_sort_by_what_needs_attention() -> None:
    canned = Canned()
    canned.gpu({"Hostname": "a-fine"}, 0, "GPU-1")
    canned.gpu({"Hostname": "b-stress"}, 0, "GPU-2", stress_throttled=True)
    canned.host({"Hostname": "c-recorder"}, recorder_up=False)
    canned.gpu({"Hostname": "c-recorder"}, 0, "GPU-3")
    canned.gpu({"Hostname": "d-hot"}, 0, "GPU-4", temp=HOT_C + 1.0, rigscope=False)
    canned.gpu({"Hostname": "e-throttled"}, 0, "GPU-5", reasons=("hw_thermal_slowdown", "gpu_idle"))
    canned.gpu({"Hostname": "f-down"}, 0, "GPU-6", live=False)
    fleet = canned.read()
    assert [m.name for m in fleet.machines] == ["f-down", "e-throttled", "d-hot", "c-recorder", "b-stress", "a-fine"]
    assert [m.attention for m in fleet.machines] == [("down",), ("throttled",), ("hot",), ("recorder_down",),
                                                      ("stress_throttled",), ()]
    throttled = fleet.machines[1].gpus[0]
    assert throttled.throttle_reasons == ("hw_thermal_slowdown",)  # idle is not throttling
    down = fleet.machines[0]
    assert not down.live and down.last_seen_s == NOW_S - 600.0 and down.gpus[0].temperature_c is None


def test_gpus_within_a_machine_sort_by_attention_then_index() -> None:
    canned = Canned()
    for index in range(3):
        canned.gpu({"Hostname": "box"}, index, f"GPU-{index}", temp=90.0 if index == 2 else 40.0)
    (box,) = canned.read().machines
    assert [g.index for g in box.gpus] == ["2", "0", "1"]


@pytest.mark.parametrize("machines", [1, 50])
def test_one_request_per_metric_whatever_the_number_of_machines(machines: int) -> None:
    canned = Canned()
    for m in range(machines):
        canned.host({"Hostname": f"m{m:02d}"}, recorder_up=True)
        for g in range(8):
            canned.gpu({"Hostname": f"m{m:02d}"}, g, f"GPU-{m}-{g}")
    fleet = canned.read()
    assert len(fleet.machines) == machines and sum(len(m.gpus) for m in fleet.machines) == 8 * machines
    assert fleet.requests == len(canned.asked) == len(GPU_QUERIES) + len(HOST_QUERIES)
    assert sorted(canned.asked) == sorted((GPU_QUERIES | HOST_QUERIES).values())


def test_the_json_document_has_units_in_every_name() -> None:
    canned = Canned()
    canned.gpu({"Hostname": "ws"}, 0, "GPU-1")
    doc = canned.read().to_dict()
    json.dumps(doc)
    gpu = doc["machines"][0]["gpus"][0]
    assert {"uuid", "temperature_c", "power_w", "power_limit_w", "utilization_pct", "vram_used_mib",
            "vram_total_mib", "sm_clock_mhz", "sm_clock_max_mhz", "throttled", "throttle_reasons", "last_stress",
            "last_seen_s"} <= set(gpu)
    assert doc["machines"][0]["source"] == "rigscope"


def test_the_reader_queries_the_names_the_exporter_writes() -> None:
    """One table for both sides: every name the reader asks for is one the exporter's collector serves."""
    import re
    from pathlib import Path

    from desktop.exporter import collector

    source = Path(collector.__file__).read_text(encoding="utf-8")
    written = ({f.name for f in names.DCGM_FIELDS} | {n for n, _, _ in names.INFO_GAUGES}
               | {names.DCGM_CLOCK_EVENT_REASONS, names.DCGM_CLOCK_THROTTLE_REASONS})  # dcgm-exporter's only
    asked = set()
    for promql in (GPU_QUERIES | HOST_QUERIES).values():
        asked |= set(re.findall(r"\b(?:DCGM_FI_\w+|rigscope_\w+)", promql))
    for name in asked - written:
        constant = next(k for k, v in vars(names).items() if v == name and k.isupper())
        assert f"names.{constant}" in source, f"{name}: the exporter does not write it from metric_names"


def test_the_readme_states_the_number_of_requests_the_reader_sends(repo_root: Any) -> None:
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    assert f"({len(GPU_QUERIES) + len(HOST_QUERIES)} in all, however many machines" in readme


def test_without_a_time_every_query_is_at_the_servers_first_instant() -> None:
    """The server's clock, not this machine's: the first query asks for the server's now, the rest for the same
    instant (a client clock minutes off would otherwise hide every series behind the 5 min lookback)."""
    canned = Canned()
    canned.gpu({"Hostname": "ws"}, 0, "GPU-1")
    fleet = canned.read(at_s=None)
    assert canned.times[0] is None and set(canned.times[1:]) == {f"{NOW_S:.3f}"}
    assert fleet.queried_at_s == NOW_S


def test_a_dcgm_only_machine_with_the_clock_event_mask_says_what_throttles_it() -> None:
    canned = Canned()
    canned.gpu({"Hostname": "dgx-mask"}, 0, "GPU-m", rigscope=False, mask=0x1 | 0x4 | 0x20)
    canned.gpu({"Hostname": "dgx-idle"}, 0, "GPU-i", rigscope=False, mask=0x1)
    canned.gpu({"Hostname": "dgx-plain"}, 0, "GPU-p", rigscope=False)
    by_name = {m.name: m for m in canned.read().machines}
    assert by_name["dgx-mask"].gpus[0].throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown")  # not idle
    assert by_name["dgx-mask"].attention == ("throttled",) and by_name["dgx-idle"].gpus[0].throttled is False
    assert "throttle reasons" not in by_name["dgx-mask"].missing and by_name["dgx-mask"].source == "dcgm"
    assert by_name["dgx-plain"].gpus[0].throttle_reasons is None and "throttle reasons" in by_name["dgx-plain"].missing
