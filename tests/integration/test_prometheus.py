"""A real Prometheus server scrapes the exporter fed by the simulated GPU; promtool lints the page."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.frame import StressResult
from desktop import exporter
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import SimulatedBackend
from tests.integration.tools import free_port, require_tool
from tests.waits import DEADLINE_S

pytestmark = pytest.mark.integration

HOST = "it-rig"
LOWER_HOST = "it-rig-lower"  # the host the `lowercase` job presents under `hostname`
DCGM_NAMES = [f.name for f in exporter.DCGM_FIELDS]
VIOLATIONS = ["DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION"]


@pytest.fixture(scope="module")
def fed_exporter() -> Iterator[tuple[exporter.ExporterHandle, SimulatedBackend]]:
    """The exporter on a free loopback port, fed every 0.2 s by two simulated GPUs (GPU 0 under load).

    Shared by the module's tests (one Prometheus start, not three); the feeder is a daemon
    thread so the per-test leak check ignores it, and it is stopped and joined at the end."""
    backend = open_gpu_backend("rtx4090-laptop,h100")
    assert isinstance(backend, SimulatedBackend) and backend.manual is not None
    backend.manual.set(0, 1.0, vram_mib=6000.0)
    sampler = Sampler(backend, None)
    stop = threading.Event()
    with exporter.start_exporter("127.0.0.1:0", hostname=HOST) as handle:
        info = backend.devices()[0]
        handle.set_last_stress(StressResult(1, time.time() - 600, time.time(), info.uuid, info.name, "gemm", "bf16",
                                            "TFLOP/s", 76.0, 61.0, True, 0, None, "throttled after 3 min"))
        handle.set_recorder_health(up=True, last_write_s=time.time(), rows_written=100, write_errors=0)
        feeder = threading.Thread(target=exporter.run_loop, args=(sampler.tick, handle, 0.2, stop), name="feeder",
                                  daemon=True)
        feeder.start()
        try:
            yield handle, backend
        finally:
            stop.set()
            feeder.join(10.0)
            sampler.close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory,
               fed_exporter: tuple[exporter.ExporterHandle, SimulatedBackend]) -> Iterator[str]:
    """A Prometheus server on loopback scraping the exporter every second; yields its base URL."""
    yield from _prometheus(tmp_path_factory, fed_exporter[0], "")


@pytest.fixture(scope="module")
def prometheus_lowercase(tmp_path_factory: pytest.TempPathFactory,
                         fed_exporter: tuple[exporter.ExporterHandle, SimulatedBackend]) -> Iterator[str]:
    """Another one, scraping the same exporter as a host whose series carry `hostname` (the name newer
    dcgm-exporter releases move to) and no `Hostname`, through Prometheus' own relabelling."""
    yield from _prometheus(tmp_path_factory, fed_exporter[0],
                           "    metric_relabel_configs:\n"
                           f"      - {{source_labels: [Hostname], target_label: hostname, replacement: {LOWER_HOST}}}\n"
                           "      - {regex: Hostname, action: labeldrop}\n")


def _prometheus(tmp_path_factory: pytest.TempPathFactory, handle: exporter.ExporterHandle,
                relabel: str) -> Iterator[str]:
    binary = require_tool("prometheus", "prometheus")
    tmp_path = tmp_path_factory.mktemp("prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: rigscope\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{handle.port}']}}]\n"
        + relabel
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _get(f"{base}/-/ready") is not None, DEADLINE_S, proc, tmp_path)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bytes(response.read())
    except OSError:
        return None


