"""The exporter's HTTP server: idle clients cost no thread, each connection is time-boxed, handlers are bounded.

prometheus-client's ``start_http_server`` starts a thread per connection that waits for its
request for ever: 362 half-open clients pinned 367 threads (issue 34 item 8), and with
``--listen 0.0.0.0`` any host can do that. Here an accepted connection waits in one watcher
thread's selector until it has sent something; only then does one of ``MAX_HANDLERS`` pooled
threads serve it, with ``CONNECTION_TIMEOUT_S`` on every read and write and ``SERVE_DEADLINE_S``
in all (a client trickling its request cannot hold a handler). A connection that sends
nothing within that time is closed, and past ``MAX_WAITING`` waiting connections the oldest is
dropped, so a flood of idle clients neither grows the threads nor keeps a scrape from answering.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger(__name__)

#: Seconds a connection may take to send its request and for each read and write while served.
CONNECTION_TIMEOUT_S = 5.0
#: Seconds a served connection may take in all (a client trickling a byte every few seconds is cut off).
SERVE_DEADLINE_S = 10.0
#: Threads that serve requests at once (a scrape takes milliseconds; Prometheus sends one at a time).
MAX_HANDLERS = 4
#: Connections accepted and waiting for their request; past this the oldest is closed.
MAX_WAITING = 256
_WATCH_TICK_S = 0.25


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr for every scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class BoundedWSGIServer(WSGIServer):
    """A WSGI server whose accept loop hands connections to a watcher, not to a thread each."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[WSGIRequestHandler], *,
                 timeout_s: float = CONNECTION_TIMEOUT_S, max_handlers: int = MAX_HANDLERS,
                 max_waiting: int = MAX_WAITING) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.timeout_s = timeout_s
        self.max_waiting = max_waiting
        self._selector = selectors.DefaultSelector()
        self._waiting: OrderedDict[socket.socket, float] = OrderedDict()
        self._serving: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max_handlers, thread_name_prefix="rigscope-exporter")
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="rigscope-exporter-watch", daemon=True)
        super().__init__(address, handler)  # a failed bind calls server_close: everything above exists
        self._watcher.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Park the accepted connection until it sends its request (or its time is up)."""
        sock: socket.socket = request
        with self._lock:
            while len(self._waiting) >= self.max_waiting:
                oldest, _ = self._waiting.popitem(last=False)
                self._drop(oldest)
            self._waiting[sock] = time.monotonic() + self.timeout_s
            self._selector.register(sock, selectors.EVENT_READ)

    def _drop(self, sock: socket.socket) -> None:
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        self.shutdown_request(sock)

    def _watch(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                empty = not self._waiting
                self._cut_overdue(time.monotonic())
            if empty:
                self._stop.wait(_WATCH_TICK_S)
                continue
            try:
                ready = self._selector.select(_WATCH_TICK_S)
            except (OSError, ValueError):  # a socket closed meanwhile
                continue
            now = time.monotonic()
            with self._lock:
                for key, _ in ready:
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if self._waiting.pop(sock, None) is None:
                        continue
                    self._selector.unregister(sock)
                    self._pool.submit(self._serve, sock)
                expired = [sock for sock, deadline in self._waiting.items() if deadline <= now]
                for sock in expired:
                    del self._waiting[sock]
                    self._drop(sock)

    def _cut_overdue(self, now: float) -> None:
        """Shut down served connections past their deadline: the handler's blocked read returns at once."""
        for sock, deadline in list(self._serving.items()):
            if deadline <= now:
                del self._serving[sock]
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _serve(self, sock: socket.socket) -> None:
        with self._lock:
            self._serving[sock] = time.monotonic() + SERVE_DEADLINE_S
        try:
            sock.settimeout(self.timeout_s)
            self.finish_request(sock, sock.getpeername())
        except Exception:  # a client gone, a timeout: the connection ends, the server goes on
            log.debug("exporter connection ended early", exc_info=True)
        finally:
            with self._lock:
                self._serving.pop(sock, None)
            self.shutdown_request(sock)

    def server_close(self) -> None:
        self._stop.set()
        if self._watcher.is_alive():
            self._watcher.join(timeout=5.0)
        with self._lock:
            for sock in list(self._waiting):
                self._drop(sock)
            self._waiting.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._selector.close()
        super().server_close()


def start_bounded_server(addr: str, port: int, registry: CollectorRegistry) -> tuple[BoundedWSGIServer,
                                                                                     threading.Thread]:
    """Serve ``registry`` on ``addr:port`` from a daemon thread (OSError when the address cannot be bound)."""
    app = make_wsgi_app(registry)
    server = make_server(addr, port, app, BoundedWSGIServer, handler_class=_QuietHandler)
    assert isinstance(server, BoundedWSGIServer)
    thread = threading.Thread(target=server.serve_forever, name="rigscope-exporter-accept", daemon=True)
    thread.start()
    return server, thread
