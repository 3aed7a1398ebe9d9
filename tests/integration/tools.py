"""Integration-test helper: find an external program, or skip (locally) / fail (in CI) with the install hint."""

from __future__ import annotations

import os
import shutil
import socket

import pytest


def require_tool(name: str, debian_package: str) -> str:
    """The path of ``name``; without it, fail when $CI is set (CI installs it) and skip otherwise."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} not found: install it with `apt-get install {debian_package}` (or `make sysdeps`)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    """A TCP port free on loopback right now (for programs that cannot be told to pick one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
