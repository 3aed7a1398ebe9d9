"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``) over httpx.

Every failure the user can fix (no answer, a refusal of the credentials, an answer that is not
Prometheus', a bad URL, a timeout) is a ``FleetError`` (a ``UserError``: one line, exit 2) whose text
names the server without its credentials and never holds a secret; every request is counted, so the
reader's "one query per metric, never one per machine" can be checked.
"""

from __future__ import annotations

import json
import math
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from advisor.safetext import printable
from desktop.errors import UserError

#: Seconds a request may take, its whole answer included, unless told otherwise (settings ``fleet.timeout_s``,
#: ``--timeout``).
DEFAULT_TIMEOUT_S = 5.0
#: The largest answer read (a 50 x 8 GPU fleet answers a few hundred kB per query).
MAX_RESPONSE_BYTES = 64 << 20


class FleetError(UserError):
    """The Prometheus server could not be read; the message says why, without credentials."""


@dataclass(frozen=True)
class Credentials:
    """Basic auth (user and password) or a bearer token; the secret is never in its repr."""

    kind: Literal["basic", "bearer"]
    user: str = ""
    secret: str = field(default="", repr=False)
    #: Where the secret came from (an environment variable or a settings key), for messages.
    origin: str = ""

    def headers(self) -> dict[str, str]:
        if self.kind == "bearer":
            return {"Authorization": f"Bearer {self.secret}"}
        return {}

    def basic(self) -> tuple[str, str] | None:
        return (self.user, self.secret) if self.kind == "basic" else None


@dataclass(frozen=True)
class Connection:
    """Where the Prometheus server is and how to talk to it."""

    url: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: True: verify TLS against the system's CAs; a path: against that CA bundle; False: do not verify.
    verify: bool | str = True
    credentials: Credentials | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant query's answer: its labels and its value at ``time_s``."""

    labels: dict[str, str]
    value: float
    time_s: float


def check_url(url: str) -> str:
    """``url`` without a trailing slash when it is an http(s) URL with a host; FleetError otherwise."""
    text = url.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:  # a port out of range or not a number, a bad IPv6 literal
        ok = False
    if not ok:
        raise FleetError(f"{shown_url(text)!r} is not a Prometheus URL: give http://HOST:PORT or https://HOST:PORT, "
                         "e.g. http://prometheus:9090")
    if "@" in parts.netloc:  # a secret in a URL ends up in shell history, settings and logs
        raise FleetError(f"{shown_url(text)!r}: give no user or password in the URL; use RIGSCOPE_FLEET_USER and "
                         "RIGSCOPE_FLEET_PASSWORD, or fleet.user and fleet.password_file in settings")
    return text.rstrip("/")


def shown_url(url: str) -> str:
    """``url`` as messages show it: no user, password, query or fragment, escaped for a terminal."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port is not None else "")
        text = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")) if parts.scheme else url
    except ValueError:
        text = url.rsplit("@", maxsplit=1)[-1].split("?", maxsplit=1)[0]
    return printable(text)


def _number(text: Any) -> float:
    """A Prometheus sample value ("1.5", "NaN", "+Inf") as a float; NaN for anything else."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


class PrometheusClient:
    """Instant and range queries against one Prometheus-compatible server (Thanos, Mimir, VictoriaMetrics too)."""

    def __init__(self, connection: Connection, *, transport: httpx.BaseTransport | None = None,
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.connection = connection
        self.max_response_bytes = max_response_bytes
        self.base_url = check_url(connection.url)
        self.shown = shown_url(self.base_url)
        self.requests = 0
        #: Bytes of every answer read so far (the scale benchmark's figure).
        self.bytes_received = 0
        creds = connection.credentials
        self._secrets = [s for s in (creds.secret if creds else "",) if s]
        verify: bool | ssl.SSLContext = connection.verify if isinstance(connection.verify, bool) else True
        if isinstance(connection.verify, str):
            try:
                verify = ssl.create_default_context(cafile=connection.verify)
            except (OSError, ssl.SSLError) as exc:  # the CA bundle: missing, unreadable, not certificates
                why = exc.strerror or exc  # an SSLError is an OSError too
                raise FleetError(f"fleet.ca_file: cannot use {printable(connection.verify)} as CA certificates: "
                                 f"{printable(str(why))}") from exc
        self._client = httpx.Client(
            timeout=connection.timeout_s, verify=verify, transport=transport,
            auth=creds.basic() if creds else None, headers=creds.headers() if creds else None,
            follow_redirects=False, trust_env=False)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, promql: str, at_s: float | None = None) -> list[Sample]:
        """An instant query: every series of the answer (``vector``), or the one ``scalar``."""
        params = {"query": promql} | ({"time": f"{at_s:.3f}"} if at_s is not None else {})
        data = self._get("/api/v1/query", params, promql)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list) and len(result) == 2:
            return [Sample({}, _number(result[1]), _number(result[0]))]
        if kind != "vector" or not isinstance(result, list):
            raise self._not_prometheus(f"an answer of type {printable(str(kind))!r} to an instant query")
        return [self._sample(row) for row in result]

    def query_range(self, promql: str, start_s: float, end_s: float, step_s: float) -> list[tuple[dict[str, str],
                                                                                                   list[tuple[float,
                                                                                                              float]]]]:
        """A range query: per series its labels and its (time_s, value) points."""
        params = {"query": promql, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}", "step": f"{step_s:g}"}
        data = self._get("/api/v1/query_range", params, promql)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise self._not_prometheus("an answer that is not a matrix to a range query")
        out = []
        for row in result:
            if not isinstance(row, dict) or not isinstance(row.get("values"), list):
                raise self._not_prometheus("a series without values")
            points = [(_number(p[0]), _number(p[1])) for p in row["values"] if isinstance(p, list) and len(p) == 2]
            out.append((self._labels(row), points))
        return out

    # --- one request ---------------------------------------------------------------------------

    def _get(self, path: str, params: dict[str, str], promql: str) -> dict[str, Any]:
        self.requests += 1
        response, body = self._fetch(path, params, promql)
        if response.status_code in (401, 403):
            raise FleetError(self._refused(response.status_code))
        payload = self._json(body)
        if payload is None or not isinstance(payload.get("status"), str):
            what = response.headers.get("content-type", "no content type").split(";")[0]
            raise self._not_prometheus(f"HTTP {response.status_code}, {printable(what)}")
        if payload["status"] != "success":
            error = printable(self._scrub(str(payload.get("error", "no reason given"))))
            raise FleetError(f"Prometheus at {self.shown} refused the query {printable(promql)!r} "
                             f"(HTTP {response.status_code}): {error}")
        data = payload.get("data")
        if not isinstance(data, dict):
            raise self._not_prometheus("a success without data")
        return data

    def _fetch(self, path: str, params: dict[str, str], promql: str) -> tuple[httpx.Response, bytes]:
        """The response and its whole body, or FleetError: unreachable, too slow, too large."""
        slow = FleetError(f"Prometheus at {self.shown} did not answer within {self.connection.timeout_s:g} s "
                          "(--timeout S, settings fleet.timeout_s)")
        # httpx's timeout bounds each read; the deadline bounds the whole answer (a server trickling a byte a
        # second would pass every read), and the cap its size, both checked as it arrives.
        deadline = time.monotonic() + self.connection.timeout_s
        try:
            with self._client.stream("GET", self.base_url + path, params=params) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    self.bytes_received += len(chunk)
                    if size > self.max_response_bytes:
                        raise FleetError(f"Prometheus at {self.shown} answered more than "
                                         f"{self.max_response_bytes:,} bytes to {printable(promql)!r}")
                    if time.monotonic() > deadline:
                        raise slow
                    chunks.append(chunk)
                return response, b"".join(chunks)
        except httpx.TimeoutException as exc:
            raise slow from exc
        except httpx.HTTPError as exc:
            raise FleetError(f"cannot reach Prometheus at {self.shown}: {self._why(exc)}") from exc
        except (httpx.InvalidURL, UnicodeError) as exc:  # a host name the resolver cannot encode ("a..b")
            raise FleetError(f"cannot reach Prometheus at {self.shown}: not a valid host name "
                             f"({printable(str(exc))})") from exc

    def _refused(self, status: int) -> str:
        creds = self.connection.credentials
        if creds is None:
            hint = ("it wants credentials: set RIGSCOPE_FLEET_TOKEN (bearer) or RIGSCOPE_FLEET_USER and "
                    "RIGSCOPE_FLEET_PASSWORD, or fleet.token_file / fleet.user and fleet.password_file in settings")
        else:
            hint = f"it refused the {'token' if creds.kind == 'bearer' else 'user and password'} from {creds.origin}"
        return f"Prometheus at {self.shown} answered HTTP {status}: {hint}"

    def _not_prometheus(self, what: str) -> FleetError:
        return FleetError(f"{self.shown} did not answer as a Prometheus server ({what}); is it the server's "
                          "base URL, e.g. http://prometheus:9090?")

    @staticmethod
    def _json(body: bytes) -> dict[str, Any] | None:
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return payload if isinstance(payload, dict) else None

    def _why(self, exc: httpx.HTTPError) -> str:
        cause: BaseException | None = exc
        while cause is not None and cause.__cause__ is not None and cause is not cause.__cause__:
            cause = cause.__cause__
        text = str(cause or exc) or type(exc).__name__
        if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
            text = "its TLS certificate could not be verified (settings fleet.ca_file, or fleet.tls_verify = false)"
        return printable(self._scrub(text))

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _sample(self, row: Any) -> Sample:
        value = row.get("value") if isinstance(row, dict) else None
        if not isinstance(value, list) or len(value) != 2:
            raise self._not_prometheus("a series without a value")
        return Sample(self._labels(row), _number(value[1]), _number(value[0]))

    def _labels(self, row: dict[str, Any]) -> dict[str, str]:
        metric = row.get("metric")
        if not isinstance(metric, dict):
            raise self._not_prometheus("a series without labels")
        return {str(k): str(v) for k, v in metric.items()}

