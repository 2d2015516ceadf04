"""Reward functions the ``python`` grader tests name by dotted path."""

from __future__ import annotations

from typing import Any


def exact_match(payload: dict[str, Any], answer: str) -> float:
    return float(answer.strip() == str(payload["answer"]))


async def graded_parts(payload: dict[str, Any], answer: str) -> dict[str, float]:
    return {"correct": float(answer.strip() == str(payload["answer"])), "short": 1.0}


def crashes(payload: dict[str, Any], answer: str) -> float:
    return float(1 / len(answer.strip()))


NOT_CALLABLE = 3
