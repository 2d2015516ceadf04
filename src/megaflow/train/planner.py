"""The sharding planner: how one model's training is spread over the devices.

From the model's parameter count and activation estimate, the memory of a
device, the devices per node and the link bandwidths, :func:`plan` predicts
for every strategy the peak memory of a device and the bytes each device
sends per step, and takes the first that fits in this order (simplest first), unless a
later one of ``ddp``/``zero2``/``hsdp``/``zero3`` that also fits is
estimated to spend less than half the time communicating (a margin wider
than the model's error; the estimate ignores latency and overlap):

``ddp``
    Every device holds everything: 16 bytes a parameter (fp32 weights,
    gradients, Adam's two moments; DDP's buckets are views of the gradients)
    plus one micro-batch's activations. Sends an all-reduce of the gradients.
``zero2``
    FSDP with ``reshard_after_forward=False``: weights, gradients and moments
    sharded over all devices, but the gathered weights stay from forward to
    backward (one whole gathered copy, in the compute dtype).
``hsdp``
    Several nodes only: ZeRO-3 inside each node, replicas across nodes, so
    only an all-reduce of a shard crosses the slow inter-node links.
``zero3``
    Full sharding: only two blocks are gathered at a time (the one running and
    the one prefetched), and one block's unsharded gradient before it is
    reduce-scattered.
``pipeline``
    The blocks split into stages (the fewest of 2, 4, 8, ... that fit), DDP
    across the devices of each stage; a stage keeps the activations of the
    micro-batches in flight (as many as stages under 1F1B).
``zero3_offload``
    ZeRO-3 with weights, gradients and moments in host memory; the device
    holds only the gathered blocks and activations.

Models over 50B parameters never get ``ddp`` or ``zero2``. A strategy the
config names is evaluated the same way and reported even if it does not
fit. Everything here is arithmetic; :mod:`megaflow.train.sharding` applies
a choice to a model, and the tests measure real steps of each strategy that
runs on CPU ranks against these predictions (``docs/train-scale.md``).

This module imports neither torch nor transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from megaflow.train.plan_config import GB, PlanConfig

STATE_BYTES = 16  # fp32 weights, gradients, Adam's m and v
LARGE_MODEL = 50e9  # from here on, ZeRO-3 or better
ORDER = ("ddp", "zero2", "hsdp", "zero3", "pipeline", "zero3_offload")
SHARDING = ("ddp", "zero2", "hsdp", "zero3")  # no bubble, no host traffic


@dataclass(frozen=True, slots=True)
class Estimate:
    """One strategy's prediction for one device."""

    strategy: str
    fits: bool
    device_bytes: float  # predicted peak
    parts: dict[str, float]  # what the peak is made of
    comm_bytes: float  # sent per device per step
    comm_s: float  # at the configured bandwidths
    host_bytes: float = 0.0  # per node, for offload
    stages: int = 1
    note: str = ""


@dataclass(frozen=True, slots=True)
class Plan:
    choice: Estimate | None
    params: float
    estimates: list[Estimate]
    reasons: list[str] = field(default_factory=list)


def _ring(n: int) -> float:
    """Share of a tensor each device sends in a ring all-gather or reduce-scatter."""
    return (n - 1) / n if n > 1 else 0.0


def activation_bytes(cfg: PlanConfig, layers: int, micro_batches: int = 1) -> float:
    """Activations one device keeps for ``micro_batches`` in flight through ``layers``."""
    m, b = cfg.model, cfg.batch
    tokens = b.micro_batch * b.seq_len
    width = 2 if cfg.precision == "bf16" else 4
    per_layer = m.activation_elements() * tokens * width
    if cfg.activation_checkpointing:  # block inputs kept, one block recomputed at a time
        kept = layers * m.hidden * tokens * width + per_layer
    else:
        kept = layers * per_layer
    logits = 2 * tokens * m.vocab * 4  # fp32 logits and their log-softmax for the loss
    return micro_batches * kept + logits


