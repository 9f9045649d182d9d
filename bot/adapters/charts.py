"""Charts as PNG images for every platform (issue 30): a player's stats picture and a team's weekly heatmap.

Rendered server-side with matplotlib's Agg backend (no display), off the event loop (:func:`render`), in a
colour-blind-safe palette; every chart carries the alt text the platforms show in its place.

Thread safety: :func:`render` draws in worker threads, so nothing here goes through ``pyplot`` (its global
figure manager is not thread-safe) or changes ``rcParams``; each chart is a private
:class:`~matplotlib.figure.Figure` on its own Agg canvas. Names are hostile: every text that carries one is
drawn with ``parse_math=False`` (a ``$...$`` name is not mathtext), stripped of control, bidi-override and
zero-width characters, cut to a fixed length, and characters the bundled font lacks become ``?`` (no
tofu, no "glyph missing" warnings).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import io
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from bot.core.cards import DayPoints, HeatCell, StatsCard, TeamReportCard, TopicStat
from bot.core.vocabulary import Difficulty

if TYPE_CHECKING:  # matplotlib is imported lazily: the bot starts without paying for it
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_Card = TypeVar("_Card")

#: Okabe & Ito's colour-blind-safe palette (Color Universal Design), the colours the charts use.
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
}
#: The heatmap's colormap: sequential, perceptually uniform and readable with every common colour-vision
#: deficiency (cividis was designed for it); empty cells are grey with a dash, not a colour.
HEATMAP_CMAP = "cividis"
_GREY = "#D9D9D9"
_EMPTY = "#F2F2F2"

#: Upper bound on a chart's PNG: Discord (10 MiB free tier) and Slack (files far larger) accept much more;
#: a chart over this is a bug (the figures are fixed-size), refused rather than uploaded.
MAX_PNG_BYTES = 1024 * 1024
#: Slack's ``alt_txt`` (files.completeUploadExternal) takes at most 1,000 characters; Discord's
#: attachment description 1,024. The alt text fits both.
MAX_ALT_TEXT = 1000
#: At most this many topics drawn (the player's most-answered, the team's most-attempted): the figure has
#: a fixed height, and a longer list would not be readable.
MAX_TOPICS = 12
#: At most this many difficulty columns on the heatmap (the bank's four labels, then unknown ones).
MAX_DIFFICULTIES = 6
#: The points chart covers the last 30 days; the streak calendar the last 5 weeks.
POINTS_DAYS = 30
CALENDAR_WEEKS = 5
#: Characters kept of a name on the picture and in the alt text ("…" marks a cut).
NAME_CHARS = 24
ALT_NAME_CHARS = 40
_DPI = 100

_mpl_lock = threading.Lock()
_mpl_ready = False


@dataclass(frozen=True)
class Chart:
    """A rendered chart: PNG bytes, the alt text that describes it, and the file name to attach it as."""

    png: bytes
    alt_text: str
    filename: str


class ChartTooLargeError(RuntimeError):
    """A rendered PNG is over :data:`MAX_PNG_BYTES` (a bug: the figures have a fixed size)."""


def _matplotlib() -> None:
    """Import matplotlib and select Agg once per process (lazily: only processes that draw pay for it)."""
    global _mpl_ready
    with _mpl_lock:
        if not _mpl_ready:
            import matplotlib

            matplotlib.use("Agg")
            _mpl_ready = True


@functools.cache
def _font_charmap() -> frozenset[int]:
    """The code points the default font (matplotlib's bundled DejaVu Sans) can draw."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    path = font_manager.findfont(font_manager.FontProperties())
    return frozenset(FT2Font(path).get_charmap())


# Unicode categories dropped from names: controls, format characters (bidi overrides and isolates,
# zero-width joiners and spaces, the BOM), unassigned, private use and surrogates.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs"})


def clean_text(text: str, limit: int) -> str:
    """``text`` made safe to show: dropped invisible and control characters, whitespace runs folded to
    one space, cut to ``limit`` characters with "…". Used for the alt text (any platform escapes it
    further for its own markup).
    """
    kept = []
    for ch in unicodedata.normalize("NFC", text):
        if ch.isspace():
            ch = " "
        elif unicodedata.category(ch) in _DROPPED_CATEGORIES:
            continue
        kept.append(ch)
    folded = " ".join("".join(kept).split())
    if len(folded) > limit:
        folded = folded[: max(0, limit - 1)].rstrip() + "…"
    return folded or "?"


def _drawable(text: str, limit: int) -> str:
    """``text`` for the picture: :func:`clean_text`, then characters the font lacks replaced by ``?``."""
    charmap = _font_charmap()
    return "".join(ch if ord(ch) in charmap else "?" for ch in clean_text(text, limit))


def _cut(parts: Iterable[str], limit: int, more: str = "…") -> str:
    """Join ``parts`` with spaces while they fit ``limit``; ``more`` ends a text that had to stop early."""
    out = ""
    for part in parts:
        candidate = f"{out} {part}" if out else part
        if len(candidate) > limit - len(more) - 1:
            return f"{out} {more}".strip()[:limit]
        out = candidate
    return out[:limit]


def _png(fig: Figure) -> bytes:
    """The figure as PNG bytes on its own Agg canvas (no pyplot); refused over :data:`MAX_PNG_BYTES`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # attaches itself to the figure: savefig draws on this canvas, not pyplot's
    buf = io.BytesIO()
    # No software version in the file: the same card gives the same bytes on every matplotlib release.
    fig.savefig(buf, format="png", metadata={"Software": None})
    png = buf.getvalue()
    if len(png) > MAX_PNG_BYTES:
        raise ChartTooLargeError(f"chart is {len(png)} bytes, over {MAX_PNG_BYTES}")
    return png


def _pct(correct: int, answered: int) -> str:
    return f"{round(100 * correct / answered)}% ({correct}/{answered})" if answered else "no answers"


# --- the player's picture -----------------------------------------------------------------------------


def _recent_points(card: StatsCard) -> list[DayPoints]:
    """The last :data:`POINTS_DAYS` entries of the card's daily points (oldest first, negatives as 0)."""
    days = sorted(card.daily_points, key=lambda d: d.day)[-POINTS_DAYS:]
    return [DayPoints(d.day, max(0, d.points)) for d in days]


def _top_topics(topics: Sequence[TopicStat]) -> list[TopicStat]:
    """The player's :data:`MAX_TOPICS` most-answered topics (ties by name), counts made consistent."""
    clean = [
        TopicStat(t.name, max(0, t.answered), min(max(0, t.correct), max(0, t.answered)))
        for t in topics
        if t.answered > 0
    ]
    return sorted(clean, key=lambda t: (-t.answered, t.name))[:MAX_TOPICS]


def _calendar_today(card: StatsCard) -> dt.date | None:
    """The calendar's last day: the card's today, else the latest day the card knows of."""
    if card.today is not None:
        return card.today
    known = [d.day for d in card.daily_points] + list(card.played_days)
    return max(known) if known else None


def _calendar_days(today: dt.date) -> list[dt.date]:
    """The calendar's days: :data:`CALENDAR_WEEKS` Monday-to-Sunday weeks, the last one holding today."""
    start = today - dt.timedelta(days=today.weekday() + 7 * (CALENDAR_WEEKS - 1))
    return [start + dt.timedelta(days=i) for i in range(7 * CALENDAR_WEEKS)]


def player_alt_text(card: StatsCard) -> str:
    """The player's picture described in words (≤ :data:`MAX_ALT_TEXT` characters)."""
    name = clean_text(card.display_name, ALT_NAME_CHARS)
    days = _recent_points(card)
    total = sum(d.points for d in days)
    if total:
        best = max(days, key=lambda d: (d.points, d.day))
        points = (
            f"Points over the last {POINTS_DAYS} days: {total} total, best day {best.day.isoformat()} "
            f"({best.points}), points on {sum(1 for d in days if d.points)} of {len(days)} days."
        )
    else:
        points = f"Points over the last {POINTS_DAYS} days: none yet."
    today = _calendar_today(card)
    if today is not None:
        window = set(_calendar_days(today))
        played = len({d for d in card.played_days if d in window and d <= today})
        shown = sum(1 for d in window if d <= today)
        streak = (
            f"Streak: {card.streak} days (longest {card.longest_streak}), "
            f"played {played} of the last {shown} days."
        )
    else:
        streak = f"Streak: {card.streak} days (longest {card.longest_streak})."
    head = f"Stats of {name}: {card.points} points, {card.correct}/{card.problems} problems solved. {points}"
    topics = _top_topics(card.by_topic)
    hidden = sum(1 for t in card.by_topic if t.answered > 0) - len(topics)
    budget = MAX_ALT_TEXT - len(head) - len(streak) - 2
    if topics:
        items = [f"{clean_text(t.name, ALT_NAME_CHARS)} {_pct(t.correct, t.answered)}," for t in topics]
        items[-1] = items[-1].rstrip(",") + (f", and {hidden} more topics." if hidden > 0 else ".")
        accuracy = _cut(["Accuracy by topic:", *items], budget, more="… (more topics).")
    else:
        accuracy = "Accuracy by topic: no answers yet."
    return _cut([head, accuracy, streak], MAX_ALT_TEXT)


def _title(ax: Axes, text: str) -> None:
    """A panel's title as a plain text above it (``set_title`` re-measures the tick labels each draw)."""
    ax.annotate(
        text,
        (0.0, 1.0),
        xycoords="axes fraction",
        xytext=(0, 10),
        textcoords="offset points",
        ha="left",
        va="baseline",
        fontsize=11,
        parse_math=False,
    )


def _bars(
    ax: Axes, starts: list[float], lengths: list[float], thickness: float, color: str, *, vertical: bool
) -> None:
    """Bars as one collection: ``ax.bar`` adds a patch per bar and re-computes the data limits for each
    (a fifth of the chart's render time); the limits are set by the caller.
    """
    from matplotlib.collections import PolyCollection

    half = thickness / 2
    polys = []
    for at, length in zip(starts, lengths, strict=True):
        if vertical:
            polys.append([(at - half, 0.0), (at + half, 0.0), (at + half, length), (at - half, length)])
        else:
            polys.append([(0.0, at - half), (length, at - half), (length, at + half), (0.0, at + half)])
    ax.add_collection(PolyCollection(polys, facecolors=color, edgecolors="none"), autolim=False)


def _draw_points(ax: Axes, days: list[DayPoints]) -> None:
    total = sum(d.points for d in days)
    _title(ax, f"Points, last {POINTS_DAYS} days: {total}")
    if not days:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "No points yet", ha="center", va="center", transform=ax.transAxes, parse_math=False)
        return
    xs = list(range(len(days)))
    _bars(ax, [float(x) for x in xs], [float(d.points) for d in days], 0.8, OKABE_ITO["blue"], vertical=True)
    # A tick each week, labelled with the date (ASCII, ours: safe to draw).
    ticks = [i for i in xs if (len(days) - 1 - i) % 7 == 0]
    ax.set_xticks(ticks, [days[i].day.strftime("%b %d") for i in ticks], fontsize=8)
    ax.set_xlim(-0.6, len(days) - 0.4)
    ax.set_ylim(0, max(1, max(d.points for d in days)) * 1.15)
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(axis="y", labelsize=8)
    if not total:
        ax.text(
            0.5,
            0.5,
            "No points in these days yet",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="#555555",
            parse_math=False,
        )


