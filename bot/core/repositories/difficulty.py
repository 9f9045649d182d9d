"""The ``uow.difficulty`` port: each tenant's learned question difficulty and the first attempts it is
learned from (SQL: bot/storage/repositories/difficulty.py). Every method takes the tenant; a team's
answers and estimates are never read for another.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from bot.core.difficulty import DifficultyEstimate, FirstAttempt
from bot.core.models import Tenant


@dataclass(frozen=True)
class AskedAttempt:
    """A first attempt with the bank's label of the version that was asked (the estimate's prior)."""

    attempt: FirstAttempt
    label: str


@dataclass(frozen=True)
class LearnedDifficulty:
    """A stored estimate with the label it is compared with."""

    question_id: str
    label: str
    estimate: DifficultyEstimate


@dataclass(frozen=True)
class TopicAccuracy:
    """A team's first attempts on one topic in a window, and how many were right."""

    topic: str
    first_attempts: int
    first_correct: int

    @property
    def accuracy(self) -> float:
        """The share right (0 with no attempts)."""
        return self.first_correct / self.first_attempts if self.first_attempts else 0.0


class DifficultyRepository(Protocol):
    """Learned difficulty per (tenant, question)."""

    async def challenge_first_attempts(self, challenge_id: int) -> list[AskedAttempt]:
        """Every player's first attempt on each problem of the challenge."""
        ...

    async def lock_estimates(
        self, tenant: Tenant, labels: Mapping[str, str], now: dt.datetime
    ) -> dict[str, DifficultyEstimate]:
        """The tenant's estimates of these questions (question id -> label of the version asked), locked
        until the transaction ends (a concurrent close of another challenge waits, so no update is lost);
        a question without one gets its label's prior stored first.
        """
        ...

    async def lock_learned(self, tenant: Tenant, question_id: str) -> LearnedDifficulty | None:
        """The tenant's stored estimate of the question, locked until the transaction ends (None when the
        tenant never learned it: nothing is stored then).
        """
        ...

    async def learned_tenants(self, question_id: str) -> list[Tenant]:
        """Every tenant with a stored estimate of the question (the operator's correction of the shared
        question re-learns it in each; no tenant's answers are read for another).
        """
        ...

    async def closed_challenges_asking(self, tenant: Tenant, question_id: str) -> list[int]:
        """The ids of the tenant's closed challenges with a first attempt on the question, in order."""
        ...

    async def save_estimates(
        self,
        tenant: Tenant,
        estimates: Mapping[str, DifficultyEstimate],
        labels: Mapping[str, str],
        now: dt.datetime,
    ) -> None:
        """Replace the tenant's estimates of these (locked) questions and their labels."""
        ...

    async def estimates(self, tenant: Tenant, question_ids: Collection[str]) -> dict[str, DifficultyEstimate]:
        """The tenant's stored estimates of these questions (those without one are left out)."""
        ...

    async def learned(self, tenant: Tenant, min_attempts: int) -> list[LearnedDifficulty]:
        """The tenant's estimates with at least ``min_attempts`` first attempts."""
        ...

    async def topic_accuracy(self, tenant: Tenant, since: dt.datetime) -> list[TopicAccuracy]:
        """The tenant's first attempts per topic answered at or after ``since``."""
        ...