class _Planner:
    def __init__(self, cfg: PlanConfig) -> None:
        self.cfg = cfg
        self.hw = cfg.hardware
        self.psi = cfg.model.param_count()
        self.layer = float(cfg.model.layer_params())
        self.width = 2 if cfg.precision == "bf16" else 4
        self.budget = self.hw.device_memory_gb * GB * self.hw.usable
        self.slowest = self.hw.inter_node_gbps if self.hw.nodes > 1 else self.hw.intra_node_gbps

    def _est(
        self,
        name: str,
        parts: dict[str, float],
        comm: list[tuple[float, float]],
        *,
        host_ok: bool = True,
        host_bytes: float = 0.0,
        stages: int = 1,
        note: str = "",
    ) -> Estimate:
        parts = {"overhead": self.hw.overhead_gb * GB, **parts}
        total = sum(parts.values())
        sent = sum(b for b, _ in comm)
        secs = sum(b / (gbps * GB) for b, gbps in comm)
        fits = total <= self.budget and host_ok
        return Estimate(name, fits, total, parts, sent, secs, host_bytes, stages, note)

    def ddp(self) -> Estimate:
        n = self.hw.world
        act = activation_bytes(self.cfg, self._l)
        parts = {"state": STATE_BYTES * self.psi, "activations": act}
        return self._est("ddp", parts, [(2 * _ring(n) * 4 * self.psi, self.slowest)])

    @property
    def _l(self) -> int:
        return self.cfg.model.layers

    def _sharded(
        self, name: str, shards: int, gathered: float, comm: list[tuple[float, float]]
    ) -> Estimate:
        parts = {
            "state": STATE_BYTES * self.psi / shards,
            "gathered weights": gathered,
            "unsharded gradient": 4 * self.layer,
            "activations": activation_bytes(self.cfg, self._l),
        }
        return self._est(name, parts, comm)

    def zero2(self) -> Estimate:
        n = self.hw.world
        gather = _ring(n) * self.width * self.psi
        return self._sharded(
            "zero2", n, self.width * self.psi, [(gather + _ring(n) * 4 * self.psi, self.slowest)]
        )

    def zero3(self) -> Estimate:
        n = self.hw.world
        traffic = _ring(n) * (2 * self.width + 4) * self.psi  # gather twice, reduce-scatter once
        return self._sharded("zero3", n, 2 * self.width * self.layer, [(traffic, self.slowest)])

    def hsdp(self) -> Estimate:
        k, nodes = self.hw.devices_per_node, self.hw.nodes
        inside = _ring(k) * (2 * self.width + 4) * self.psi
        across = 2 * _ring(nodes) * 4 * self.psi / k
        return self._sharded(
            "hsdp",
            k,
            2 * self.width * self.layer,
            [(inside, self.hw.intra_node_gbps), (across, self.hw.inter_node_gbps)],
        )

    def pipeline(self) -> Estimate:
        n = self.hw.world
        stages = 2
        while True:
            est = self._stages(stages)
            if est.fits or stages * 2 > min(n, self._l):
                return est
            stages *= 2

    def _stages(self, s: int) -> Estimate:
        b, m = self.cfg.batch, self.cfg.model
        replicas = max(1, self.hw.world // s)
        layers = -(-self._l // s)
        stage_psi = layers * self.layer + m.vocab * m.hidden  # the embedding on one end
        in_flight = min(s, b.micro_batches)  # 1F1B; GPipe keeps all micro-batches
        parts = {
            "state": STATE_BYTES * stage_psi,
            "activations": activation_bytes(self.cfg, layers, in_flight),
        }
        boundary = 2 * b.micro_batches * b.micro_batch * b.seq_len * m.hidden * self.width
        comm = [(boundary, self.slowest), (2 * _ring(replicas) * 4 * stage_psi, self.slowest)]
        bubble = (s - 1) / (b.micro_batches + s - 1)
        note = f"{s} stages x {replicas} replicas, 1F1B bubble {bubble:.0%}"
        return self._est("pipeline", parts, comm, stages=s, note=note)

    def zero3_offload(self) -> Estimate:
        n, k = self.hw.world, self.hw.devices_per_node
        host = STATE_BYTES * self.psi / n * k
        parts = {
            "gathered weights": 2 * self.width * self.layer,
            "unsharded gradient": 4 * self.layer,
            "activations": activation_bytes(self.cfg, self._l),
        }
        traffic = _ring(n) * (2 * self.width + 4) * self.psi
        pcie = (4 + 4) * self.psi / n  # weights up, gradients down, every step
        return self._est(
            "zero3_offload",
            parts,
            [(traffic, self.slowest), (pcie, self.hw.host_link_gbps)],
            host_bytes=host,
            host_ok=host <= self.hw.host_memory_gb * GB * self.hw.usable,
            note=f"host {host / GB:.0f} GB per node; Adam steps on the CPU",
        )

    def estimate(self, name: str) -> Estimate:
        build = {
            "ddp": self.ddp,
            "zero2": self.zero2,
            "hsdp": self.hsdp,
            "zero3": self.zero3,
            "pipeline": self.pipeline,
            "zero3_offload": self.zero3_offload,
        }
        return build[name]()


def plan(cfg: PlanConfig) -> Plan:
    """Every strategy's estimate and the chosen one (None when nothing fits)."""
    p = _Planner(cfg)
    names = [s for s in ORDER if s != "hsdp" or cfg.hardware.nodes > 1]
    estimates = [p.estimate(s) for s in names]
    reasons: list[str] = []
    if cfg.strategy not in (None, "auto"):
        est = next((e for e in estimates if e.strategy == cfg.strategy), None) or p.estimate(
            cfg.strategy
        )
        why = "fits" if est.fits else "does NOT fit"
        return Plan(est, p.psi, estimates, [f"{cfg.strategy} was asked for by the config; {why}"])
    fitting: list[Estimate] = []
    for est in estimates:
        gb = f"{est.device_bytes / GB:.1f} GB"
        if p.psi > LARGE_MODEL and est.strategy in ("ddp", "zero2"):
            reasons.append(f"{est.strategy}: skipped, {p.psi / 1e9:.0f}B parameters > 50B")
        elif cfg.optimizer == "onebit_adam" and est.strategy not in ("ddp", "pipeline"):
            reasons.append(f"{est.strategy}: skipped, 1-bit Adam needs unsharded gradients")
        elif not est.fits:
            reasons.append(f"{est.strategy}: {gb} per device > {p.budget / GB:.1f} GB usable")
        else:
            fitting.append(est)
    if not fitting:
        reasons.append(
            "nothing fits: add devices, enable activation_checkpointing or shrink the batch"
        )
        return Plan(None, p.psi, estimates, reasons)
    choice = fitting[0]
    if choice.strategy in SHARDING:
        for later in fitting[1:]:
            if later.strategy in SHARDING and later.comm_s < choice.comm_s / 2:
                reasons.append(
                    f"{choice.strategy}: fits, but {later.strategy} communicates in less than "
                    f"half the time ({later.comm_s:.2f} s against {choice.comm_s:.2f} s a step)"
                )
                choice = later
    gb = f"{choice.device_bytes / GB:.1f} GB"
    reasons.append(
        f"{choice.strategy}: chosen, {gb} per device fits in {p.budget / GB:.1f} GB usable "
        f"(order: {', '.join(ORDER)}); {choice.comm_s:.2f} s of communication a step"
    )
    return Plan(choice, p.psi, estimates, reasons)