def _draw_topics(ax: Axes, topics: list[TopicStat], hidden: int) -> None:
    title = (
        f"Accuracy by topic (top {len(topics)} of {len(topics) + hidden})" if hidden else "Accuracy by topic"
    )
    _title(ax, title)
    ax.set_xlim(0, 1)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.set_xticks([0, 0.5, 1], ["0%", "50%", "100%"], fontsize=8)
    ax.set_yticks([])
    if not topics:
        ax.text(
            0.5, 0.5, "No answers yet", ha="center", va="center", transform=ax.transAxes, parse_math=False
        )
        return
    ys = [float(y) for y in range(len(topics))][::-1]  # the most-answered topic on top
    _bars(ax, ys, [1.0] * len(topics), 0.7, _GREY, vertical=False)
    _bars(ax, ys, [t.accuracy for t in topics], 0.7, OKABE_ITO["bluish_green"], vertical=False)
    ax.set_ylim(-0.6, max(len(topics), 6) - 0.4)
    names = ax.get_yaxis_transform()  # x in axes units, y in data units
    for y, topic in zip(ys, topics, strict=True):
        # Names are plain texts drawn with parse_math=False; the margin left of the panel fits NAME_CHARS.
        ax.text(
            -0.02,
            y,
            _drawable(topic.name, NAME_CHARS),
            ha="right",
            va="center",
            fontsize=8,
            transform=names,
            parse_math=False,
        )
        # Black on Okabe-Ito's bluish green and on the grey: contrast above 6:1 either way.
        ax.text(
            0.02,
            y,
            f"{round(100 * topic.accuracy)}%  {topic.correct}/{topic.answered}",
            ha="left",
            va="center",
            fontsize=7.5,
            color="black",
            parse_math=False,
        )