def _wait_for(condition: Any, timeout_s: float, proc: subprocess.Popen[bytes], tmp_path: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out; prometheus log: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")


def query(base: str, promql: str) -> list[dict[str, Any]]:
    body = _get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
    assert body is not None, promql
    data = json.loads(body)
    assert data["status"] == "success", data
    return list(data["data"]["result"])


def by_gpu(base: str, promql: str) -> dict[str, float]:
    return {r["metric"]["gpu"]: float(r["value"][1]) for r in query(base, promql)}


def test_prometheus_scrapes_dcgm_and_rigscope_series(
    prometheus: str, fed_exporter: tuple[exporter.ExporterHandle, SimulatedBackend]
) -> None:
    _, backend = fed_exporter
    infos = {str(i.index): i for i in backend.devices()}
    wanted = [*DCGM_NAMES, *VIOLATIONS, "rigscope_clock_event_seconds_total", "rigscope_power_limit_watts"]

    def all_scraped() -> bool:
        return all(len(query(prometheus, name)) >= 2 for name in wanted)

    deadline = time.monotonic() + DEADLINE_S
    while not all_scraped():
        assert time.monotonic() < deadline, f"Prometheus did not get every series within {DEADLINE_S:g} s"
        time.sleep(0.2)

    assert [r["value"][1] for r in query(prometheus, 'up{job="rigscope"}')] == ["1"]
    for name in DCGM_NAMES:
        rows = query(prometheus, name)
        assert sorted(r["metric"]["gpu"] for r in rows) == ["0", "1"], name
        for row in rows:
            labels = row["metric"]
            info = infos[labels["gpu"]]
            assert labels["UUID"] == info.uuid and labels["modelName"] == info.name, name
            assert labels["device"] == f"nvidia{info.index}" and labels["Hostname"] == HOST, name
            assert labels["pci_bus_id"] == info.pci_bus_id, name

    temps = by_gpu(prometheus, "DCGM_FI_DEV_GPU_TEMP")
    assert all(15.0 <= t <= 110.0 for t in temps.values()), temps
    util = by_gpu(prometheus, "DCGM_FI_DEV_GPU_UTIL")
    assert util["0"] >= 90.0 and util["1"] == 0.0, util  # GPU 0 under full load, GPU 1 idle
    power = by_gpu(prometheus, "DCGM_FI_DEV_POWER_USAGE")
    limits = by_gpu(prometheus, "rigscope_power_limit_watts")
    assert limits == {k: i.power_limit_enforced_w for k, i in infos.items()}
    assert all(0.0 < power[k] <= 1.05 * limits[k] for k in power), (power, limits)
    assert power["0"] > power["1"]
    fb = by_gpu(prometheus, "DCGM_FI_DEV_FB_USED + on(gpu) DCGM_FI_DEV_FB_FREE")
    assert fb == pytest.approx({k: i.vram_total_mib for k, i in infos.items()})
    assert by_gpu(prometheus, "DCGM_FI_DEV_FB_USED")["0"] >= 6000.0
    clocks = by_gpu(prometheus, "DCGM_FI_DEV_SM_CLOCK <= on(gpu) rigscope_sm_clock_max_mhz")
    assert sorted(clocks) == ["0", "1"]  # the comparison keeps only series that hold
    assert all(v > 0 for v in by_gpu(prometheus, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION").values())

    # GPU 0 starts at its power limit: the counted time (ns) grows; idle GPU 1 counts none.
    power_violation = by_gpu(prometheus, "DCGM_FI_DEV_POWER_VIOLATION")
    assert power_violation["0"] > 0.0 and power_violation["1"] == 0.0, power_violation
    assert all(v >= 0.0 for v in by_gpu(prometheus, "DCGM_FI_DEV_THERMAL_VIOLATION").values())

    reasons = query(prometheus, "rigscope_clock_event_seconds_total")
    assert len(reasons) == 2 * len(exporter.REASONS)
    assert {r["metric"]["reason"] for r in reasons} >= {"hw_thermal_slowdown", "sw_power_cap", "gpu_idle"}
    assert all(float(r["value"][1]) >= 0.0 for r in reasons)
    info_rows = query(prometheus, "rigscope_info")
    assert info_rows[0]["metric"]["source"] == "simulated" and info_rows[0]["metric"]["Hostname"] == HOST


def test_promtool_reports_only_dcgm_camelcase_label_lint(
    fed_exporter: tuple[exporter.ExporterHandle, SimulatedBackend],
) -> None:
    promtool = require_tool("promtool", "prometheus")
    handle, _ = fed_exporter
    page = b""
    deadline = time.monotonic() + DEADLINE_S
    while b"rigscope_clock_event_seconds_total{" not in page:
        assert time.monotonic() < deadline
        page = _get(handle.url) or b""
        time.sleep(0.1)
    result = subprocess.run([promtool, "check", "metrics"], check=False, input=page, capture_output=True, timeout=30)
    problems = [line for line in (result.stdout + result.stderr).decode().splitlines() if line.strip()]
    assert problems, "expected the camelCase lint on modelName (dcgm-exporter's label)"
    lint = "label names should be written in 'snake_case' not 'camelCase'"
    assert [p for p in problems if not p.endswith(lint)] == []


def _dashboard_finds_data(base: str, host: str, repo_root: Path) -> None:
    """Every panel query of packaging/grafana/rigscope.json, for ``host``, is valid PromQL and finds data;
    the host and GPU pickers list ``host`` and both GPUs."""
    dashboard = json.loads((repo_root / "packaging/grafana/rigscope.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    deadline = time.monotonic() + DEADLINE_S
    while len(query(base, "rigscope_clock_event_seconds_total[10s]")) < 1 or not query(
            base, "increase(rigscope_clock_event_seconds_total[10s])"):
        assert time.monotonic() < deadline, f"no two scrapes within {DEADLINE_S:g} s"
        time.sleep(0.2)
    empty = []
    for expr in exprs:
        concrete = (expr.replace("$host", host).replace("$gpu", ".*")
                    .replace("$__rate_interval", "10s").replace("$__range", "1m"))
        if not query(base, concrete):
            empty.append(expr)
    # Only the throttle panels may be empty: the simulated GPUs have not throttled within seconds.
    assert all("rigscope_clock_event_seconds_total" in e for e in empty), empty
    # The pickers: Grafana runs query_result's PromQL and applies the variable's regex to each series' text.
    picked = {}
    for variable in dashboard["templating"]["list"]:
        inner = variable["query"]["query"].removeprefix("query_result(").removesuffix(")").replace("$host", host)
        pattern = re.compile(variable["regex"].strip("/"))
        picked[variable["name"]] = sorted(
            match.group(1) for row in query(base, inner)
            if (match := pattern.search(json.dumps(row["metric"]).replace('": "', '="'))))
    assert picked == {"host": [host], "gpu": ["0", "1"]}


def test_grafana_dashboard_queries_run_against_prometheus(prometheus: str, repo_root: Path) -> None:
    _dashboard_finds_data(prometheus, HOST, repo_root)


def test_grafana_dashboard_accepts_the_lowercase_hostname_label(prometheus_lowercase: str, repo_root: Path) -> None:
    """dcgm-exporter is renaming `Hostname` to `hostname`: the same dashboard finds a host labelled either way."""
    deadline = time.monotonic() + DEADLINE_S
    while not query(prometheus_lowercase, "DCGM_FI_DEV_GPU_TEMP"):
        assert time.monotonic() < deadline, f"nothing scraped within {DEADLINE_S:g} s"
        time.sleep(0.2)
    assert {r["metric"].get("hostname") for r in query(prometheus_lowercase, "DCGM_FI_DEV_GPU_TEMP")} == {LOWER_HOST}
    assert not query(prometheus_lowercase, 'DCGM_FI_DEV_GPU_TEMP{Hostname!=""}')
    _dashboard_finds_data(prometheus_lowercase, LOWER_HOST, repo_root)


#: The panel queries of NVIDIA's "NVIDIA DCGM Exporter Dashboard" (grafana.com 12239, dcgm-exporter's
#: grafana/dcgm-exporter-dashboard.json), with its $Hostname and $gpu variables; titles as the panels have them.
NVIDIA_PANELS = {
    "GPU Temperature": 'max(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)',
    "GPU Avg. Temp": 'avg(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"})',
    "GPU Power Usage": 'max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)',
    "GPU Power Total": 'sum(max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (gpu))',
    "GPU SM Clocks": 'max(DCGM_FI_DEV_SM_CLOCK{Hostname=~"$Hostname", gpu=~"$gpu"} * 1000000) by (Hostname, UUID, gpu)',
    "GPU Utilization": 'max(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) '
                       "by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)",
    "Tensor Core Utilization": 'max(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) '
                               "by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)",
    "GPU Framebuffer Mem Used": 'max(DCGM_FI_DEV_FB_USED{Hostname=~"$Hostname", gpu=~"$gpu"}) '
                                "by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)",
    # its variables
    "Hostname picker": "DCGM_FI_DEV_FB_FREE",
    "gpu picker": 'DCGM_FI_DEV_FB_FREE{Hostname=~"$Hostname"}',
}


def test_nvidia_dcgm_dashboard_panels_all_find_data(
    prometheus: str, fed_exporter: tuple[exporter.ExporterHandle, SimulatedBackend]
) -> None:
    """Every panel of NVIDIA's dcgm-exporter dashboard returns data for a Rigscope host: the Tensor Core and
    GPU Utilization panels from the simulated H100's GPM (DCGM_FI_PROF_*), which they were empty without."""
    _, backend = fed_exporter
    h100 = str(next(info.index for info in backend.devices() if info.gpm_supported))
    deadline = time.monotonic() + DEADLINE_S
    while not query(prometheus, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"):
        assert time.monotonic() < deadline, f"no profiling series within {DEADLINE_S:g} s"
        time.sleep(0.2)
    empty = [title for title, expr in NVIDIA_PANELS.items()
             if not query(prometheus, expr.replace("$Hostname", HOST).replace("$gpu", ".*"))]
    assert empty == []
    tensor = query(prometheus, NVIDIA_PANELS["Tensor Core Utilization"].replace("$Hostname", HOST).replace(
        "$gpu", h100))
    assert len(tensor) == 1 and 0.0 <= float(tensor[0]["value"][1]) <= 1.0  # a ratio, as the panel's unit
