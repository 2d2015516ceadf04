"""The ``ray`` fleet: MegaFlow node agents as Ray actors, one per Ray node.

- :mod:`~megaflow.app.ray_fleet.node_agent`: the actor, an Environment
  Service worker (a sandbox runtime behind the gRPC servicer) on its node.
- :mod:`~megaflow.app.ray_fleet.fleet`: :class:`RayFleet`, the
  ``FleetProvider`` that starts the agents, turns nodes joining and leaving
  into instance events, and asks Ray's autoscaler for nodes.
- :mod:`~megaflow.app.ray_fleet.executor`: :class:`NodeExecutor`, which runs
  each attempt against the node agent of the instance it was placed on.
- :mod:`~megaflow.app.ray_fleet.scaling`: the scale decision, pure logic.

Ray is imported only when a fleet starts (the ``ray`` extra).
"""
