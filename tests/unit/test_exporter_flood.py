"""Issue 34 item 8: idle clients cost the exporter no thread, are closed after a few seconds, and a scrape
during a flood of them still answers (real sockets, loopback only)."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

from desktop.exporter import start_exporter
from desktop.exporter.server import CONNECTION_TIMEOUT_S, MAX_HANDLERS, SERVE_DEADLINE_S

assert CONNECTION_TIMEOUT_S < 35.0  # the test waits 35 s for the idle clients to be closed

IDLE_CLIENTS = 80


def _closed_by_server(sock: socket.socket, deadline: float) -> bool:
    """Whether the server closed ``sock`` (EOF or reset) before ``deadline``; nothing is ever sent on it."""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
        try:
            if sock.recv(1) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset: closed too
            return True
    return False


def test_80_idle_clients_leave_at_most_20_threads_and_a_scrape_still_answers() -> None:
    before = threading.active_count()
    with start_exporter("127.0.0.1:0") as handle:
        idle: list[socket.socket] = []
        try:
            for _ in range(IDLE_CLIENTS):  # connected, and never a byte sent: a half-open scraper
                idle.append(socket.create_connection(("127.0.0.1", handle.port), timeout=10.0))
            started = time.monotonic()
            with urllib.request.urlopen(handle.url, timeout=30.0) as response:
                response.read()
            assert response.status == 200
            # The idle ones are closed by the server after its per-connection timeout; wait for that itself.
            deadline = started + 35.0
            closed = sum(_closed_by_server(sock, deadline) for sock in idle)
            assert closed == IDLE_CLIENTS
            threads = threading.active_count() - before
            assert threads <= 20, f"{threads} threads for {IDLE_CLIENTS} idle clients"
        finally:
            for sock in idle:
                sock.close()


def test_clients_trickling_their_requests_cannot_hold_every_handler() -> None:
    """A byte each second never trips a per-read timeout; the whole connection's deadline frees the handler."""
    with start_exporter("127.0.0.1:0") as handle:
        trickling = [socket.create_connection(("127.0.0.1", handle.port), timeout=10.0)
                     for _ in range(MAX_HANDLERS + 2)]
        try:
            stop = threading.Event()

            def trickle() -> None:
                for sock in trickling:
                    sock.sendall(b"GET /metrics HTTP/1.1\r\n")
                while not stop.wait(1.0):  # a header line a second, never the blank line that ends them
                    for sock in trickling:
                        try:
                            sock.sendall(b"X-Slow: 1\r\n")
                        except OSError:
                            pass

            sender = threading.Thread(target=trickle)
            sender.start()
            try:
                started = time.monotonic()
                with urllib.request.urlopen(handle.url, timeout=60.0) as response:
                    response.read()
                assert response.status == 200
                assert time.monotonic() - started < SERVE_DEADLINE_S + 20.0
            finally:
                stop.set()
                sender.join(10.0)
        finally:
            for sock in trickling:
                sock.close()
