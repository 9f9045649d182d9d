"""Make echoed text safe for Discord and keep every message inside Discord's limits.

Question text, runner output and display names come from people: they must never ping anyone
(``AllowedMentions.none()`` on every send, plus neutralised mention syntax for clients that render it) and
never break out of a code block. Long content is truncated with a visible marker rather than rejected by the
API (which would lose the whole message).
"""

from __future__ import annotations

import re

import discord

from bot.adapters.markup import split_markdown

#: Discord's documented limits (https://discord.com/developers/docs/resources/message#embed-object-embed-limits).
MESSAGE_CONTENT = 2000
EMBED_TITLE = 256
EMBED_DESCRIPTION = 4096
EMBED_FIELDS = 25
FIELD_NAME = 256
FIELD_VALUE = 1024
FOOTER_TEXT = 2048
EMBED_TOTAL = 6000
BUTTONS_PER_ROW = 5
ROWS = 5
BUTTON_LABEL = 80

__all__ = ["split_markdown"]  # re-exported: Discord cuts long fields with it

MARKER = "… (truncated)"
ZWSP = "\u200b"

_MENTION = re.compile(r"<(@[!&]?|#)(\d+)>")
_EVERYONE = re.compile(r"@(everyone|here)")


def no_mentions() -> discord.AllowedMentions:
    """What every send passes: nobody is pinged, whatever the text says."""
    return discord.AllowedMentions.none()


def neutralise_mentions(text: str) -> str:
    """Break ``@everyone``, ``@here``, ``<@123>``, ``<@&1>`` and ``<#1>`` with a zero-width space."""
    text = _EVERYONE.sub(lambda m: f"@{ZWSP}{m.group(1)}", text)
    return _MENTION.sub(lambda m: f"<{m.group(1)}{ZWSP}{m.group(2)}>", text)


def escape_fences(text: str) -> str:
    """Make triple backticks inert, so echoed text cannot open or close a code block."""
    return text.replace("```", f"`{ZWSP}`{ZWSP}`")


def safe_text(text: str) -> str:
    """Markdown authored text (question prompts, explanations): keep its markup, drop pings and fences."""
    return neutralise_mentions(escape_fences(text))


def plain(text: str) -> str:
    """Untrusted plain text (display names): no markdown, no pings."""
    return neutralise_mentions(discord.utils.escape_markdown(text))


#: A code span's text is at most this long (an id, a short name: not a place for prose).
CODE_SPAN = 100


def code_span(text: str, limit: int = CODE_SPAN) -> str:
    """``text`` as an inline code span: Discord shows a span's text literally (a markdown escape would show
    its backslash), so no escapes; a backtick (which would close the span) becomes a look-alike, line
    breaks become spaces, and the text is cut to ``limit`` characters.
    """
    body = text.replace("`", "\u02cb").replace("\r", " ").replace("\n", " ")
    return f"`{truncate(body, limit) or ZWSP}`"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with MARKER when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(MARKER))] + MARKER


def code_block(code: str, lang: str = "py", limit: int = FIELD_VALUE) -> str:
    """A fenced code block of at most ``limit`` characters; inner fences escaped, cut with a marker."""
    body = escape_fences(code.rstrip("\n"))
    overhead = len(f"```{lang}\n\n```")
    if len(body) + overhead > limit:
        body = truncate(body, limit - overhead)
    return f"```{lang}\n{body}\n```"


def split_text(text: str, limit: int = MESSAGE_CONTENT) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, at line ends where possible."""
    chunks: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        if cut <= 0:
            cut = limit
        chunks.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    if rest or not chunks:
        chunks.append(rest)
    return chunks


def _embed_size(embed: discord.Embed) -> int:
    return len(embed)


def fit_embed(embed: discord.Embed) -> discord.Embed:
    """Truncate an embed in place to every Discord limit (title, description, fields, footer, total)."""
    if embed.title:
        embed.title = truncate(embed.title, EMBED_TITLE)
    if embed.description:
        embed.description = truncate(embed.description, EMBED_DESCRIPTION)
    fields = embed.fields
    if len(fields) > EMBED_FIELDS:
        dropped = len(fields) - (EMBED_FIELDS - 1)
        kept = fields[: EMBED_FIELDS - 1]
        embed.clear_fields()
        for f in kept:
            embed.add_field(name=f.name, value=f.value, inline=f.inline)
        embed.add_field(name=MARKER, value=f"{dropped} more not shown", inline=False)
    for i, f in enumerate(list(embed.fields)):
        name = truncate(f.name or ZWSP, FIELD_NAME)
        value = truncate(f.value or ZWSP, FIELD_VALUE)
        if (name, value) != (f.name, f.value):
            embed.set_field_at(i, name=name, value=value, inline=f.inline)
    if embed.footer.text:
        embed.set_footer(text=truncate(embed.footer.text, FOOTER_TEXT), icon_url=embed.footer.icon_url)
    # The total: shorten the description first, then drop trailing fields.
    excess = _embed_size(embed) - EMBED_TOTAL
    if excess > 0 and embed.description:
        keep = max(len(MARKER), len(embed.description) - excess)
        embed.description = truncate(embed.description, keep)
    while _embed_size(embed) > EMBED_TOTAL and embed.fields:
        embed.remove_field(len(embed.fields) - 1)
        if _embed_size(embed) + len(MARKER) + 1 <= EMBED_TOTAL:
            embed.add_field(name=MARKER, value=ZWSP, inline=False)
            break
    return embed


def split_embed(embed: discord.Embed) -> list[discord.Embed]:
    """An embed too big for one message as several, none cut: each holds at most 25 fields and 6000
    characters; the first keeps the title and description, the last the footer, the later ones are
    titled "(continued)". Each is sent as its own message (a message's embeds share the 6000).
    """
    footer = embed.footer.text or ""
    first = discord.Embed(title=embed.title, description=embed.description, colour=embed.colour)
    out = [first]
    for f in embed.fields:
        name, value = f.name or ZWSP, f.value or ZWSP
        last = out[-1]
        if len(last.fields) >= EMBED_FIELDS or len(last) + len(name) + len(value) > EMBED_TOTAL - len(footer):
            last = discord.Embed(title=f"{embed.title or ''} (continued)"[-EMBED_TITLE:], colour=embed.colour)
            out.append(last)
        last.add_field(name=name, value=value, inline=f.inline)
    if footer:
        out[-1].set_footer(text=footer)
    return [fit_embed(e) for e in out]


def layout(
    items: list[discord.ui.Item[discord.ui.View]], *, rows: int = ROWS
) -> list[list[discord.ui.Item[discord.ui.View]]]:
    """Buttons into rows of at most five; items beyond five rows are dropped (callers keep them few)."""
    grid = [items[i : i + BUTTONS_PER_ROW] for i in range(0, len(items), BUTTONS_PER_ROW)]
    return grid[:rows]
