"""How many nodes to ask Ray's autoscaler for: queue depth, running tasks, warm spares.

Pure logic, so the decision is tested without a cluster. The answer is a
total, not a step: ``ray.autoscaler.sdk.request_resources`` sets the floor
of the cluster's capacity to the bundles it is given (replacing the previous
request), and Ray's autoscaler removes nodes idle past its own timeout once
the floor drops.
"""

from __future__ import annotations

import math

from megaflow.scheduler.fleet_config import RayFleetConfig


def nodes_wanted(cfg: RayFleetConfig, depth: int, running: int) -> int:
    """Nodes that hold every running and queued task, plus ``warm_share`` of the
    result as spares, within ``min_nodes..max_nodes``."""
    busy = math.ceil(max(0, depth + running) / cfg.slots_per_node)
    total = math.ceil(busy / (1.0 - cfg.warm_share)) if busy else 0
    return max(cfg.min_nodes, min(cfg.max_nodes, total))


def bundles(cfg: RayFleetConfig, nodes: int) -> list[dict[str, float]]:
    """The resource request for ``nodes`` nodes: one slot bundle per node."""
    return [{cfg.slot_resource: float(cfg.slots_per_node)} for _ in range(nodes)]
