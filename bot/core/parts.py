"""Posts in several messages, sent once per part across retries.

A platform adapter that sends one post as several messages (Discord's results when a large tie is over one
embed's limits, a long admin notice split in chunks) sends them through :func:`send_parts`. When the outbox
delivers the post it sets a :class:`PartLedger` for the duration of the send: each message the platform
accepted is recorded in the outbox row (fenced by the claim, like the row's other writes) before the next
one is sent, and a retry skips the messages recorded. Without the ledger, a failure at message 2 of 3 made
the retry send message 1 again.

Why a context variable rather than a parameter of every ``ChatPlatform`` method: the ledger is the outbox's
business, and the port has many implementations (each adapter, the router, the metrics wrapper, fakes)
that only pass the call through; the adapters that split a post are the only ones that need to look.

A message the platform accepted while the process died before its record committed (one database write)
is not sent again when the platform can be asked: each message carries its post's mark (:class:`PostMark`,
below; bot/core/outbox.py), as a post of one message does. And a
post rebuilt differently at the retry (results are rendered from live standings: a renamed player, a
correction) is split differently, so skipping "the first k messages" would drop or repeat content: the
ledger keeps a digest of the whole split with its count, and a retry whose split differs sends it all again
(some lines twice, rather than some never).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class LeaseLostError(Exception):
    """The sender's claim on the post ended (another sender took it over): stop sending its parts."""


class PartLedger:
    """The parts of one post accepted so far (``done``: the first ``done`` messages of the split whose
    digest is ``digest``), and how to record one more (``record(n, digest)``: False when the claim no longer
    holds the post).
    """

    def __init__(
        self, done: int, record: Callable[[int, str], Awaitable[bool]], digest: str | None = None
    ) -> None:
        self.done = done
        self.digest = digest
        self._record = record

    async def accepted(self, count: int, digest: str) -> None:
        """The first ``count`` messages of the split ``digest`` were accepted: record it, or raise
        LeaseLostError.
        """
        if not await self._record(count, digest):
            raise LeaseLostError("another sender holds this post now: the rest of its parts are theirs")
        self.done = count
        self.digest = digest


def digest_of(keys: Iterable[str]) -> str:
    """A digest of a split (each part's text, in order): equal splits, equal digests."""
    hashed = hashlib.sha256()
    for key in keys:
        part = key.encode("utf-8", "surrogatepass")
        # Length-prefixed: two splits never collide by joining their parts differently.
        hashed.update(len(part).to_bytes(8, "big") + part)
    return hashed.hexdigest()[:32]


_LEDGER: ContextVar[PartLedger | None] = ContextVar("rankzero_part_ledger", default=None)


@contextlib.contextmanager
def ledger(current: PartLedger) -> Iterator[PartLedger]:
    """Use ``current`` for the sends made inside the block (the outbox's delivery of one post)."""
    token = _LEDGER.set(current)
    try:
        yield current
    finally:
        _LEDGER.reset(token)


async def send_parts(
    parts: Iterable[T], send: Callable[[T], Awaitable[object]], key: Callable[[T], str] = repr
) -> int:
    """Send each part in order, skipping those the current ledger says were accepted already, and record
    each accepted one before the next; how many were sent now. Without a ledger (a direct call), all.
    ``key`` gives a part's content as text (for the split's digest).
    """
    current = _LEDGER.get()
    split = list(parts)
    digest = digest_of(key(part) for part in split)
    # The first try's split differs from this one: its "first k" are other messages; send everything.
    done = current.done if current is not None and current.digest in (None, digest) else 0
    if current is not None and current.done and current.digest not in (None, digest):
        log.warning("a post in parts changed between tries: all %d parts are sent again", len(split))
    sent = 0
    for index, part in enumerate(split):
        if current is not None and index < done:
            continue
        token = _PART.set(index)  # the part's mark (current_part_mark) for the adapter's send
        try:
            await send(part)
        finally:
            _PART.reset(token)
        sent += 1
        if current is not None:
            await current.accepted(index + 1, digest)
    return sent


# ---------------------------------------------------------------------------------------------- post marks
#: The marks of a post are this long at most (Discord's nonce takes 25 characters; Slack's metadata more).
MARK_MAX = 64


@dataclass(frozen=True)
class PostMark:
    """The idempotency mark of the post the outbox delivers now: each message the platform accepts carries
    ``part(i)`` (Slack: the message's metadata; Discord: its nonce), so a later try can ask the platform
    whether the message exists already instead of posting it again.

    ``key``: the outbox row's identity (its id and when it was queued: ids of purged rows may be reused).
    ``uncertain``: an earlier claim of this row may have reached the platform (every claim is committed
    before its send, so a row claimed before was maybe accepted, its record lost with the process that
    died, or its answer lost in a timeout): the adapter looks for the marks before posting.
    """

    key: str
    uncertain: bool

    def part(self, index: int) -> str:
        """The mark of message ``index`` of the post (0: the first, or only, one)."""
        return f"{self.key}.{index}"[:MARK_MAX]

    def index_of(self, mark: object) -> int | None:
        """Which message of this post ``mark`` (read back from the platform, hostile) is; None: not ours."""
        if not isinstance(mark, str) or not mark.startswith(f"{self.key}."):
            return None
        tail = mark[len(self.key) + 1 :]
        return int(tail) if tail.isascii() and tail.isdigit() and len(tail) <= 4 else None


_MARK: ContextVar[PostMark | None] = ContextVar("rankzero_post_mark", default=None)
#: Which message of a post in parts :func:`send_parts` is sending (0 outside it: a post of one message).
_PART: ContextVar[int] = ContextVar("rankzero_post_part", default=0)


@contextlib.contextmanager
def marked(mark: PostMark) -> Iterator[PostMark]:
    """Mark the posts made inside the block with ``mark`` (the outbox's delivery of one post)."""
    token = _MARK.set(mark)
    try:
        yield mark
    finally:
        _MARK.reset(token)


def current_mark() -> PostMark | None:
    """The mark of the post being delivered (None: a direct post, outside the outbox)."""
    return _MARK.get()


def current_part_mark() -> str | None:
    """The mark of the message being sent now: the current post's mark of the part :func:`send_parts` is
    sending (the first, for a post of one message); None outside an outbox delivery.
    """
    mark = _MARK.get()
    return None if mark is None else mark.part(_PART.get())
