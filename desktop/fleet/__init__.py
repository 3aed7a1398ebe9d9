"""The fleet: many machines read back from the Prometheus server that scrapes them (issue 33).

Rigscope builds no agent or collector: its exporters and dcgm-exporters on servers and cloud instances
are scraped by the team's Prometheus (or Thanos, Mimir, VictoriaMetrics behind the same API), and this
package reads that server's HTTP API::

    connection = connection_from(settings.fleet, url=..., timeout_s=...)  # credentials by reference
    with PrometheusClient(connection) as client:
        fleet = read_fleet(client, hot_c=settings.alerts.temperature_c)  # one query per metric

``client.py`` (httpx; errors as ``FleetError``, one line without credentials), ``connect.py`` (settings
``[fleet]`` and the environment), ``reader.py`` (the queries and the grouping), ``model.py`` (the result).
"""

from desktop.fleet.client import Connection, Credentials, FleetError, PrometheusClient
from desktop.fleet.connect import connection_from
from desktop.fleet.model import Fleet, FleetGpu, FleetMachine
from desktop.fleet.reader import read_fleet

__all__ = ["Connection", "Credentials", "Fleet", "FleetError", "FleetGpu", "FleetMachine", "PrometheusClient",
           "connection_from", "read_fleet"]
