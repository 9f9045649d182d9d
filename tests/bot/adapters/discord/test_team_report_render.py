"""The Discord team report's text: question ids in code spans show as written (Discord shows a span's
text literally, so a markdown escape there would show its backslash).
"""

from __future__ import annotations

import datetime as dt

from bot.adapters.discord.sanitize import CODE_SPAN, code_span
from bot.adapters.discord.team_report import report_embed
from bot.core.cards import MissedQuestion, TeamReportCard


def _card(question_id: str) -> TeamReportCard:
    return TeamReportCard(
        "Team report", dt.date(2026, 11, 23), (), (MissedQuestion(1, question_id, "t*o_p", 3, 1, "x"),), ()
    )


def test_a_question_id_shows_without_escapes() -> None:
    """``world_size`` stays ``world_size`` in the span (no ``world\\_size``); the topic is still escaped."""
    embed = report_embed(_card("fam-abc/world_size=8,bucket_mb=25"), image=None)
    value = str(embed.fields[1].value)
    assert value.startswith("`fam-abc/world_size=8,bucket_mb=25` · ")
    assert "\\" not in value.split(" · ")[0]
    assert "t\\*o\\_p" in value


def test_a_backtick_cannot_close_the_span_and_the_span_is_bounded() -> None:
    """Backticks and line breaks are replaced; a long id is cut."""
    span = code_span("a`b\nc")
    assert span.count("`") == 2 and span.startswith("`") and span.endswith("`")
    assert "\n" not in span
    assert len(code_span("x" * 5000)) == CODE_SPAN + 2
    assert code_span("") == "`\u200b`"
