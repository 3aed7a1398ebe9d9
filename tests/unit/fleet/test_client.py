"""The Prometheus client's errors (one line, no secret), its credentials, and the [fleet] settings."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from desktop import config
from desktop.fleet.client import Connection, Credentials, FleetError, PrometheusClient, check_url, shown_url
from desktop.fleet.connect import connection_from

SECRET = "s3cr3t-never-in-a-message"
OK = {"status": "success", "data": {"resultType": "vector", "result": []}}


def _client(answer: httpx.Response, credentials: Credentials | None = None,
            seen: list[httpx.Request] | None = None) -> PrometheusClient:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return answer

    return PrometheusClient(Connection("http://prom.test:9090/", credentials=credentials),
                            transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("url", ["prometheus:9090", "ftp://prom:9090", "http://", "http://prom:99999", "", "http://[::1"])
def test_a_bad_url_is_refused_in_one_line(url: str) -> None:
    with pytest.raises(FleetError, match="is not a Prometheus URL") as caught:
        check_url(url)
    assert "\n" not in str(caught.value)


def test_the_url_shown_has_no_credentials_or_query() -> None:
    assert shown_url(f"https://bob:{SECRET}@prom.example:9090/api?token={SECRET}") == "https://prom.example:9090/api"


def test_bearer_and_basic_credentials_are_sent() -> None:
    seen: list[httpx.Request] = []
    with _client(httpx.Response(200, json=OK), Credentials("bearer", secret=SECRET, origin="env"), seen) as client:
        assert client.query("up") == []
    with _client(httpx.Response(200, json=OK), Credentials("basic", "bob", SECRET, "env"), seen) as client:
        client.query("up")
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"
    assert seen[1].headers["authorization"] == "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()
    assert SECRET not in repr(Credentials("bearer", secret=SECRET))


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_names_where_the_secret_came_from_never_the_secret(status: int) -> None:
    creds = Credentials("bearer", secret=SECRET, origin="RIGSCOPE_FLEET_TOKEN")
    with _client(httpx.Response(status, text=f"bad token {SECRET}"), creds) as client, \
            pytest.raises(FleetError) as caught:
        client.query("up")
    message = str(caught.value)
    assert f"answered HTTP {status}" in message and "RIGSCOPE_FLEET_TOKEN" in message and SECRET not in message


def test_an_error_the_server_quotes_the_secret_in_is_scrubbed() -> None:
    creds = Credentials("bearer", secret=SECRET, origin="env")
    body = {"status": "error", "errorType": "bad_data", "error": f"parse error near {SECRET}"}
    with _client(httpx.Response(400, json=body), creds) as client, pytest.raises(FleetError) as caught:
        client.query("up{")
    assert "refused the query 'up{' (HTTP 400): parse error near ***" in str(caught.value)


@pytest.mark.parametrize("answer", [httpx.Response(200, text="<html>login</html>",
                                                   headers={"content-type": "text/html"}),
                                    httpx.Response(200, json=[1, 2]), httpx.Response(404, text="404 page not found"),
                                    httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix",
                                                                                            "result": []}})])
def test_an_answer_that_is_not_prometheus_is_one_line(answer: httpx.Response) -> None:
    with _client(answer) as client, pytest.raises(FleetError, match="did not answer as a Prometheus server"):
        client.query("up")


def test_the_environment_comes_before_the_settings(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    settings = config.FleetSettings(url="http://prom:9090", token_file=str(token_file))
    env_token = connection_from(settings, environ={"RIGSCOPE_FLEET_TOKEN": "from-env"}).credentials
    assert env_token == Credentials("bearer", secret="from-env", origin="RIGSCOPE_FLEET_TOKEN")
    basic = connection_from(settings, environ={"RIGSCOPE_FLEET_USER": "u", "RIGSCOPE_FLEET_PASSWORD": "p"})
    assert basic.credentials is not None and basic.credentials.basic() == ("u", "p")
    from_file = connection_from(settings, environ={})
    assert from_file.credentials is not None and from_file.credentials.secret == "from-file"
    assert from_file.url == "http://prom:9090" and from_file.timeout_s == 5.0 and from_file.verify is True


def test_the_flag_comes_before_the_settings_url_and_a_ca_file_is_verified_against() -> None:
    settings = config.FleetSettings(url="http://from-settings:9090", ca_file="/etc/ca.pem", timeout_s=2.0)
    connection = connection_from(settings, url="https://from-flag:9090/", timeout_s=9.0, environ={})
    assert (connection.url, connection.timeout_s, connection.verify) == ("https://from-flag:9090", 9.0, "/etc/ca.pem")
    insecure = connection_from(config.FleetSettings(url="https://p:1", tls_verify=False, ca_file="/x"), environ={})
    assert insecure.verify is False


def test_no_url_anywhere_says_how_to_give_one() -> None:
    with pytest.raises(FleetError, match="pass --prometheus URL or set url under \\[fleet\\]"):
        connection_from(config.FleetSettings(), environ={})


def test_half_given_credentials_are_one_line_without_the_secret(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="needs both RIGSCOPE_FLEET_USER and RIGSCOPE_FLEET_PASSWORD"):
        connection_from(config.FleetSettings(url="http://p:1"), environ={"RIGSCOPE_FLEET_PASSWORD": SECRET})
    with pytest.raises(FleetError, match=r"fleet\.user is set without fleet\.password_file"):
        connection_from(config.FleetSettings(url="http://p:1", user="bob"), environ={})
    missing = tmp_path / "nope"
    with pytest.raises(FleetError, match=f"fleet.password_file: cannot read {missing}"):
        connection_from(config.FleetSettings(url="http://p:1", user="bob", password_file=str(missing)), environ={})
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(FleetError, match=r"fleet\.token_file: .* is empty"):
        connection_from(config.FleetSettings(url="http://p:1", token_file=str(empty)), environ={})


def test_fleet_settings_take_long_or_empty_text_and_keep_the_currency_short() -> None:
    url = "https://prometheus.monitoring.internal.example.com:9090/prometheus"
    settings, problems = config.validate({"fleet": {"url": url, "user": "", "timeout_s": 12}})
    assert problems == [] and settings is not None
    assert (settings.fleet.url, settings.fleet.user, settings.fleet.timeout_s) == (url, "", 12.0)
    _, problems = config.validate({"fleet": {"timeout_s": 0}, "costs": {"currency": "X" * 17}})
    assert dict(problems) == {"fleet.timeout_s": "must be between 0.1 and 300",
                              "costs.currency": "must be at most 16 characters"}
    _, problems = config.validate({"fleet": {"url": "http://p:1\n"}})
    assert dict(problems)["fleet.url"].startswith("must not contain control characters")
    round_trip = config.from_mapping(config.to_mapping(config.Settings()))
    assert round_trip == (config.Settings(), [])


def test_a_ca_file_that_is_missing_or_not_certificates_is_one_line(tmp_path: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    for path, why in ((tmp_path / "none.pem", "No such file or directory"), (garbage, "NO_CERTIFICATE_OR_CRL_FOUND")):
        with pytest.raises(FleetError) as caught:
            PrometheusClient(Connection("https://prom:9090", verify=str(path)))
        message = str(caught.value)
        assert message.startswith(f"fleet.ca_file: cannot use {path} as CA certificates: ") and why in message
        assert "\n" not in message


@pytest.mark.parametrize("url", ["http://a..b:9090", "http://" + "a" * 300 + ".com"])
def test_a_host_name_the_resolver_cannot_encode_is_one_line(url: str) -> None:
    with PrometheusClient(Connection(url, timeout_s=1.0)) as client, \
            pytest.raises(FleetError, match="not a valid host name") as caught:
        client.query("up")
    assert "\n" not in str(caught.value)


def test_an_answer_past_the_cap_is_one_line_and_not_read_whole() -> None:
    sent = {"chunks": 0}

    def endless() -> Iterator[bytes]:
        while True:
            sent["chunks"] += 1
            yield b"x" * 1000

    client = PrometheusClient(Connection("http://prom.test:9090"), max_response_bytes=10_000,
                              transport=httpx.MockTransport(lambda request: httpx.Response(200, content=endless())))
    with client, pytest.raises(FleetError, match=r"answered more than 10,000 bytes to 'up'"):
        client.query("up")
    assert sent["chunks"] <= 12
