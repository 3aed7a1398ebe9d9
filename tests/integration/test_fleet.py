"""`rigscope fleet` against a real Prometheus scraping two real `rigscope record --prometheus` processes and a
plain dcgm-exporter text target; a Prometheus with basic auth; dead, slow and non-Prometheus servers."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.tools import free_port, require_tool
from tests.waits import until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: Two Rigscope machines (their exporters run on this one host: Prometheus relabels their Hostname) and a
#: DCGM-only one; another DCGM-only one that a test switches off.
RIGS = {"rig-one": "rtx4090-laptop", "rig-two": "h100,h100"}
DCGM_HOST, GONE_HOST, MASK_HOST = "dcgm-node", "dcgm-gone", "dcgm-mask"
PASSWORD = "fleet-s3cret-pw"
#: bcrypt (cost 4) of PASSWORD, for Prometheus' --web.config.file.
PASSWORD_BCRYPT = "$2b$04$q3kIP2z12Y.6pAsJYt13P.6q41yUXBGCKtiacmC4oPB4jKZ2oYk2y"
TOKEN = "tok-9f8e7d6c5b4a-never-shown"


def _dcgm_page(host: str, uuid: str, mask_name: str = "") -> bytes:
    """dcgm-exporter's default counters for one GPU; with ``mask_name``, also its clock-event mask (power cap and HW
    thermal slowdown), as a counters file that lists it serves."""
    labels = f'gpu="0",UUID="{uuid}",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="{host}"'
    lines = [f"{mask_name}{{{labels}}} {0x4 | 0x40}"] if mask_name else []
    lines += [f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 61", f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} 312.5",
             f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 97", f"DCGM_FI_DEV_SM_CLOCK{{{labels}}} 1410",
             f"DCGM_FI_DEV_FB_USED{{{labels}}} 40000", f"DCGM_FI_DEV_FB_FREE{{{labels}}} 41920"]
    return ("\n".join(lines) + "\n").encode()


class _Server:
    """A tiny HTTP server on loopback answering every GET with ``answer()`` -> (status, content type, body)."""

    def __init__(self, answer: Callable[[], tuple[int, str, bytes]], trickle: bool = False) -> None:
        outer = self
        self.answer = answer
        self.release = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, kind, body = outer.answer()
                if status == 0:  # hold the request unanswered until the test ends
                    outer.release.wait(30.0)
                    return
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Trickle(Handler):
            def do_GET(self) -> None:  # headers at once, then a byte every 0.2 s until the test ends
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                while not outer.release.wait(0.2):
                    try:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                    except OSError:
                        return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle if trickle else Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name=f"tiny-{self.port}")
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10.0)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), RIGSCOPE_CONFIG_DIR=str(tmp / "config"),
               RIGSCOPE_DATA_DIR=str(tmp / "data"), RIGSCOPE_SYSFS_ROOT=str(tmp / "sys"))
    for key in ("RIGSCOPE_FLEET_TOKEN", "RIGSCOPE_FLEET_USER", "RIGSCOPE_FLEET_PASSWORD"):
        env.pop(key, None)
    return env | extra


def _start_prometheus(tmp: Path, scrape: str, web_config: str = "") -> tuple[subprocess.Popen[bytes], str]:
    binary = require_tool("prometheus", "prometheus")
    config = tmp / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n" + scrape)
    args = [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}"]
    if web_config:
        (tmp / "web.yml").write_text(web_config)
        args.append(f"--web.config.file={tmp / 'web.yml'}")
    port = free_port()
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen([*args, f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _result(base: str, promql: str) -> list[dict[str, Any]] | None:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return list(json.loads(response.read())["data"]["result"])
    except OSError:
        return None


def _count(base: str, promql: str) -> int:
    result = _result(base, promql)
    return -1 if result is None else len(result)


def fleet(url: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desktop", "fleet", "--prometheus", url, *args],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A Prometheus scraping two `rigscope record --simulate ... --prometheus` processes (1 GPU, 2 GPUs) and two
    dcgm-exporter text targets, once every series is in; yields its URL, the environment and the gone switch."""
    tmp = tmp_path_factory.mktemp("fleet")
    env = _env(tmp)
    recorders, ports = [], {}
    gone = {"up": True}
    dcgm = _Server(lambda: (200, "text/plain; version=0.0.4", _dcgm_page(DCGM_HOST, "GPU-dcgm-0000")))
    dcgm_mask = _Server(lambda: (200, "text/plain; version=0.0.4",
                                 _dcgm_page(MASK_HOST, "GPU-mask-0000", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")))
    dcgm_gone = _Server(lambda: (200, "text/plain; version=0.0.4", _dcgm_page(GONE_HOST, "GPU-gone-0000"))
                        if gone["up"] else (503, "text/plain", b"gone\n"))
    prometheus = None
    try:
        for host, profiles in RIGS.items():
            ports[host] = free_port()
            log = (tmp / f"{host}.log").open("wb")
            recorders.append(subprocess.Popen(
                [sys.executable, "-m", "desktop", "record", f"--simulate={profiles}", "--interval", "0.5",
                 "--db", str(tmp / f"{host}.sqlite"), "--prometheus", "--listen", f"127.0.0.1:{ports[host]}"],
                stdout=log, stderr=subprocess.STDOUT, env=env))
            log.close()
        # Both recorders run on this host, so both say its name: the scrape config gives each its own, as a
        # team would for two exporters behind one address.
        scrape = "".join(
            f"  - job_name: {host}\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
            f"    metric_relabel_configs:\n      - {{source_labels: [Hostname], regex: '.+', target_label: Hostname, "
            f"replacement: {host}}}\n" for host, port in ports.items())
        scrape += (f"  - job_name: dcgm\n    static_configs: [{{targets: ['127.0.0.1:{dcgm.port}', "
                   f"'127.0.0.1:{dcgm_gone.port}', '127.0.0.1:{dcgm_mask.port}']}}]\n")
        prometheus, base = _start_prometheus(tmp, scrape)

        def ready() -> bool:
            assert prometheus is not None and prometheus.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            for recorder, host in zip(recorders, RIGS, strict=True):
                assert recorder.poll() is None, (tmp / f"{host}.log").read_text()[-2000:]
            return (_count(base, "DCGM_FI_DEV_GPU_TEMP") == 6 and _count(base, "rigscope_info") == 2
                    and _count(base, "rigscope_recorder_up") == 2 and _count(base, "rigscope_power_limit_watts") == 3)

        until(ready, 90.0)
        yield {"url": base, "env": env, "gone": gone}
    finally:
        if prometheus is not None:
            _stop(prometheus)
        for recorder in recorders:
            _stop(recorder)
        dcgm.close()
        dcgm_gone.close()
        dcgm_mask.close()


def test_fleet_json_lists_every_machine_and_gpu_live(scraped: dict[str, Any]) -> None:
    result = fleet(scraped["url"], "--json", env=scraped["env"])
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    machines = {m["name"]: m for m in doc["machines"]}
    assert {"rig-one", "rig-two", DCGM_HOST} <= set(machines)
    # The "done when": the two Rigscope exporters are 2 machines with 3 GPUs.
    rigscope = [m for m in doc["machines"] if m["source"] == "rigscope"]
    assert sorted(m["name"] for m in rigscope) == ["rig-one", "rig-two"]
    assert sum(len(m["gpus"]) for m in rigscope) == 3
    assert [len(machines[h]["gpus"]) for h in ("rig-one", "rig-two", DCGM_HOST)] == [1, 2, 1]
    for machine in rigscope:
        assert machine["live"] and machine["recorder_up"] is True and machine["data_source"] == "simulated"
        assert machine["missing"] == []
        for gpu in machine["gpus"]:
            assert gpu["uuid"].startswith("GPU-") and gpu["live"]
            assert 15.0 <= gpu["temperature_c"] <= 110.0
            assert 0.0 < gpu["power_w"] <= 1.05 * gpu["power_limit_w"]
            assert gpu["sm_clock_max_mhz"] > 0 and gpu["vram_total_mib"] > 0
            assert isinstance(gpu["throttle_reasons"], list) and gpu["throttled"] == bool(gpu["throttle_reasons"])
            assert gpu["last_seen_s"] > doc["queried_at_s"] - 30.0
    models = sorted(g["model"] for m in rigscope for g in m["gpus"])
    assert models == ["NVIDIA GeForce RTX 4090 Laptop GPU (simulated)", "NVIDIA H100 80GB HBM3 (simulated)",
                      "NVIDIA H100 80GB HBM3 (simulated)"]
    dcgm_only = machines[DCGM_HOST]
    assert dcgm_only["source"] == "dcgm" and dcgm_only["recorder_up"] is None and dcgm_only["missing"]
    (gpu,) = dcgm_only["gpus"]
    assert (gpu["uuid"], gpu["temperature_c"], gpu["power_w"], gpu["vram_total_mib"]) == ("GPU-dcgm-0000", 61.0,
                                                                                            312.5, 81920.0)
    assert gpu["power_limit_w"] is None and gpu["throttle_reasons"] is None and gpu["throttled"] is None
    # A dcgm-exporter that serves the clock-event mask (here under its pre-3.3 name): throttling is known.
    masked = machines[MASK_HOST]
    assert masked["source"] == "dcgm" and "throttle reasons" not in masked["missing"]
    assert masked["gpus"][0]["throttle_reasons"] == ["hw_thermal_slowdown", "sw_power_cap"]
    assert "throttled" in masked["attention"]
    # One request per metric, whatever the number of machines.
    assert doc["requests"] == len(_queries())


def _queries() -> dict[str, str]:
    from desktop.fleet.reader import GPU_QUERIES, HOST_QUERIES

    return GPU_QUERIES | HOST_QUERIES


def test_query_range_reads_each_gpus_recent_points(scraped: dict[str, Any]) -> None:
    """The client's range query (for the Fleet page's plots) against the real server: per GPU its points."""
    from desktop.fleet.client import Connection, PrometheusClient
    from desktop.telemetry.metric_names import dcgm_name

    with PrometheusClient(Connection(scraped["url"])) as client:
        now_s = client.query("time()")[0].value  # the server's clock
        series = client.query_range(dcgm_name("power_w"), now_s - 5.0, now_s, 1.0)
    hosts = sorted(labels["Hostname"] for labels, _ in series)
    assert {"rig-one", "rig-two", DCGM_HOST} <= set(hosts) and hosts.count("rig-two") == 2
    for _, points in series:
        assert points and all(now_s - 5.0 <= t <= now_s and v >= 0.0 for t, v in points)


def test_fleet_table_says_what_a_dcgm_only_machine_lacks(scraped: dict[str, Any]) -> None:
    result = fleet(scraped["url"], env=scraped["env"])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "rig-one" in out and "rig-two" in out and f"{DCGM_HOST} (DCGM only)" in out
    assert f"{DCGM_HOST}: DCGM only (dcgm-exporter): no throttle reasons" in out
    assert "writing" in out and "W" in out and "°C" in out


def test_a_machine_that_stops_answering_is_listed_first_as_down(scraped: dict[str, Any]) -> None:
    from desktop.fleet.reader import GPU_QUERIES

    url, env = scraped["url"], scraped["env"]
    # "Last seen" of a machine that stopped answering has the lookback's resolution (15 s steps): wait until
    # one step has seen it, as a machine up for longer than that has been.
    until(lambda: GONE_HOST in json.dumps(_result(url, GPU_QUERIES["last_seen_s"].split(" or ")[1])), 60.0)
    scraped["gone"]["up"] = False

    seen: list[str] = []

    def gone_is_down() -> bool:
        result = fleet(url, "--json", env=env)
        assert result.returncode == 0, result.stderr
        seen[:] = [result.stdout]
        first = json.loads(result.stdout)["machines"][0]
        return bool(first["name"] == GONE_HOST and "down" in first["attention"])

    try:
        until(gone_is_down, 60.0)
    except AssertionError:
        pytest.fail(f"{GONE_HOST} not listed first as down: {seen}")
    doc = json.loads(fleet(url, "--json", env=env).stdout)
    gone = doc["machines"][0]
    assert gone["live"] is False and gone["last_seen_s"] is not None
    assert gone["gpus"][0]["temperature_c"] is None  # no reading now: not the last one passed off as live
    assert all(m["live"] for m in doc["machines"][1:])


def _one_line_exit_2(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rigscope fleet: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    return lines[0]


def test_a_dead_url_is_one_line_exit_2(tmp_path: Path) -> None:
    line = _one_line_exit_2(fleet(f"http://127.0.0.1:{free_port()}", env=_env(tmp_path)))
    assert "cannot reach Prometheus at http://127.0.0.1:" in line


def test_a_bad_url_is_one_line_exit_2(tmp_path: Path) -> None:
    line = _one_line_exit_2(fleet("prometheus:9090", env=_env(tmp_path)))
    assert "is not a Prometheus URL" in line


def test_a_slow_server_times_out_in_one_line(tmp_path: Path) -> None:
    server = _Server(lambda: (0, "", b""))
    try:
        line = _one_line_exit_2(fleet(server.url, "--timeout", "0.5", env=_env(tmp_path)))
    finally:
        server.close()
    assert "did not answer within 0.5 s" in line


def test_a_server_that_trickles_its_answer_is_cut_off_at_the_timeout(tmp_path: Path) -> None:
    """Every read gets a byte within httpx's per-read timeout; the whole answer still has --timeout S."""
    server = _Server(lambda: (200, "", b""), trickle=True)
    try:
        line = _one_line_exit_2(fleet(server.url, "--timeout", "1", env=_env(tmp_path)))
    finally:
        server.close()
    assert "did not answer within 1 s" in line


def test_a_server_that_is_not_prometheus_is_one_line(tmp_path: Path) -> None:
    server = _Server(lambda: (200, "text/html", b"<html>Grafana</html>"))
    try:
        line = _one_line_exit_2(fleet(server.url, env=_env(tmp_path)))
    finally:
        server.close()
    assert "did not answer as a Prometheus server (HTTP 200, text/html)" in line


def test_an_empty_prometheus_is_one_line(tmp_path: Path) -> None:
    empty = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    server = _Server(lambda: (200, "application/json", empty))
    try:
        line = _one_line_exit_2(fleet(server.url, env=_env(tmp_path)))
    finally:
        server.close()
    assert "has no GPU series" in line


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus behind basic auth (--web.config.file), scraping nothing but the DCGM text target."""
    tmp = tmp_path_factory.mktemp("guarded")
    dcgm = _Server(lambda: (200, "text/plain; version=0.0.4", _dcgm_page(DCGM_HOST, "GPU-dcgm-0000")))
    proc, base = _start_prometheus(
        tmp, f"  - job_name: dcgm\n    static_configs: [{{targets: ['127.0.0.1:{dcgm.port}']}}]\n",
        web_config=f"basic_auth_users:\n  fleet: '{PASSWORD_BCRYPT}'\n")
    try:
        def answers_401() -> bool:
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            try:
                urllib.request.urlopen(f"{base}/-/ready", timeout=5)
            except urllib.error.HTTPError as exc:
                return exc.code == 401
            except OSError:
                return False
            return False

        until(answers_401, 60.0)
        yield base
    finally:
        _stop(proc)
        dcgm.close()


def test_basic_auth_from_the_environment_reads_the_guarded_prometheus(guarded: str, tmp_path: Path) -> None:
    env = _env(tmp_path, RIGSCOPE_FLEET_USER="fleet", RIGSCOPE_FLEET_PASSWORD=PASSWORD)

    def scraped_once() -> bool:
        result = fleet(guarded, "--json", env=env)
        return result.returncode == 0 and DCGM_HOST in result.stdout

    until(scraped_once, 60.0)
    result = fleet(guarded, "--json", env=env)
    assert [m["name"] for m in json.loads(result.stdout)["machines"]] == [DCGM_HOST]
    assert PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize("creds", [{}, {"RIGSCOPE_FLEET_TOKEN": TOKEN},
                                   {"RIGSCOPE_FLEET_USER": "fleet", "RIGSCOPE_FLEET_PASSWORD": TOKEN}])
def test_a_401_is_one_line_and_never_shows_the_secret(guarded: str, tmp_path: Path, creds: dict[str, str]) -> None:
    line = _one_line_exit_2(fleet(guarded, "--json", env=_env(tmp_path, **creds)))
    assert "answered HTTP 401" in line and TOKEN not in line
    if not creds:
        assert "RIGSCOPE_FLEET_TOKEN" in line  # how to give credentials


def test_verbose_logging_never_writes_the_token(guarded: str, tmp_path: Path) -> None:
    """`rigscope -v` logs every request (httpx at INFO, the rest at DEBUG): the token is in none of it."""
    result = subprocess.run([sys.executable, "-m", "desktop", "-v", "fleet", "--prometheus", guarded, "--json"],
                            capture_output=True, text=True, env=_env(tmp_path, RIGSCOPE_FLEET_TOKEN=TOKEN),
                            timeout=120, check=False)
    assert result.returncode == 2 and "answered HTTP 401" in result.stderr
    assert "HTTP Request: GET" in result.stderr  # the logging did run
    assert TOKEN not in result.stdout + result.stderr


@pytest.fixture(scope="module")
def tls_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real Prometheus serving HTTPS with a self-signed certificate for 127.0.0.1 (openssl); yields its URL and
    the certificate, once it answers."""
    import ssl

    openssl = require_tool("openssl", "openssl")
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    dcgm = _Server(lambda: (200, "text/plain; version=0.0.4", _dcgm_page(DCGM_HOST, "GPU-dcgm-0000")))
    proc, base = _start_prometheus(
        tmp, f"  - job_name: dcgm\n    static_configs: [{{targets: ['127.0.0.1:{dcgm.port}']}}]\n",
        web_config=f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    url = base.replace("http://", "https://")
    context = ssl.create_default_context(cafile=str(cert))
    try:
        def answers() -> bool:
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5, context=context) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        until(answers, 60.0)
        yield url, cert
    finally:
        _stop(proc)
        dcgm.close()


def test_an_unverifiable_certificate_is_one_line_and_a_ca_file_reads_it(tls_prometheus: tuple[str, Path],
                                                                       tmp_path: Path) -> None:
    url, cert = tls_prometheus
    line = _one_line_exit_2(fleet(url, env=_env(tmp_path)))
    assert f"cannot reach Prometheus at {url}: its TLS certificate could not be verified" in line
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.toml").write_text(f'[fleet]\nca_file = "{cert}"\n')

    def read() -> bool:
        result = fleet(url, "--json", env=_env(tmp_path))
        assert result.returncode in (0, 2), result.stderr
        return result.returncode == 0 and DCGM_HOST in result.stdout

    until(read, 60.0)  # verified against the CA file, once Prometheus has scraped the target
