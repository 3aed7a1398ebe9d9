"""Benchmark: one fleet refresh of 50 machines x 8 GPUs through a real Prometheus (issue 33 item 6).

A text target serves synthetic series for 400 GPUs on 50 hosts (every name the reader asks for: the
dcgm-exporter gauges, and on the 30 "Rigscope" hosts the rigscope_* limits, clock-event reasons, last
stress test and recorder health; the other 20 are DCGM-only), a real Prometheus scrapes it every
second, and ``read_fleet`` reads it the way `rigscope fleet` does. Printed: requests per refresh (one
per metric), bytes received, the refresh's wall time (median of 5; on a worker thread in the window,
never the GUI thread), the grouping alone (``build_fleet`` on answers already received: the part a
page would run when a refresh lands), and the Python memory peak of a refresh (tracemalloc). Only the
request count and the machine and GPU counts are asserted; timings are printed, never asserted.
"""

from __future__ import annotations

import http.server
import subprocess
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from advisor.clock_events import SINGLE_REASONS
from desktop.fleet.client import Connection, PrometheusClient
from desktop.fleet.reader import GPU_QUERIES, HOST_QUERIES, build_fleet, read_fleet
from desktop.telemetry import metric_names as names
from tests.bench.timing import median_s
from tests.integration.tools import free_port, require_tool
from tests.waits import until

MACHINES, GPUS, RIGSCOPE_MACHINES = 50, 8, 30


def _page() -> bytes:
    """The exposition text of the whole synthetic fleet (values vary by GPU, fixed in time)."""
    lines = []
    for m in range(MACHINES):
        host = f"node-{m:02d}"
        rigscope = m < RIGSCOPE_MACHINES
        for g in range(GPUS):
            gpu = (f'gpu="{g}",UUID="GPU-{m:04d}-{g:04d}",pci_bus_id="00000000:{g + 1:02x}:00.0",device="nvidia{g}",'
                   f'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}"')
            load = (m * GPUS + g) % 100
            for name, value in ((names.dcgm_name("utilization_gpu_pct"), load),
                                (names.dcgm_name("vram_used_mib"), 800 * load),
                                (names.dcgm_name("vram_free_mib"), 81559 - 800 * load),
                                (names.dcgm_name("temperature_c"), 35 + load // 2),
                                (names.dcgm_name("power_w"), 70 + 6.3 * load),
                                (names.dcgm_name("sm_clock_mhz"), 345 + 15 * load),
                                (names.dcgm_name("mem_clock_mhz"), 2619)):
                lines.append(f"{name}{{{gpu}}} {value}")
            if not rigscope:
                continue
            for name, value in ((names.POWER_LIMIT_W, 700), (names.SM_CLOCK_MAX_MHZ, 1980),
                                (names.SLOWDOWN_TEMPERATURE_C, 90), (names.FB_TOTAL_MIB, 81559)):
                lines.append(f"{name}{{{gpu}}} {value}")
            for reason in SINGLE_REASONS:
                label = (reason.name or "").lower()
                active = 1 if reason.name == "SW_POWER_CAP" and load > 90 else 0
                lines.append(f'{names.CLOCK_EVENT_ACTIVE}{{{gpu},reason="{label}"}} {active}')
            stress = f'UUID="GPU-{m:04d}-{g:04d}",modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",workload="gemm"'
            lines += [f"{names.STRESS_THROTTLED}{{{stress}}} {1 if g == 0 else 0}",
                      f"{names.STRESS_END_TIMESTAMP_S}{{{stress}}} 1796000000",
                      f"{names.STRESS_SUSTAINED_RATIO}{{{stress}}} 0.9"]
        if rigscope:
            lines += [f'{names.INFO}{{Hostname="{host}",version="0.1.0",source="nvml"}} 1',
                      f'{names.RECORDER_UP}{{Hostname="{host}"}} 1',
                      f'{names.RECORDER_LAST_WRITE_TIMESTAMP_S}{{Hostname="{host}"}} 1796000000']
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def fleet_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = require_tool("prometheus", "prometheus")
    tmp = tmp_path_factory.mktemp("fleet-bench")
    page = _page()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    target = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    target.daemon_threads = True
    thread = threading.Thread(target=target.serve_forever, daemon=True, name="fleet-bench-target")
    thread.start()
    config = tmp / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: fleet\n"
                      f"    static_configs: [{{targets: ['127.0.0.1:{target.server_address[1]}']}}]\n")
    port = free_port()
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    base = f"http://127.0.0.1:{port}"
    try:
        def all_scraped() -> bool:
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            try:
                with PrometheusClient(Connection(base)) as client:
                    return len(client.query(names.dcgm_name("temperature_c"))) == MACHINES * GPUS
            except Exception:
                return False

        until(all_scraped, 120.0)
        # "Last seen" looks back in 15 s steps: wait until one step has seen every GPU.
        until(lambda: _count(base, GPU_QUERIES["last_seen_s"].split(" or ")[1]) == MACHINES * GPUS, 60.0)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        target.shutdown()
        target.server_close()
        thread.join(10.0)


def _count(base: str, promql: str) -> int:
    try:
        with PrometheusClient(Connection(base)) as client:
            return len(client.query(promql))
    except Exception:
        return -1


def _median_s(fn: Callable[[], object], repeat: int = 5) -> float:
    return median_s(fn, repeat)


def test_bench_fleet_refresh(fleet_prometheus: str) -> None:
    with PrometheusClient(Connection(fleet_prometheus, timeout_s=30.0)) as client:
        fleet = read_fleet(client, hot_c=85.0)
        requests, received = client.requests, client.bytes_received
        assert requests == len(GPU_QUERIES) + len(HOST_QUERIES)  # one per metric, not one per machine
        assert len(fleet.machines) == MACHINES and sum(len(m.gpus) for m in fleet.machines) == MACHINES * GPUS
        assert sum(m.source == "dcgm" for m in fleet.machines) == MACHINES - RIGSCOPE_MACHINES
        # The reasons query against the real server: the power-capped GPUs of the page, and () for the others.
        reasons = {g.uuid: g.throttle_reasons for m in fleet.machines for g in m.gpus if m.source == "rigscope"}
        capped = {f"GPU-{m:04d}-{g:04d}" for m in range(RIGSCOPE_MACHINES) for g in range(GPUS)
                  if (m * GPUS + g) % 100 > 90}
        assert {u for u, r in reasons.items() if r} == capped and set(reasons.values()) == {(), ("sw_power_cap",)}
        refresh_s = _median_s(lambda: read_fleet(client, hot_c=85.0))
        answers = {key: client.query(promql) for key, promql in (GPU_QUERIES | HOST_QUERIES).items()}
        group_s = _median_s(lambda: build_fleet(answers, hot_c=85.0, server="", queried_at_s=0.0, requests=0))
        tracemalloc.start()
        read_fleet(client, hot_c=85.0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"\nfleet refresh, {MACHINES} machines x {GPUS} GPUs ({RIGSCOPE_MACHINES} Rigscope, "
          f"{MACHINES - RIGSCOPE_MACHINES} DCGM-only), real Prometheus on loopback:\n"
          f"  requests per refresh: {requests} (one per metric)\n"
          f"  bytes received per refresh: {received / 1024:,.0f} KiB\n"
          f"  refresh (queries + grouping), median of 5: {refresh_s * 1000:.0f} ms\n"
          f"  grouping alone (build_fleet), median of 5: {group_s * 1000:.1f} ms\n"
          f"  Python memory peak during a refresh: {peak / 1024 / 1024:.1f} MiB")