def _draw_calendar(ax: Axes, card: StatsCard) -> None:
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    ax.set_title(
        f"Streak: {card.streak} days (longest {card.longest_streak})",
        loc="left",
        fontsize=11,
        parse_math=False,
    )
    ax.set_axis_off()
    today = _calendar_today(card)
    if today is None:
        ax.text(0.5, 0.5, "No games yet", ha="center", va="center", transform=ax.transAxes, parse_math=False)
        return
    played = set(card.played_days)
    days = _calendar_days(today)
    # One image for the 35 cells (0 future, 1 not played, 2 played) and one marker collection: a few
    # artists instead of 70 patches and texts (the calendar was half of the chart's render time).
    state = np.array([0 if d > today else (2 if d in played else 1) for d in days]).reshape(CALENDAR_WEEKS, 7)
    ax.imshow(
        state,
        cmap=ListedColormap(["white", _EMPTY, OKABE_ITO["orange"]]),
        vmin=0,
        vmax=2,
        extent=(-0.5, 6.5, CALENDAR_WEEKS - 0.5, -0.5),
        aspect="auto",
    )
    ax.hlines(np.arange(-0.5, CALENDAR_WEEKS), -0.5, 6.5, color="white", linewidth=3)
    ax.vlines(np.arange(-0.5, 7), -0.5, CALENDAR_WEEKS - 0.5, color="white", linewidth=3)
    hits = [divmod(i, 7) for i, d in enumerate(days) if d in played and d <= today]
    if hits:
        # A played day has a mark as well as its colour: the calendar reads without colour too.
        ax.scatter([c for _, c in hits], [r for r, _ in hits], marker="o", s=40, color=OKABE_ITO["black"])
    row, col = divmod(days.index(today), 7)
    ax.add_patch(
        Rectangle((col - 0.47, row - 0.47), 0.94, 0.94, fill=False, edgecolor="black", linewidth=2, zorder=5)
    )
    ax.set_xlim(-2.1, 6.55)
    ax.set_ylim(CALENDAR_WEEKS - 0.45, -1.1)
    for c, label in enumerate(("M", "T", "W", "T", "F", "S", "S")):
        ax.text(c, -0.8, label, ha="center", va="center", fontsize=8, parse_math=False)
    for r in range(CALENDAR_WEEKS):
        monday = days[7 * r]
        ax.text(-0.65, r, monday.strftime("%b %d"), ha="right", va="center", fontsize=8, parse_math=False)


