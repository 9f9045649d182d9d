"""The bank's Markdown, rendered natively per chat platform (one place for both adapters).

Question prompts and explanations are written in Markdown (``**bold**``, ``*italic*``, `` `code` ``,
fenced blocks with a language tag, ``[text](url)`` links, ``-`` lists). Discord speaks that Markdown
almost as is; Slack's mrkdwn does not: bold is ``*bold*``, italic ``_italic_``, links ``<url|text>``, and
a fence's language tag would be shown as the first line of code. Both functions only change markup:
the adapters still neutralise mentions (Discord) and cut to the platforms' limits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["inert_backticks", "split_markdown", "to_discord", "to_slack_mrkdwn"]

_FENCE = re.compile(r"^[ \t]*```")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
# ``__bold__`` is not converted: it would turn ``__init__`` written outside backticks into bold.
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S)
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+", re.M)
_BACKTICK_RUN = re.compile(r"`{3,}")
ZWSP = "\u200b"


def inert_backticks(text: str) -> str:
    """Every run of three or more backticks broken by zero-width spaces (after the first, then after every
    second: ``````` -> ``\u200b```, ```````` -> ``\u200b``\u200b```), so that no run of three is left
    to open or close a code block: replacing each ``````` alone left ```````` as ``\u200b```` + ```.
    """
    return _BACKTICK_RUN.sub(
        lambda m: "`" + ZWSP + ZWSP.join(m.group()[1 + i : 3 + i] for i in range(0, len(m.group()) - 1, 2)),
        text,
    )


@dataclass(frozen=True)
class _Segment:
    """A run of the document: prose, or one fenced code block (its language tag and body)."""

    code: bool
    text: str
    lang: str = ""


def _segments(md: str) -> list[_Segment]:
    """Split Markdown into prose and fenced code blocks; an unclosed fence runs to the end."""
    out: list[_Segment] = []
    prose: list[str] = []
    lines = md.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not _FENCE.match(line):
            prose.append(line)
            i += 1
            continue
        if prose:
            out.append(_Segment(False, "\n".join(prose)))
            prose = []
        lang = line.strip()[3:].strip()
        body: list[str] = []
        i += 1
        while i < len(lines) and not _FENCE.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence (or the end)
        out.append(_Segment(True, "\n".join(body), lang))
    if prose:
        out.append(_Segment(False, "\n".join(prose)))
    return out


def _join(parts: list[str], segments: list[_Segment]) -> str:
    """Glue rendered segments back with the line breaks that separated them."""
    return "\n".join(parts).strip("\n") if segments else ""


def _cut_line(line: str, room: int) -> list[str]:
    """One line too long for a piece, cut at spaces (a word longer than ``room`` is cut where it must)."""
    parts: list[str] = []
    while len(line) > room:
        cut = line.rfind(" ", 1, room + 1)
        if cut <= 0:
            cut = room
        parts.append(line[:cut])
        line = line[cut:].lstrip(" ")
    return [*parts, line]


#: The longest fence line (```` ```python ````) repeated at the top of a piece that continues a code block.
MAX_REOPEN = 24


def split_markdown(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, nothing left out: cut at line ends (a line longer
    than a piece at spaces); a code block cut between two pieces is closed at the end of the first and
    opened again, with its language tag, at the start of the next, so each piece renders on its own.
    """
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    opener: str | None = None  # the fence line of the code block open at the end of ``current``
    reopened = False  # ``current`` holds only the fence that opens its block again

    def flush() -> None:
        nonlocal current, size, reopened
        if current:
            pieces.append("\n".join(current) + ("\n```" if opener is not None else ""))
        current = [opener] if opener is not None else []
        size = len(opener) if opener is not None else 0
        reopened = opener is not None

    for line in text.split("\n"):
        fence = bool(_FENCE.match(line))
        # A block is opened again with its fence line: ```` ```py ````, or ```` ``` ```` when that line is
        # long (text after the backticks) and would crowd the pieces.
        reopen = line.strip() if len(line.strip()) <= MAX_REOPEN else "```"
        after = (None if opener is not None else reopen) if fence else opener
        # Room for this line and, if a block is open before or after it, the closing fence a cut would add.
        closing = 4 if after is not None or opener is not None else 0
        room = limit - closing - (len(opener) + 1 if opener is not None else 0)
        for i, part in enumerate(_cut_line(line, max(1, room - 1))):
            if i and _FENCE.match(part):
                # A cut that puts backticks at the start of a line would make a fence of them.
                part = ZWSP + part
            if current and size + 1 + len(part) + closing > limit:
                flush()
            size += (1 if current else 0) + len(part)
            current.append(part)
            reopened = False
        opener = after
    if current and not reopened:
        pieces.append("\n".join(current))
    return pieces or [""]


# ------------------------------------------------------------------------------------------ Discord
def to_discord(md: str) -> str:
    """Markdown for a Discord message or embed: code fences stay code blocks (language tag kept, every
    fence closed), everything else is Discord's own Markdown already.
    """
    segments = _segments(md)
    parts = []
    for seg in segments:
        if seg.code:
            # A literal ``` inside the body would close the block early.
            parts.append(f"```{seg.lang}\n{inert_backticks(seg.text)}\n```")
        else:
            # A fence that does not start a line (``see ```py x``` here``) is not a block: keep it inert
            # so that it cannot open a code block that swallows the rest of the message.
            parts.append(inert_backticks(seg.text))
    return _join(parts, segments)


# -------------------------------------------------------------------------------------------- Slack
def _esc(text: str) -> str:
    """Escape mrkdwn's three control characters as entities (no mentions, no accidental links)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_inline(text: str) -> str:
    """One prose run without code spans: escape, then Markdown emphasis/links/headings to mrkdwn."""
    out: list[str] = []
    pos = 0
    for m in _LINK.finditer(text):
        out.append(_slack_emphasis(_esc(text[pos : m.start()])))
        label = _slack_emphasis(_esc(m.group(1))).replace("|", "¦")
        out.append(f"<{_esc(m.group(2))}|{label}>")
        pos = m.end()
    out.append(_slack_emphasis(_esc(text[pos:])))
    return "".join(out)


def _slack_emphasis(text: str) -> str:
    # Italic first (a single star), so that the bold written next is not read as italic again.
    text = _ITALIC_STAR.sub(lambda m: f"_{m.group(1)}_", text)
    text = _BOLD.sub(lambda m: f"*{m.group(1)}*", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = _HEADING.sub(lambda m: f"*{m.group(1)}*", text)
    return _BULLET.sub(lambda m: f"{m.group(1)}• ", text)


def _slack_prose(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _INLINE_CODE.finditer(text):
        out.append(_slack_inline(text[pos : m.start()]))
        # Code spans are literal: only escaped. mrkdwn has single-backtick spans only.
        out.append(f"`{_esc(m.group(2).strip())}`")
        pos = m.end()
    out.append(_slack_inline(text[pos:]))
    return "".join(out)


def to_slack_mrkdwn(md: str) -> str:
    """Markdown to Slack mrkdwn: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|text>``, ``•`` bullets,
    headings in bold, and fenced blocks without their language tag (Slack would show it as code).
    Everything is escaped for mrkdwn, code included.
    """
    segments = _segments(md)
    parts = []
    for seg in segments:
        if seg.code:
            body = inert_backticks(_esc(seg.text.strip("\n")))
            parts.append(f"```{body}```")
        else:
            parts.append(_slack_prose(inert_backticks(seg.text)))
    return _join(parts, segments)
