"""From settings ``[fleet]``, the environment and the command line to a ``Connection`` (secrets by reference)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from desktop.config import FleetSettings
from desktop.fleet.client import Connection, Credentials, FleetError, check_url
from desktop.safeio import read_bounded

TOKEN_ENV = "RIGSCOPE_FLEET_TOKEN"
USER_ENV = "RIGSCOPE_FLEET_USER"
PASSWORD_ENV = "RIGSCOPE_FLEET_PASSWORD"
#: A token or password file is a line; anything past this is not one.
MAX_SECRET_BYTES = 64 << 10


def connection_from(settings: FleetSettings, *, url: str | None = None, timeout_s: float | None = None,
                    environ: Mapping[str, str] | None = None) -> Connection:
    """The connection ``rigscope fleet`` uses: the URL and timeout given, else the settings'; credentials from
    the environment first (RIGSCOPE_FLEET_TOKEN, else RIGSCOPE_FLEET_USER + RIGSCOPE_FLEET_PASSWORD), else
    the settings' token file, else their user and password file."""
    env = os.environ if environ is None else environ
    chosen = url if url is not None else settings.url
    if not chosen.strip():
        raise FleetError("no Prometheus server given: pass --prometheus URL or set url under [fleet] in settings")
    verify: bool | str = settings.tls_verify
    if settings.ca_file and settings.tls_verify:
        verify = os.path.expanduser(settings.ca_file)
    return Connection(check_url(chosen), timeout_s if timeout_s is not None else settings.timeout_s, verify,
                      credentials_from(settings, env))


def credentials_from(settings: FleetSettings, env: Mapping[str, str]) -> Credentials | None:
    if env.get(TOKEN_ENV):
        return Credentials("bearer", secret=env[TOKEN_ENV].strip(), origin=TOKEN_ENV)
    if env.get(USER_ENV) or env.get(PASSWORD_ENV):
        if not (env.get(USER_ENV) and env.get(PASSWORD_ENV)):
            raise FleetError(f"basic auth needs both {USER_ENV} and {PASSWORD_ENV} in the environment")
        return Credentials("basic", env[USER_ENV], env[PASSWORD_ENV], f"{USER_ENV}/{PASSWORD_ENV}")
    if settings.token_file:
        return Credentials("bearer", secret=_secret(settings.token_file, "fleet.token_file"),
                           origin="fleet.token_file")
    if settings.user:
        if not settings.password_file:
            raise FleetError("fleet.user is set without fleet.password_file (the file that holds the password)")
        return Credentials("basic", settings.user, _secret(settings.password_file, "fleet.password_file"),
                           "fleet.user/fleet.password_file")
    return None


def _secret(path: str, key: str) -> str:
    """The first line of the file at ``path`` (the secret itself never appears in the error)."""
    try:
        raw = read_bounded(Path(path).expanduser(), MAX_SECRET_BYTES)
    except OSError as exc:
        raise FleetError(f"{key}: cannot read {path}: {exc.strerror or exc}") from exc
    lines = raw.decode("utf-8", "replace").strip().splitlines()
    if not lines or not lines[0].strip():
        raise FleetError(f"{key}: {path} is empty")
    return lines[0].strip()
