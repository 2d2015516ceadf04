"""Prometheus metrics of a model router's replicas: rotation, versions, health probes.

The router (:class:`megaflow.model.routing.Router`) keeps each replica's
state and counters itself; :class:`ModelFleetCollector` reads them when the
registry is scraped (``Router.health``), so a scrape always shows the state
of that moment and nothing is registered globally. The model service's
process registers one collector per router on the registry it serves
(``megaflow serve model``'s ``metrics_port``, ``megaflow run
--metrics-port``). Every series is labelled by ``replica``, the backend's
name (``openai:http://host:port/v1`` for an engine in another process).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class ReplicaHealth:
    """One replica as the router sees it."""

    replica: str
    in_rotation: bool
    catching_up: bool
    """Out of rotation, answering, waiting for an update to reach the fleet's version."""
    weights_version: int
    probe_failures: int
    take_outs: int


_Series = tuple[str, str, Callable[[ReplicaHealth], float]]
"""A per-replica series: its name, its help text, and its value for one replica."""


class ModelFleetCollector(Collector):
    """The replicas ``health()`` reports, read at every scrape."""

    def __init__(self, health: Callable[[], Sequence[ReplicaHealth]]) -> None:
        self.health = health

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        replicas = list(self.health())
        yield GaugeMetricFamily(
            "megaflow_model_replicas_in_rotation",
            "Replicas calls may be routed to.",
            value=sum(r.in_rotation for r in replicas),
        )
        gauges: tuple[_Series, ...] = (
            ("megaflow_model_replica_in_rotation",
             "1 while the replica is in rotation, 0 while it is out.",
             lambda r: float(r.in_rotation)),
            ("megaflow_model_replica_catching_up",
             "1 while the replica answers but serves an older weights version than the "
             "fleet (out of rotation until an update reaches it).",
             lambda r: float(r.catching_up)),
            ("megaflow_model_replica_weights_version",
             "The weights version the replica serves.", lambda r: float(r.weights_version)),
        )  # fmt: skip
        for name, doc, value in gauges:
            gauge = GaugeMetricFamily(name, doc, labels=["replica"])
            for r in replicas:
                gauge.add_metric([r.replica], value(r))
            yield gauge
        counters: tuple[_Series, ...] = (
            ("megaflow_model_replica_probe_failures",
             "Health probes the replica failed.", lambda r: float(r.probe_failures)),
            ("megaflow_model_replica_take_outs",
             "Times the replica was taken out of rotation.", lambda r: float(r.take_outs)),
        )  # fmt: skip
        for name, doc, value in counters:
            counter = CounterMetricFamily(name, doc, labels=["replica"])
            for r in replicas:
                counter.add_metric([r.replica], value(r))
            yield counter