def player_chart(card: StatsCard) -> Chart:
    """The player's picture: points over the last 30 days, accuracy by topic, the streak calendar."""
    _matplotlib()
    from matplotlib.figure import Figure

    # Fixed positions, not a layout engine: constrained layout measured a third of the render time, and
    # every label's length is bounded (NAME_CHARS), so the margins can be too.
    fig = Figure(figsize=(9, 6.4), dpi=_DPI)
    fig.text(
        0.01,
        0.975,
        f"RankZero stats: {_drawable(card.display_name, NAME_CHARS)}",
        fontsize=13,
        fontweight="bold",
        ha="left",
        va="top",
        parse_math=False,
    )
    _draw_points(fig.add_axes((0.06, 0.58, 0.925, 0.30)), _recent_points(card))
    topics = _top_topics(card.by_topic)
    hidden = sum(1 for t in card.by_topic if t.answered > 0) - len(topics)
    _draw_topics(fig.add_axes((0.185, 0.06, 0.37, 0.41)), topics, hidden)
    _draw_calendar(fig.add_axes((0.58, 0.03, 0.41, 0.44)), card)
    return Chart(png=_png(fig), alt_text=player_alt_text(card), filename="rankzero-stats.png")


# --- the team's heatmap -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Grid:
    """The heatmap's rows, columns and the (first_correct, first_attempts) of each filled cell."""

    topics: list[str]
    difficulties: list[str]
    cells: dict[tuple[str, str], tuple[int, int]]
    hidden_topics: int


