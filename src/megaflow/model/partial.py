"""Partial rollouts: a generation cut short by a weights update, resumed on the new weights.

What a replica does with a generation in flight when new weights arrive is
its ``update_in_flight`` setting:

- ``finish`` (the default): the update waits; the generation completes on the
  weights it started with and reports that version.
- ``resume``: the update asks every generation holding or queued for the
  replica to stop at its next token (:class:`UpdateSignal`, checked by the
  model's ``generate`` after each token); the tokens so far are kept, the
  weights are swapped, and the generation goes on from them on the new
  weights. The answer's tokens and logprobs are the segments' in order, each
  logprob from the weights that sampled it; ``segments`` lists each part's
  token count and version, and the answer's ``weights_version`` is the
  oldest, which the staleness bound counts from.

A :class:`Rollout` carries one generation across its segments.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

UpdateInFlight = Literal["finish", "resume"]


@dataclass
class Rollout:
    """One generation, possibly in several segments."""

    prompt: list[int]
    limit: int
    """Most tokens the whole generation may have."""
    sampling: dict[str, Any]
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    segments: list[tuple[int, int]] = field(default_factory=list)
    """(tokens, weights version) of each segment, in order."""
    cut: bool = False
    """The last segment was stopped by an update: the generation goes on."""

    @property
    def fed(self) -> list[int]:
        """What the next segment is fed: the prompt and every token so far."""
        return self.prompt + self.ids

    @property
    def remaining(self) -> int:
        return self.limit - len(self.ids)

    def add(
        self, ids: list[int], logprobs: list[float], version: int, *, stopped: bool, eos: int | None
    ) -> None:
        """Append a segment; ``stopped``: the update signal was up when it ended; a
        segment that ends with ``eos`` ended the answer, signal or not."""
        self.ids += ids
        self.logprobs += logprobs
        if ids:
            self.segments.append((len(ids), version))
        ended = bool(ids) and eos is not None and ids[-1] == eos
        self.cut = stopped and not ended and self.remaining > 0

    @property
    def versions(self) -> list[int]:
        return [v for _, v in self.segments]


class UpdateSignal:
    """Raised by an update waiting to swap weights; read by generation after each token."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def raise_(self) -> None:
        self._event.set()

    def lower(self) -> None:
        self._event.clear()

    @property
    def up(self) -> bool:
        return self._event.is_set()

    def stopping_criteria(self) -> Any:
        """A ``transformers`` stopping criterion: every sequence ends while the signal is up."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        event = self._event

        class _Stop(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return torch.full((input_ids.shape[0],), event.is_set(), dtype=torch.bool)

        return StoppingCriteriaList([_Stop()])
