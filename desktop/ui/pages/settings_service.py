"""Start at login for the Settings page: turn the recorder service on or off and read what the service manager says.

Both run on the page's worker thread (``systemctl`` or ``schtasks`` can take seconds). Neither raises: a refusal
comes back as its words, a state nobody can read as None (the page then goes by the settings file).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from desktop.config import Settings
from desktop.service import ServiceStatus

log = logging.getLogger(__name__)

StatusSource = Callable[[], ServiceStatus]


def change_service(service: Callable[[bool], None], enable: bool,
                   status: StatusSource | None) -> tuple[str, ServiceStatus | None]:
    """Turn start at login on or off (worker thread): why it failed ("" when it did not), and the state after."""
    try:
        service(enable)
        refused = ""
    except Exception as exc:  # systemd/Task Scheduler refused, or did only part: the state read below says which
        refused = str(exc)
    return refused, read_status(status)


def read_status(status: StatusSource | None) -> ServiceStatus | None:
    """What the service manager says (worker thread); None without one to ask, or when it cannot tell."""
    if status is None:
        return None
    try:
        return status()
    except Exception as exc:  # an unsupported platform, an unreadable unit: the page goes by the settings file
        log.info("start-at-login status unknown: %s", exc)
        return None


def default_service() -> Callable[[bool], None]:
    """``desktop.service`` install/uninstall."""
    from desktop import service

    def apply(enable: bool) -> None:
        (service.install if enable else service.uninstall)()

    return apply


def with_start_at_login(settings: Settings, on: bool) -> Settings:
    """``settings`` with start at login ``on``: saved as the service manager left it."""
    return dataclasses.replace(settings, startup=dataclasses.replace(settings.startup, start_at_login=on))
