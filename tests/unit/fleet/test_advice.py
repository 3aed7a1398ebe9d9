"""Fleet advice over canned Prometheus answers: who throttles and why, who sits idle, busy GPU-hours per machine
and model, own vs rent through the Costs page's computation; five requests whatever the fleet's size."""

from __future__ import annotations

import urllib.parse

import httpx

from advisor.costs import CloudOffer, CostInputs, GpuSpec, Usage, compare
from desktop.fleet.advice import QUERIES, WINDOW_S, fleet_advice, read_usage, usage_from
from desktop.fleet.client import Connection, PrometheusClient, Sample
from desktop.fleet.model import Fleet

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
OFFERS = [CloudOffer("cloudy", "H100 80GB", 80.0, 2.5, 1.2, "test", "2026-01-01"),
          CloudOffer("cloudy", "A100 80GB", 80.0, 1.5, None, "test", "2026-01-01")]
SPECS = [GpuSpec("H100", 989.0, 80.0), GpuSpec("A100", 312.0, 80.0)]
INPUTS = CostInputs(purchase_price=3200.0, amortisation_months=36, electricity_price_per_kwh=0.30, currency="EUR")
HOUR = 3600.0


def _gpu(host: str, index: int, model: str) -> dict[str, str]:
    return {"Hostname": host, "gpu": str(index), "UUID": f"GPU-{host}-{index}", "modelName": model}


def _answers() -> dict[str, list[Sample]]:
    """ws-lab: two H100s busy 100 h and 80 h of 168, GPU 0 at its power cap 30 h; dgx: an A100 busy 5 h of 168."""
    lab0, lab1, dgx = _gpu("ws-lab", 0, H100), _gpu("ws-lab", 1, H100), _gpu("dgx", 0, A100)
    return {
        "busy_s": [Sample(lab0, 100 * HOUR, 0.0), Sample(lab1, 80 * HOUR, 0.0), Sample(dgx, 5 * HOUR, 0.0)],
        "recorded_s": [Sample(g, 168 * HOUR, 0.0) for g in (lab0, lab1, dgx)],
        "energy_kwh": [Sample(lab0, 60.0, 0.0), Sample(lab1, 50.0, 0.0), Sample(dgx, 10.0, 0.0),
                       # the same GPU again from a second target on the host: counted once
                       Sample({**lab0, "instance": "other:9400"}, 60.0, 0.0)],
        "throttle_s": [Sample({**lab0, "reason": "sw_power_cap"}, 30 * HOUR, 0.0),
                       Sample({**lab0, "reason": "gpu_idle"}, 60 * HOUR, 0.0),  # idle is no throttling
                       Sample({**lab1, "reason": "sw_power_cap"}, 0.5 * HOUR, 0.0)],  # under 2 % of its busy time
        "violation_s": [Sample({**dgx, "reason": "thermal"}, 0.0, 0.0)],
    }


EMPTY = Fleet((), "http://p:9090", 0.0, 0)


def test_throttling_idle_and_busy_hours_per_machine_and_model() -> None:
    uses = usage_from(_answers(), EMPTY)
    advice = fleet_advice(uses, offers=OFFERS, specs=SPECS, inputs=INPUTS)
    assert advice.by_machine == {"ws-lab": (180.0, 336.0), "dgx": (5.0, 168.0)}
    assert advice.by_model == {H100: (180.0, 336.0), A100: (5.0, 168.0)}
    lab0 = next(u for u in uses if u.gpu == "GPU-ws-lab-0")
    assert lab0.energy_kwh == 60.0 and lab0.throttle_s == {"sw_power_cap": 30 * HOUR}
    lines = advice.lines
    throttled = [line for line in lines if "throttled" in line]
    assert throttled == ["ws-lab GPU 0: throttled 30% of its 100 busy h in 7 days (Power cap 30.0 h)"]
    assert "dgx sits idle: busy 5 of 168 recorded GPU-hours (3%) in 7 days" in lines
    assert not any("ws-lab sits idle" in line for line in lines)


def test_own_vs_rent_is_the_costs_pages_computation() -> None:
    uses = usage_from(_answers(), EMPTY)
    advice = fleet_advice(uses, offers=OFFERS, specs=SPECS, inputs=INPUTS, vram_mib={H100: 81559.0})
    # The same function the Costs page calls, on the model's summed use; no purchase price for fleet machines.
    expected = compare(H100, 81559.0, Usage(window_s=WINDOW_S, busy_s=180 * HOUR, energy_kwh=110.0,
                                            recorded_s=168 * HOUR, window_label="the last 7 days"),
                       CostInputs(0.0, 36, 0.30, "EUR"), offers=OFFERS, specs=SPECS)
    assert advice.costs[H100] == expected
    line = next(line for line in advice.lines if line.startswith(f"{H100} x2"))
    assert f"electricity {expected.owned_month:.0f} EUR/month" in line
    h100 = next(o for o in expected.options if o.offer.gpu_model == "H100 80GB")
    assert f"renting it: {h100.on_demand_month:.0f} USD/month on cloudy H100 80GB" in line
    assert advice.lines[-1].startswith("Owning counts electricity only")


def test_five_requests_whatever_the_fleets_size() -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(urllib.parse.parse_qs(request.url.query.decode())["query"][0])
        rows = [{"metric": _gpu(f"node-{m}", g, H100), "value": [0, "3600"]} for m in range(50) for g in range(8)]
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": rows}})

    with PrometheusClient(Connection("http://p.test:9090"), transport=httpx.MockTransport(handler)) as client:
        uses, requests = read_usage(client, EMPTY)
    assert requests == 5 and sorted(asked) == sorted(QUERIES.values())
    assert len(uses) == 400 and {u.busy_s for u in uses} == {3600.0}
    assert "DCGM_FI_DEV_GPU_UTIL >= bool 10" in QUERIES["busy_s"]  # the advisor's busy rule
