"""The HTML of a channel's read-only page and of its refusals (issue 30 §3).

Everything that comes from players or admins (display names, topics, question ids, titles) is hostile:
it is HTML-escaped (quotes too) and set in ``<bdi>`` so a right-to-left name cannot reorder the line
around it. The page has no script and one inline stylesheet, allowed by its hash in the
Content-Security-Policy (bot/adapters/web/server.py); the heatmap is an inline ``data:`` PNG with its alt
text.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Sequence

from bot.core.cards import LeaderboardCard, TeamReportCard
from bot.core.models import StandingRow
from bot.core.web_page import ChannelPage

#: The page's only style: inline, allowed by its hash (no 'unsafe-inline').
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#1b1b1b;"
    "background:#fafafa}h1{font-size:1.6rem}h2{margin-top:2rem;border-bottom:2px solid #4a6fa5}"
    "table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}"
    "th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #ddd}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#e8eef7}"
    ".cols{display:flex;gap:2rem;flex-wrap:wrap}.cols>section{flex:1 1 22rem}"
    "img{max-width:100%;height:auto;border:1px solid #ddd}.note{color:#555}"
)
#: The CSP source that allows :data:`STYLE` and nothing else inline.
STYLE_HASH = "'sha256-" + base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode() + "'"


def esc(text: object) -> str:
    """``text`` escaped for HTML text and attribute values (quotes included)."""
    return html.escape(str(text), quote=True)


def name(text: str) -> str:
    """A hostile name, escaped and isolated from the text around it (bidi)."""
    return f"<bdi>{esc(text)}</bdi>"


def document(title: str, body: str) -> str:
    """A whole HTML page: ``title`` is escaped here, ``body`` is HTML already built from escaped parts."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def refusal_page(title: str, message: str, hint: str) -> str:
    """The plain page a refused link gets: what happened and what to do."""
    return document(title, f"<h1>{esc(title)}</h1>\n<p>{esc(message)}.</p>\n<p>{esc(hint)}</p>")


def _rows(rows: Sequence[StandingRow]) -> str:
    return "\n".join(
        f'<tr><td class="n">{r.rank}</td><td>{name(r.display_name)}</td>'
        f'<td class="n">{r.points}</td><td class="n">{r.correct}</td></tr>'
        for r in rows
    )


def leaderboard_section(heading: str, card: LeaderboardCard) -> str:
    """One leaderboard as a table (or a line saying nobody scored yet)."""
    if not card.rows:
        table = '<p class="note">Nobody has scored yet.</p>'
    else:
        table = (
            "<table><thead><tr><th>#</th><th>Player</th><th>Points</th><th>Solved</th></tr></thead>"
            f"<tbody>\n{_rows(card.rows)}\n</tbody></table>"
        )
    players = "1 player" if card.total_players == 1 else f"{card.total_players} players"
    more = f'<p class="note">{players} in all.</p>' if card.total_players else ""
    return f"<section><h2>{esc(heading)}</h2>\n{table}\n{more}</section>"


def report_section(card: TeamReportCard, heatmap: tuple[bytes, str] | None, why: str | None) -> str:
    """The team report: the heatmap (inline PNG with its alt text), the movers and the most-missed
    problems (their explanations stay in chat).
    """
    parts = [f"<h2>{esc(card.title)}</h2>"]
    if not card.cells:
        parts.append('<p class="note">No first attempts were recorded in this channel that week.</p>')
    elif heatmap is not None:
        png, alt = heatmap
        data = base64.b64encode(png).decode("ascii")
        parts.append(f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">')
    else:
        parts.append(f'<p class="note">The heatmap could not be drawn ({esc(why or "unknown")}).</p>')
    if card.movers:
        items = "".join(
            f"<li>{name(m.display_name)}: {m.points} points, rank {m.rank}"
            f"{'' if m.previous_rank is None else f' (was {m.previous_rank})'}"
            f"{' (new)' if m.previous_rank is None else ''}</li>"
            for m in card.movers
        )
        parts.append(f"<h3>Movers</h3><ul>{items}</ul>")
    if card.missed:
        items = "".join(
            f"<li><bdi>{esc(m.question_id)}</bdi> ({name(m.topic)}): {m.first_correct} of "
            f"{m.first_attempts} right at the first try</li>"
            for m in card.missed
        )
        parts.append(f"<h3>Most missed</h3><ul>{items}</ul>")
    return "<section>" + "\n".join(parts) + "</section>"


def channel_document(page: ChannelPage, heatmap: tuple[bytes, str] | None, why: str | None) -> str:
    """The whole page of one channel."""
    target = page.target
    until = page.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join(
        [
            "<h1>RankZero · leaderboard and team report</h1>",
            f'<p class="note">Channel <bdi>{esc(target.channel_id)}</bdi> ({esc(target.platform)}). '
            f"Read-only; this link works until {esc(until)}.</p>",
            '<div class="cols">',
            leaderboard_section("This week", page.week),
            leaderboard_section("All time", page.all_time),
            "</div>",
            report_section(page.report, heatmap, why),
        ]
    )
    return document("RankZero · leaderboard and team report", body)
