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

__all__ = ["to_discord", "to_slack_mrkdwn"]

_FENCE = re.compile(r"^[ \t]*```")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
# ``__bold__`` is not converted: it would turn ``__init__`` written outside backticks into bold.
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S)
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+", re.M)
#: What stops a literal triple backtick from ending a code block early (a zero-width space inside).
_INERT_FENCE = "`\u200b``"


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
            parts.append(f"```{seg.lang}\n{seg.text.replace('```', _INERT_FENCE)}\n```")
        else:
            # A fence that does not start a line (``see ```py x``` here``) is not a block: keep it inert
            # so that it cannot open a code block that swallows the rest of the message.
            parts.append(seg.text.replace("```", _INERT_FENCE))
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
            body = _esc(seg.text.strip("\n")).replace("```", _INERT_FENCE)
            parts.append(f"```{body}```")
        else:
            parts.append(_slack_prose(seg.text.replace("```", _INERT_FENCE)))
    return _join(parts, segments)
