"""Domain errors: each carries a message fit to show a player as is."""

from __future__ import annotations


class RankZeroError(Exception):
    """Base of every error the service raises on purpose; ``str(err)`` is user-facing."""


class NotFoundError(RankZeroError):
    """A challenge, problem, question or player that does not exist."""


class TimeUpError(RankZeroError):
    """An answer or hint arrived after the problem's stored deadline."""


class NoAttemptsLeftError(RankZeroError):
    """The player has used every attempt for this problem."""


class ProblemOverError(RankZeroError):
    """The problem already ended for this player (answered correctly, out of attempts, or time up)."""


class NotStartedError(RankZeroError):
    """An answer for a problem the player has not started."""


class ChallengeClosedError(RankZeroError):
    """The challenge's window has closed."""


class NotAdminError(RankZeroError):
    """An admin action by someone who is not an admin."""


class InvalidAnswerError(RankZeroError):
    """A choice letter that the problem does not have."""


class PostRefusedError(RankZeroError):
    """The chat platform refused a post (the bot is not in the channel, lacks a permission or scope);
    the message says what to grant.
    """


class AlreadyTriedError(RankZeroError):
    """A wrong letter the player already tried on this problem (a double click): costs no attempt."""


class QuestionBankError(RankZeroError):
    """A question or bank file that fails validation; ``details`` lists ``file:line: field: message``."""

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or []


class ConfigurationError(RankZeroError):
    """A setting or schedule that cannot work (unknown timezone, bad time, zero problems...)."""


class RunnerUnavailableError(RankZeroError):
    """The runner cannot be reached, refused our token, or answered something outside its contract."""


class RateLimitedError(RankZeroError):
    """A player asked for more runner time than allowed (disputes and variants are rate limited)."""


class TooEarlyError(RankZeroError):
    """An action allowed only later (e.g. disputing a problem that is not over for the player yet)."""


class ScheduleConflictError(RankZeroError):
    """Another admin saved the schedule between this command's read and its write (the service reads it
    again and applies the change on top; the admin is told what changed meanwhile).
    """
