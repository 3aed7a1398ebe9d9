"""The Prometheus endpoint: dcgm-exporter-compatible GPU series plus ``rigscope_*`` extras, from Snapshots.

The exporter never talks to a backend: it is fed ``Snapshot``s, either by the recorder
(``rigscope record --prometheus``) or by its own sampler loop (``rigscope serve``, which
desktop/cli/serve.py runs with :func:`run_loop`). The recorder's API::

    handle = start_exporter("127.0.0.1:9835", hostname=None)  # UserError when the port is taken
    handle.update(snapshot)                # after every Sampler.tick(), from any thread
    handle.set_recorder_health(up=True, last_write_s=time.time(), rows_written=n, write_errors=0)
    handle.follow_stress_runs(db_path)     # re-read the newest stress run every minute, or:
    handle.set_last_stress(result)         # an advisor.frame.StressResult (the newest run)
    handle.port, handle.url                # the bound port (``:0`` asks the OS for a free one)
    handle.close()                         # stops the HTTP thread; safe to call twice

What is exported, per GPU (labels ``gpu, UUID, pci_bus_id, device, modelName, Hostname`` as
dcgm-exporter writes them, so DCGM Grafana dashboards work unchanged):

- ``DCGM_FI_DEV_*`` with dcgm-exporter's names, HELP texts and units (etc/default-counters.csv).
  dcgm-exporter declares ``TOTAL_ENERGY_CONSUMPTION`` and the PCIe throughputs as counters
  without the ``_total`` suffix; prometheus-client can only write a counter by adding that
  suffix, which would rename the series, so these three are exposed untyped under dcgm's exact
  names (PromQL and dashboards do not depend on the declared type). Like dcgm-exporter, the
  PCIe values are NVML's KB/s throughput, not a running total.
- ``DCGM_FI_DEV_POWER_VIOLATION`` (SW power cap + HW power brake) and
  ``DCGM_FI_DEV_THERMAL_VIOLATION`` (SW + HW thermal slowdown): ns throttled, running totals of
  the time NVML's per-reason counters add up since the exporter started, untyped for the same
  reason; a GPU whose driver keeps no such counter has no series.
- ``DCGM_FI_PROF_*`` (SM, tensor pipe, DRAM, graphics engine; ratios 0-1) where NVML GPM measured
  them (Hopper, Blackwell, the simulated H100), never the estimate under DCGM's names.
- ``rigscope_*`` for what DCGM's defaults lack: seconds under each clock-event reason
  (counters accumulated from the sample interval and the reason bits), whether each reason is
  active now, power limit, max clocks, slowdown temperature, fan, PCIe link; per host the
  GPU count by state, the last stress verdict and throughput, and recorder health.

Every name comes from ``desktop.telemetry.metric_names``, the one table the fleet reader (``desktop.fleet``)
reads them back by. A metric the GPU does not support is omitted, never 0; a lost GPU's series disappear while
the other GPUs' stay (its clock-event counters resume when it comes back).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from desktop.config import DEFAULT_LISTEN
from desktop.errors import UserError
from desktop.exporter.collector import MAX_SAMPLE_GAP_S, RecorderHealth, SnapshotCollector
from desktop.exporter.server import start_bounded_server
from desktop.telemetry.loop import run_every
from desktop.telemetry.metric_names import DCGM_FIELDS, GPU_LABELS, REASONS, DcgmField
from desktop.telemetry.model import Snapshot

if TYPE_CHECKING:
    from advisor.frame import StressResult

__all__ = [
    "DCGM_FIELDS",
    "DEFAULT_LISTEN",
    "GPU_LABELS",
    "MAX_SAMPLE_GAP_S",
    "REASONS",
    "DcgmField",
    "ExporterHandle",
    "RecorderHealth",
    "SnapshotCollector",
    "is_loopback",
    "load_last_stress",
    "parse_listen",
    "read_last_stress",
    "run_loop",
    "start_exporter",
]

log = logging.getLogger(__name__)


def is_loopback(addr: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if addr == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:  # a host name: assume it is reachable from elsewhere
        return False


def parse_listen(listen: str) -> tuple[str, int]:
    """``"ADDR:PORT"`` (or just ``"PORT"``, meaning loopback) -> (addr, port); UserError if malformed."""
    text = listen.strip()
    if text.isdigit():
        host, port_text = "127.0.0.1", text
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not port_text.isdigit():
            raise UserError(f"--listen {listen!r}: expected ADDR:PORT, e.g. {DEFAULT_LISTEN}")
        host = host.strip("[]")
        if not host:
            raise UserError(f"--listen {listen!r}: give the address explicitly "
                            "(127.0.0.1 for this machine only, 0.0.0.0 for every interface)")
    port = int(port_text)
    if port > 65535:
        raise UserError(f"--listen {listen!r}: port {port} is out of range (0-65535)")
    return host, port


class ExporterHandle:
    """A running endpoint: feed it snapshots; ``close()`` stops its HTTP thread."""

    def __init__(self, collector: SnapshotCollector, server: object, thread: threading.Thread,
                 addr: str, port: int) -> None:
        self.collector = collector
        self._server = server
        self._thread = thread
        self.address = addr
        self.port = port
        self._closed = False
        self._stress_db: Path | None = None
        self._stress_period_s = 60.0
        self._stress_read_at: float | None = None

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/metrics"

    def update(self, snapshot: Snapshot) -> None:
        self.collector.update(snapshot)
        due = self._stress_read_at is None or snapshot.monotonic_s - self._stress_read_at >= self._stress_period_s
        if self._stress_db is not None and due:
            self._stress_read_at = snapshot.monotonic_s
            try:
                self.collector.set_last_stress(read_last_stress(self._stress_db))
            except Exception as exc:  # keep the previous verdict; the next read may succeed
                log.warning("could not read the last stress run from %s: %s", self._stress_db, exc)

    def follow_stress_runs(self, db: Path, period_s: float = 60.0) -> None:
        """Re-read the newest stress run from ``db`` every ``period_s`` (in ``update``'s thread), so a
        test run while the exporter serves shows up without a restart."""
        self._stress_db = Path(db)
        self._stress_period_s = period_s
        self._stress_read_at = None

    def set_last_stress(self, result: StressResult | None) -> None:
        self.collector.set_last_stress(result)

    def set_recorder_health(self, *, up: bool, last_write_s: float | None = None,
                            rows_written: int | None = None, write_errors: int | None = None) -> None:
        """The recorder's own state: writing or not, last commit time, cumulative rows and errors."""
        self.collector.set_recorder_health(RecorderHealth(up, last_write_s, rows_written, write_errors))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()  # type: ignore[attr-defined]
        self._server.server_close()  # type: ignore[attr-defined]
        self._thread.join(timeout=5.0)

    def __enter__(self) -> ExporterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_exporter(listen: str = DEFAULT_LISTEN, hostname: str | None = None) -> ExporterHandle:
    """Serve ``/metrics`` on ``listen`` (loopback unless another address is given) in a daemon thread."""
    addr, port = parse_listen(listen)
    collector = SnapshotCollector(hostname or socket.gethostname())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, thread = start_bounded_server(addr, port, registry)  # idle clients cost no thread
    except OSError as exc:
        if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            raise UserError(f"cannot serve Prometheus metrics on {addr}:{port}: the port is already in use "
                            "(another rigscope or exporter?); choose another with --listen ADDR:PORT") from exc
        raise UserError(f"cannot serve Prometheus metrics on {addr}:{port}: {exc.strerror or exc}") from exc
    bound_port = int(server.server_address[1])
    log.info("serving Prometheus metrics on %s:%d", addr, bound_port)
    return ExporterHandle(collector, server, thread, addr, bound_port)


def read_last_stress(db: Path) -> StressResult | None:
    """The newest stored stress run in ``db``; None without the history package, a database or a run.

    Raises what the store raises for a database it cannot read."""
    try:
        from desktop.history.store import HistoryStore
    except ImportError:  # a build without the history package still serves live metrics
        return None
    if not db.exists():
        return None
    with HistoryStore.open(db, readonly=True) as store:
        runs = store.stress_runs()
    return runs[0] if runs else None


def load_last_stress(db: str | Path | None) -> StressResult | None:
    """Like ``read_last_stress`` for ``db`` or the default database, logging instead of raising."""
    from desktop.paths import default_db_path

    path = Path(db) if db else default_db_path()
    try:
        return read_last_stress(path)
    except Exception as exc:  # a missing last verdict must not stop the exporter
        log.warning("could not read the last stress run from %s: %s", path, exc)
        return None


def run_loop(tick: Callable[[], Snapshot], handle: ExporterHandle, interval_s: float, stop: threading.Event,
             max_ticks: int | None = None) -> int:
    """Feed ``handle`` from ``tick()`` every ``interval_s`` (a late tick skips the slots it missed)
    until ``stop`` is set; returns the ticks done."""
    return run_every(interval_s, lambda: handle.update(tick()), stop, max_ticks=max_ticks)