def _heat_grid(cells: Sequence[HeatCell]) -> _Grid:
    """Cells summed per (topic, difficulty), counts made consistent; the most-attempted topics kept."""
    sums: dict[tuple[str, str], tuple[int, int]] = {}
    for c in cells:
        attempts = max(0, c.first_attempts)
        correct = min(max(0, c.first_correct), attempts)
        if attempts == 0:
            continue
        old_c, old_a = sums.get((c.topic, c.difficulty), (0, 0))
        sums[(c.topic, c.difficulty)] = (old_c + correct, old_a + attempts)
    per_topic: dict[str, int] = {}
    for (topic, _), (_, attempts) in sums.items():
        per_topic[topic] = per_topic.get(topic, 0) + attempts
    topics = sorted(per_topic, key=lambda t: (-per_topic[t], t))
    shown = topics[:MAX_TOPICS]
    known = [d.value for d in Difficulty]
    present = {d for (t, d) in sums if t in shown}
    # The bank's usual three always (a stable layout week to week), expert and unknown labels when present.
    columns = [d for d in known if d in present or d in known[:3]]
    columns += sorted(present - set(known))
    columns = columns[:MAX_DIFFICULTIES]
    kept = {k: v for k, v in sums.items() if k[0] in shown and k[1] in columns}
    return _Grid(shown, columns, kept, len(topics) - len(shown))


def team_alt_text(card: TeamReportCard) -> str:
    """The team heatmap described in words, weakest cells first (≤ :data:`MAX_ALT_TEXT` characters)."""
    grid = _heat_grid(card.cells)
    title = clean_text(card.title, ALT_NAME_CHARS)
    head = f"{title}: first-attempt accuracy by topic and difficulty, week of {card.week_start.isoformat()}."
    if not grid.cells:
        return _cut([head, "No first attempts this week."], MAX_ALT_TEXT)
    correct = sum(c for c, _ in grid.cells.values())
    attempts = sum(a for _, a in grid.cells.values())
    summary = (
        f"{attempts} first attempts on {len(grid.topics)} topics, {_pct(correct, attempts)} correct overall."
    )
    # Weakest first: lowest accuracy, then the most attempts (a 0/5 weighs more than a 0/1).
    ranked = sorted(grid.cells.items(), key=lambda kv: (kv[1][0] / kv[1][1], -kv[1][1], kv[0]))
    items = [
        f"{clean_text(topic, ALT_NAME_CHARS)} {clean_text(diff, 20)} {_pct(c, a)};"
        for (topic, diff), (c, a) in ranked[:5]
    ]
    items[-1] = items[-1].rstrip(";") + "."
    best = ranked[-1]
    strongest = (
        f"Strongest: {clean_text(best[0][0], ALT_NAME_CHARS)} {clean_text(best[0][1], 20)} {_pct(*best[1])}."
        if len(ranked) > 1
        else ""
    )
    more = f"{grid.hidden_topics} more topics not shown." if grid.hidden_topics else ""
    parts = [head, summary, "Weakest:", *items]
    tail = " ".join(p for p in (strongest, more) if p)
    return _cut([*parts, tail] if tail else parts, MAX_ALT_TEXT)


