"""Scheduler configs: the policy (tagged by ``type``), queues, admission and limits."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FifoPolicyConfig(_Cfg):
    """First come, first served."""

    type: Literal["fifo"] = "fifo"


class PriorityPolicyConfig(_Cfg):
    """Higher priority first; waiting raises a task's priority so none starves."""

    type: Literal["priority"] = "priority"
    aging_per_s: float = Field(0.1, ge=0, description="Priority gained per second of waiting.")


class FairPolicyConfig(_Cfg):
    """Weighted fair share across runs or tenants (deficit round robin)."""

    type: Literal["fair"] = "fair"
    key: Literal["run", "tenant"] = Field("run", description="Share between runs or tenants.")
    weights: dict[str, float] = Field(
        default_factory=dict, description="Share per key; 1 if absent."
    )


class CustomPolicyConfig(_Cfg):
    """A user's policy class, by dotted path."""

    type: Literal["custom"] = "custom"
    path: str = Field(description="Dotted path to a SchedulingPolicy subclass.")
    options: dict[str, object] = Field(
        default_factory=dict, description="Keyword arguments for the class."
    )


class LearnedPolicyConfig(_Cfg):
    """An actor-critic policy trained in the simulator (``megaflow sim train``)."""

    type: Literal["learned"] = "learned"
    checkpoint: str = Field(
        description="The policy's checkpoint file (safetensors), relative to the working directory."
    )
    greedy: bool = Field(
        True, description="Take the most likely choice; false samples from the policy (seeded)."
    )
    seed: int = Field(0, description="Seed of the sampling when greedy is false.")
    wait_bound: float = Field(
        1.0,
        gt=0,
        description="No task waits more than this many expected run times, or this many "
        "times its wait until then if less (at least wait_floor_s), beyond the point "
        "where the fair policy would have started it: overdue tasks are placed before the "
        "network chooses (in wait_order), whatever it scores.",
    )
    wait_floor_s: float = Field(
        60.0,
        ge=0,
        description="Least slack of the wait bound, and the slack before any run "
        "time is known (seconds).",
    )
    wait_backlog: float = Field(
        1.0,
        gt=0,
        description="At most this many due tasks (those the fair policy would have "
        "started by now) wait per instance; beyond it the earliest deadline is placed "
        "before it passes, so that a backlog of due tasks cannot push deadlines back.",
    )
    wait_backfill: bool = Field(
        True,
        description="An instance held for a due task that fits nowhere still takes "
        "waiting tasks that leave room there for it (docs/sim.md); false holds it empty "
        "of new work, the stricter bound, at the cost of the fleet's room.",
    )
    wait_order: Literal["arrival", "deadline"] = Field(
        "arrival",
        description="Which task past its deadline is placed (or holds an instance) first: "
        "the oldest (the longest waits stay near fifo's where big tasks wait for room), or "
        "the earliest deadline (with wait_backfill false, the stricter bound; docs/sim.md).",
    )
    record: bool = Field(
        True,
        description="Record each decision (the candidates' features, the choice) and how its "
        "placement ended to the run's artifact store, for `megaflow sim train --from-run`.",
    )
    record_every: int = Field(
        256, ge=1, description="Lines per chunk written; a crash loses at most the unwritten ones."
    )
    record_max: int = Field(
        20_000, ge=0, description="Decisions one scheduler records at most, then no more."
    )

    @field_validator("checkpoint")
    @classmethod
    def _readable(cls, value: str) -> str:
        from megaflow.scheduler.learned_net import read_checkpoint

        read_checkpoint(value)  # a missing or broken file fails with the config (ValueError)
        return value


PolicyConfig = Annotated[
    FifoPolicyConfig
    | PriorityPolicyConfig
    | FairPolicyConfig
    | CustomPolicyConfig
    | LearnedPolicyConfig,
    Field(discriminator="type"),
]


class AdmissionConfig(_Cfg):
    """Rate limits and concurrency caps checked before a task is placed."""

    sandbox_rate: float | None = Field(
        None, gt=0, description="Sandbox creations per second per runtime; None for no limit."
    )
    sandbox_burst: float = Field(10.0, ge=1, description="Sandbox creations allowed at once.")
    run_start_rate: float | None = Field(
        None, gt=0, description="Task starts per second per run; None for no limit."
    )
    run_start_burst: float = Field(10.0, ge=1, description="Task starts of one run at once.")
    max_per_run: int | None = Field(None, ge=1, description="Tasks of one run running at once.")
    max_per_region: dict[str, int] = Field(
        default_factory=dict, description="Tasks running at once in a region, by region name."
    )


class RetryConfig(_Cfg):
    """Backoff of infrastructure retries: ``min(max_s, base_s * 2**(n-1))`` with jitter."""

    base_s: float = Field(1.0, ge=0, description="Delay before the first retry.")
    max_s: float = Field(60.0, ge=0, description="Longest delay between retries.")
    jitter: float = Field(0.5, ge=0, le=1, description="Share of the delay drawn at random.")


class AutoscaleConfig(_Cfg):
    """Threshold autoscaler: scale up on a sustained queue, down after idle time."""

    enabled: bool = Field(False, description="Grow and shrink the fleet with the queue.")
    queue_threshold: int = Field(100, ge=0, description="Queue depth that asks for more.")
    sustain_s: float = Field(30.0, ge=0, description="How long the queue must stay over it.")
    step: int = Field(10, ge=1, description="Instances asked for at most per scale-up.")
    idle_s: float = Field(300.0, ge=0, description="Idle time before an instance is released.")
    min_instances: int = Field(0, ge=0, description="Never release below this many.")
    max_instances: int = Field(1000, ge=1, description="Never grow beyond this many.")


class SchedulerConfig(_Cfg):
    """How the control plane orders, admits and places tasks."""

    policy: PolicyConfig = Field(
        default_factory=FifoPolicyConfig, description="Which waiting task goes first."
    )
    queues: Literal["shared", "per_type"] = Field(
        "shared", description="One queue for all tasks, or one per task type (weighted)."
    )
    queue_weights: dict[str, float] = Field(
        default_factory=lambda: {"train": 1.0, "eval": 1.0, "synth": 1.0},
        description="Share of each task type's queue when queues is per_type.",
    )
    max_concurrency: int = Field(8, ge=1, le=1_000_000, description="Tasks running at once.")
    preemption: bool = Field(
        False, description="Let a waiting task stop a lower-priority running one."
    )
    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    autoscale: AutoscaleConfig = Field(default_factory=AutoscaleConfig)
    heartbeat_timeout_s: float = Field(
        30.0, gt=0, description="An instance silent for this long is lost."
    )
    scan_limit: int = Field(
        64, ge=1, description="Queued tasks examined per round past ones that do not fit."
    )
