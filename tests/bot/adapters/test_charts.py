"""The chart renderers (issue 30): valid PNGs of a fixed size, alt text that says what the picture shows
(bounded for Slack's 1,000 characters), hostile names drawn as plain text and cut, empty data drawn as a
sensible picture, sizes bounded. (Render times: benchmarks/chart_render.py, not here.)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Callable

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from bot.adapters import charts
from bot.adapters.charts import (
    ALT_NAME_CHARS,
    MAX_ALT_TEXT,
    MAX_PNG_BYTES,
    MAX_TOPICS,
    Chart,
    ChartTooLargeError,
    player_chart,
    render,
    team_heatmap,
)
from bot.core.cards import DayPoints, HeatCell, StatsCard, TeamReportCard, TopicStat
from tests.bot.cli.test_cli_stats_png import png_size

TODAY = dt.date(2026, 11, 27)  # a Friday
WEEK = dt.date(2026, 11, 23)
HOSTILE = [
    r"$\frac{1}{0}$",
    "x" * 500,
    "\u202eevil\u200b\u200dname\u2066",  # right-to-left override, zero-width space and joiner, isolate
    "שלום עולם",  # right-to-left script
    "中文 topic 🎉",  # glyphs the bundled font lacks
    "[red]markup[/red] <b>&amp;</b> `code` *bold*",
    "line\nbreak\ttab\x1b[2J",
]


def stats_card(
    name: str = "Ada",
    *,
    points: dict[int, int] | None = None,
    topics: tuple[TopicStat, ...] = (),
    played_ago: tuple[int, ...] = (),
    streak: int = 0,
) -> StatsCard:
    """A card as QuizService.stats builds it: 30 days of points (``points``: days ago -> points)."""
    points = points or {}
    daily = tuple(DayPoints(TODAY - dt.timedelta(days=n), points.get(n, 0)) for n in range(29, -1, -1))
    return StatsCard(
        display_name=name,
        points=sum(points.values()),
        problems=sum(t.answered for t in topics),
        correct=sum(t.correct for t in topics),
        challenges_completed=len(played_ago),
        streak=streak,
        longest_streak=max(streak, 9),
        badges=(),
        by_topic=topics,
        daily_points=daily,
        played_days=tuple(sorted(TODAY - dt.timedelta(days=n) for n in played_ago)),
        today=TODAY,
    )


def team_card(cells: tuple[HeatCell, ...], title: str = "#ml-team") -> TeamReportCard:
    return TeamReportCard(title=title, week_start=WEEK, cells=cells, missed=(), movers=())


def drawn_texts(
    monkeypatch: pytest.MonkeyPatch, draw: Callable[[], Chart], figures: list[Figure] | None = None
) -> list[Text]:
    """Every text of the figure ``draw`` renders, as drawn (tick labels included); ``figures`` gets it."""
    figures = [] if figures is None else figures
    real_png = charts._png

    def keep(fig: Figure) -> bytes:
        figures.append(fig)
        return real_png(fig)

    monkeypatch.setattr(charts, "_png", keep)
    draw()
    (fig,) = figures
    return [t for t in fig.findobj(Text) if isinstance(t, Text) and t.get_visible() and t.get_text()]


def test_player_chart_is_a_png_whose_alt_text_says_what_it_shows() -> None:
    card = stats_card(
        points={0: 12, 2: 30, 9: 5},
        topics=(TopicStat("ddp", 10, 8), TopicStat("fsdp", 4, 1), TopicStat("nccl", 0, 0)),
        played_ago=(0, 1, 2, 9, 40),
        streak=3,
    )
    chart = player_chart(card)
    assert png_size(chart.png) == (900, 640) and len(chart.png) <= MAX_PNG_BYTES
    assert chart.filename == "rankzero-stats.png"
    alt = chart.alt_text
    assert alt.startswith("Stats of Ada: 47 points, 9/14 problems solved.")
    assert "Points over the last 30 days: 47 total, best day 2026-11-25 (30), points on 3 of 30 days." in alt
    assert "Accuracy by topic: ddp 80% (8/10), fsdp 25% (1/4)." in alt and "nccl" not in alt
    # Today is a Friday: the calendar shows 4 full weeks and this week to Friday, 33 days; day 40 is out.
    assert alt.endswith("Streak: 3 days (longest 9), played 4 of the last 33 days.")


def test_the_same_card_gives_the_same_bytes() -> None:
    card = stats_card(points={1: 3}, topics=(TopicStat("ddp", 2, 1),), played_ago=(1,))
    assert player_chart(card) == player_chart(card)


def test_a_new_player_gets_a_picture_and_says_so() -> None:
    empty = StatsCard("Newcomer", 0, 0, 0, 0, 0, 0, (), ())  # not even the chart's fields
    for card in (empty, stats_card("Newcomer")):
        chart = player_chart(card)
        assert png_size(chart.png) == (900, 640)
        assert "Points over the last 30 days: none yet." in chart.alt_text
        assert "Accuracy by topic: no answers yet." in chart.alt_text
    assert "played 0 of the last 33 days" in player_chart(stats_card("Newcomer")).alt_text


def test_only_the_most_answered_topics_are_drawn_and_the_rest_counted() -> None:
    topics = tuple(TopicStat(f"topic-{i:02d}", 100 - i, i % 7) for i in range(MAX_TOPICS + 5))
    chart = player_chart(stats_card(topics=topics))
    assert "topic-11 " in chart.alt_text and "topic-12 " not in chart.alt_text
    assert "and 5 more topics." in chart.alt_text


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_names_are_drawn_as_plain_text_and_cut(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    card = stats_card(name, topics=(TopicStat(name, 3, 2), TopicStat("ddp", 2, 2)), points={0: 4})
    texts = drawn_texts(monkeypatch, lambda: player_chart(card))
    for text in texts:
        # No mathtext where a name could put a "$": drawn as those characters, never parsed (nor by LaTeX).
        assert not text.get_usetex(), text.get_text()
        assert "$" not in text.get_text() or not text.get_parse_math(), text.get_text()
        assert not any(ch in text.get_text() for ch in "\u202e\u200b\u200d\u2066\x1b中🎉")
    drawn = "\n".join(t.get_text() for t in texts)
    if "$" in name:
        assert name in drawn, "drawn as typed"
    assert "ddp" in drawn and "x" * 25 not in drawn, "a name is cut on the picture"
    alt = player_chart(card).alt_text
    assert len(alt) <= MAX_ALT_TEXT
    assert not any(ch in alt for ch in "\u202e\u200b\u200d\u2066\x1b\n\t")
    shown = charts.clean_text(name, ALT_NAME_CHARS)
    assert f"Stats of {shown}:" in alt and len(shown) <= ALT_NAME_CHARS
    assert "x" * ALT_NAME_CHARS not in alt
    if name == "x" * 500:
        assert shown == "x" * (ALT_NAME_CHARS - 1) + "…"


def test_math_in_a_name_stays_literal_in_the_alt_text() -> None:
    alt = player_chart(stats_card(r"$\frac{1}{0}$", topics=(TopicStat("$x$", 1, 1),))).alt_text
    assert r"Stats of $\frac{1}{0}$:" in alt and "$x$ 100% (1/1)" in alt


def test_a_huge_record_stays_within_the_bounds() -> None:
    topics = tuple(TopicStat("t" * 200 + str(i), 10**6 + i, i) for i in range(2000))
    card = stats_card(
        "y" * 500, points={n: 10**9 for n in range(30)}, topics=topics, played_ago=tuple(range(400))
    )
    chart = player_chart(card)
    assert png_size(chart.png) == (900, 640) and len(chart.png) <= MAX_PNG_BYTES
    assert len(chart.alt_text) <= MAX_ALT_TEXT and chart.alt_text.endswith("played 33 of the last 33 days.")
    assert "(more topics)" in chart.alt_text


def test_a_chart_over_the_size_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(charts, "MAX_PNG_BYTES", 1000)
    with pytest.raises(ChartTooLargeError, match="over 1000"):
        player_chart(stats_card())


CELLS = (
    HeatCell("ddp", "beginner", 10, 8),
    HeatCell("ddp", "advanced", 5, 1),
    HeatCell("fsdp", "intermediate", 7, 3),
    HeatCell("fsdp", "intermediate", 3, 3),  # the same cell twice: summed
    HeatCell("nccl", "beginner", 4, 4),
    HeatCell("zero", "expert", 3, 0),
    HeatCell("idle", "beginner", 0, 0),  # no attempts: not a row
)


def test_team_heatmap_is_a_png_whose_alt_text_lists_the_weakest_cells_first() -> None:
    chart = team_heatmap(team_card(CELLS))
    width, height = png_size(chart.png)
    assert width == 800 and height > 200 and len(chart.png) <= MAX_PNG_BYTES
    assert chart.filename == "rankzero-team-report-2026-11-23.png"
    alt = chart.alt_text
    assert alt.startswith("#ml-team: first-attempt accuracy by topic and difficulty, week of 2026-11-23.")
    assert "32 first attempts on 4 topics, 59% (19/32) correct overall." in alt
    assert "Weakest: zero expert 0% (0/3); ddp advanced 20% (1/5); fsdp intermediate 60% (6/10);" in alt
    assert "Strongest: nccl beginner 100% (4/4)." in alt and "idle" not in alt


def test_team_heatmap_annotates_cells_and_marks_empty_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    figures: list[Figure] = []
    texts = [t.get_text() for t in drawn_texts(monkeypatch, lambda: team_heatmap(team_card(CELLS)), figures)]
    assert {"8/10\n80%", "1/5\n20%", "6/10\n60%", "4/4\n100%", "0/3\n0%"} <= set(texts)
    # 4 topics x 4 difficulties (the bank's three always, expert as one cell has it): 11 empty cells, each
    # marked with a dash.
    (marks,) = figures[0].axes[0].collections[-1:]
    assert isinstance(marks, PathCollection) and np.asarray(marks.get_offsets()).shape == (4 * 4 - 5, 2)
    assert [t for t in texts if t in ("beginner", "intermediate", "advanced", "expert")] == [
        "beginner",
        "intermediate",
        "advanced",
        "expert",
    ]


def test_an_empty_week_is_a_picture_that_says_so() -> None:
    chart = team_heatmap(team_card(()))
    assert png_size(chart.png)[0] == 800
    assert chart.alt_text.endswith("No first attempts this week.")


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_topics_and_labels_on_the_heatmap(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    cells = (HeatCell(name, name, 4, 1), HeatCell("ddp", "beginner", 2, 2))
    texts = drawn_texts(monkeypatch, lambda: team_heatmap(team_card(cells, title=name)))
    assert all(not t.get_usetex() and ("$" not in t.get_text() or not t.get_parse_math()) for t in texts)
    alt = team_heatmap(team_card(cells, title=name)).alt_text
    assert len(alt) <= MAX_ALT_TEXT and "1/4" in alt
    assert not any(ch in alt for ch in "\u202e\u200b\u200d\u2066\x1b\n\t")


def test_a_huge_week_stays_within_the_bounds() -> None:
    cells = tuple(
        HeatCell(f"topic-{t:04d}", f"level-{d}", 1000 + t, t % 900) for t in range(500) for d in range(20)
    )
    chart = team_heatmap(team_card(cells, title="z" * 400))
    assert len(chart.png) <= MAX_PNG_BYTES and len(chart.alt_text) <= MAX_ALT_TEXT
    assert "488 more topics not shown." in chart.alt_text


async def test_render_draws_in_a_worker_thread() -> None:
    seen: list[int] = []

    def draw(card: StatsCard) -> Chart:
        seen.append(threading.get_ident())
        return player_chart(card)

    card = stats_card(points={0: 1})
    charts_drawn = await asyncio.gather(render(draw, card), render(draw, card))
    assert charts_drawn[0] == charts_drawn[1] == player_chart(card)
    assert threading.get_ident() not in seen and len(seen) == 2