def team_heatmap(card: TeamReportCard) -> Chart:
    """The team report's heatmap: first-attempt accuracy by topic x difficulty."""
    _matplotlib()
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    grid = _heat_grid(card.cells)
    rows = max(4, len(grid.topics))
    # Fixed margins in pixels (labels are bounded): 180 left for topics, 70 on top for the title and the
    # difficulty labels, 110 right for the colour bar, 30 below for the note on hidden topics.
    width, height = 800, 100 + 36 * rows
    fig = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
    ax = fig.add_axes((180 / width, 30 / height, 510 / width, (height - 100) / height))
    fig.text(
        10 / width,
        1 - 10 / height,
        f"{_drawable(card.title, 40)}: first-attempt accuracy, week of {card.week_start.isoformat()}",
        ha="left",
        va="top",
        fontsize=11,
        parse_math=False,
    )
    if not grid.cells:
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            "No first attempts this week",
            ha="center",
            va="center",
            transform=ax.transAxes,
            parse_math=False,
        )
        return Chart(png=_png(fig), alt_text=team_alt_text(card), filename=_team_filename(card))
    values = np.full((len(grid.topics), len(grid.difficulties)), np.nan)
    for (topic, diff), (c, a) in grid.cells.items():
        values[grid.topics.index(topic), grid.difficulties.index(diff)] = c / a
    image = ax.imshow(
        np.ma.masked_invalid(values),
        cmap=colormaps[HEATMAP_CMAP].with_extremes(bad=_EMPTY),
        vmin=0.0,
        vmax=1.0,
        aspect="auto",
        extent=(-0.5, len(grid.difficulties) - 0.5, len(grid.topics) - 0.5, -0.5),
    )
    ax.set_axis_off()
    ax.hlines(np.arange(0.5, len(grid.topics) - 1), -0.5, len(grid.difficulties) - 0.5, color="white", lw=1.5)
    ax.vlines(np.arange(0.5, len(grid.difficulties) - 1), -0.5, len(grid.topics) - 0.5, color="white", lw=1.5)
    # Labels come from data (topics, unknown difficulty labels): plain texts drawn with parse_math=False.
    for col, diff in enumerate(grid.difficulties):
        ax.text(col, -0.6, _drawable(diff, 14), ha="center", va="bottom", fontsize=9, parse_math=False)
    for row, topic in enumerate(grid.topics):
        ax.text(
            -0.58, row, _drawable(topic, NAME_CHARS), ha="right", va="center", fontsize=9, parse_math=False
        )
    empty = []
    for row, topic in enumerate(grid.topics):
        for col, diff in enumerate(grid.difficulties):
            cell = grid.cells.get((topic, diff))
            if cell is None:
                empty.append((col, row))
                continue
            c, a = cell
            # Dark text on cividis' bright end, white on its dark end (contrast either way).
            ax.text(
                col,
                row,
                f"{c}/{a}\n{round(100 * c / a)}%",
                ha="center",
                va="center",
                fontsize=8.5,
                color="black" if c / a >= 0.55 else "white",
                linespacing=1.15,
                parse_math=False,
            )
    if empty:
        # Cells without first attempts: grey with a dash (one collection), not a colour of the scale.
        ax.scatter([c for c, _ in empty], [r for _, r in empty], marker="_", s=60, color="#777777")
    cax = fig.add_axes((705 / width, 30 / height, 14 / width, (height - 100) / height))
    bar = fig.colorbar(image, cax=cax)
    bar.set_label("first-attempt accuracy", fontsize=9)
    bar.set_ticks([0, 0.5, 1], labels=["0%", "50%", "100%"])
    bar.ax.tick_params(labelsize=8)
    if grid.hidden_topics:
        fig.text(
            690 / width,
            8 / height,
            f"the {len(grid.topics)} most-attempted topics; {grid.hidden_topics} more not shown",
            ha="right",
            va="bottom",
            fontsize=8,
            color="#555555",
            parse_math=False,
        )
    return Chart(png=_png(fig), alt_text=team_alt_text(card), filename=_team_filename(card))


def _team_filename(card: TeamReportCard) -> str:
    return f"rankzero-team-report-{card.week_start.isoformat()}.png"


#: The charts' own worker thread. One: matplotlib draws in Python under the GIL, so more threads would not
#: draw faster; charts wait their turn here instead of filling the loop's default executor, which DNS
#: look-ups and file reads share. (benchmarks/chart_render.py compares the loop's longest stall with
#: asyncio.to_thread, 4 at a time: no better on this project's 2-core machines.)
_RENDER_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rankzero-chart")


async def render(draw: Callable[[_Card], Chart], card: _Card) -> Chart:
    """Render ``card`` with ``draw`` in a worker thread: matplotlib is CPU-bound; the loop must not stall."""
    return await asyncio.get_running_loop().run_in_executor(_RENDER_POOL, draw, card)
