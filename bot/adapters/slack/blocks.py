"""Block Kit rendering: the only module that knows Slack markup.

Every piece of text that came from a user or the question bank goes through :func:`esc` (mrkdwn escapes
``&``, ``<`` and ``>``), so a prompt containing ``<!channel>`` cannot ping anyone and a ``<`` cannot break a
block. Slack's limits are enforced here: 3000 characters per text (truncated with a marker), 25 elements
per actions block (split into several blocks), 50 blocks per message (split into several messages) and
100 blocks per modal or Home tab (truncated with a marker block).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from bot.adapters.markup import ZWSP, inert_backticks, split_markdown, to_slack_mrkdwn
from bot.core import ids
from bot.core.cards import (
    ChallengeCard,
    Feedback,
    LeaderboardCard,
    PlayerChallengeSummary,
    ProblemCard,
    ReminderCard,
    ResultsCard,
    StatsCard,
)
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Difficulty

Block = dict[str, Any]

MAX_TEXT = 3000
MAX_ACTIONS = 25
MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_BUTTON_TEXT = 75
TRUNCATED = "… (truncated)"

#: callback_id of the problem modal and of the admin "question add" modal.
PLAY_CALLBACK = "rz_play"
QUESTION_CALLBACK = "rz_question_add"


def esc(text: str) -> str:
    """Escape text for mrkdwn/plain fields: ``&`` ``<`` ``>`` become entities (no mentions, no links)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, ending with a visible marker when cut."""
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED)] + TRUNCATED


def date_token(when: dt.datetime, fmt: str = "{date_short_pretty} {time}") -> str:
    """Slack's date formatting token: shown in each reader's own timezone, with a UTC fallback."""
    fallback = when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(when.timestamp())}^{fmt}|{fallback}>"


def section(text: str) -> Block:
    """A mrkdwn section; ``text`` must already be escaped where it echoes user input."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text)}}


def context(text: str) -> Block:
    """A small grey line."""
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text)}]}


def header(text: str) -> Block:
    """A header (plain text, at most 150 characters)."""
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, 150)}}


def button(label: str, action_id: str, *, value: str = "", style: str | None = None) -> Block:
    """A button; labels are plain text (no mrkdwn), cut to Slack's 75 characters."""
    b: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": clip(label, MAX_BUTTON_TEXT)},
        "action_id": action_id,
    }
    if value:
        b["value"] = value
    if style:
        b["style"] = style
    return b


def actions(elements: Sequence[Block]) -> list[Block]:
    """Actions blocks holding ``elements``, 25 per block."""
    return [
        {"type": "actions", "elements": list(elements[i : i + MAX_ACTIONS])}
        for i in range(0, len(elements), MAX_ACTIONS)
    ]


def split_message(blocks: Sequence[Block]) -> list[list[Block]]:
    """Blocks split into messages of at most 50 blocks each (never an empty message)."""
    chunks = [list(blocks[i : i + MAX_MESSAGE_BLOCKS]) for i in range(0, len(blocks), MAX_MESSAGE_BLOCKS)]
    return chunks or [[section(" ")]]


def fit_view(blocks: Sequence[Block]) -> list[Block]:
    """Blocks cut to the 100 a modal or Home tab may hold, the last one saying that some were left out."""
    if len(blocks) <= MAX_VIEW_BLOCKS:
        return list(blocks)
    left = len(blocks) - (MAX_VIEW_BLOCKS - 1)
    return [*blocks[: MAX_VIEW_BLOCKS - 1], context(f"{TRUNCATED}: {left} more blocks not shown")]


def _fence(body: str) -> str:
    """``body`` between triple backticks; a body that starts or ends with a backtick would make the
    fence a run of four, which Slack does not read as a fence, so a zero-width space stands between.
    """
    if body.startswith("`"):
        body = ZWSP + body
    if body.endswith("`"):
        body += ZWSP
    return f"```{body}```"


def code_block(code: str, limit: int = MAX_TEXT) -> str:
    """A fenced code block of at most ``limit`` characters: escaped, no run of three backticks inside
    (it would end the block early), and a long body is cut inside the fences so the closing fence is
    always kept. For output that may be cut (a rank's output); the bank's code uses :func:`code_sections`.
    """
    body = inert_backticks(esc(code))
    if len(body) + 8 > limit:
        body = body[: limit - 8 - len(TRUNCATED)] + TRUNCATED
    return _fence(body)


def code_sections(code: str) -> list[Block]:
    """A whole snippet as code blocks, one section each (3000 characters, Slack's section text limit:
    https://api.slack.com/reference/block-kit/blocks#section), cut at line ends: nothing is left out.
    """
    body = inert_backticks(esc(code.rstrip("\n")))
    return [section(_fence(piece)) for piece in split_markdown(body, MAX_TEXT - 8)]


def mrkdwn_pieces(md: str, limit: int = MAX_TEXT, *, source_limit: int | None = None) -> list[str]:
    """Bank Markdown as mrkdwn texts of at most ``limit`` characters each, cut at line ends (code blocks
    closed and opened again). Escaping lengthens the text (``<`` is ``&lt;``): a piece still too long is
    split again from its Markdown with a proportionally smaller size.
    """
    out: list[str] = []
    for piece in split_markdown(md, source_limit or limit):
        text = to_slack_mrkdwn(piece)
        if len(text) <= limit or len(piece) <= 1:
            out.append(text)
        else:
            smaller = max(1, min(len(piece) - 1, limit * len(piece) // len(text) - 8))
            out += mrkdwn_pieces(piece, limit, source_limit=smaller)
    return out


def markdown_sections(md: str, head: str = "") -> list[Block]:
    """Bank Markdown (a prompt, an explanation) as as many sections as it needs, ``head`` (mrkdwn, a
    line such as "*Why:*") on top of the first.
    """
    room = MAX_TEXT - (len(head) + 1 if head else 0)
    pieces = mrkdwn_pieces(md, room)
    if head:
        pieces[0] = f"{head}\n{pieces[0]}" if pieces[0] else head
    return [section(piece) for piece in pieces if piece]


def _bar(count: int, total: int) -> str:
    return "█" * round(8 * count / total) if total else ""


# ---------------------------------------------------------------------- install notes
def resumed_text(resumed: Sequence[tuple[str, str, dt.datetime]]) -> str:
    """The note to whoever installed the app again: the daily challenges that came back, as
    (channel id, the schedule in words, its next post), and how to stop one.
    """
    lines = [
        f"• <#{esc(channel)}>: {esc(described)}; next post {date_token(next_post)}"
        for channel, described, next_post in resumed
    ]
    head = (
        "RankZero is installed again, and the daily challenge is back where the uninstall had stopped it "
        f"({len(lines)} channel{'s' if len(lines) != 1 else ''}):"
    )
    foot = "To stop one, run `/rankzero schedule pause` in its channel."
    return clip("\n".join([head, *lines, foot]))


# ---------------------------------------------------------------------- channel posts
def challenge_blocks(card: ChallengeCard) -> list[Block]:
    """The daily post: title, topics, difficulty, window end and a Start button."""
    topics = ", ".join(sorted({esc(p.topic) for p in card.problems}))
    levels = ", ".join(sorted({p.difficulty for p in card.problems}))
    closes = f"Closes {date_token(card.closes_at)}" if card.closes_at else "Open all day"
    blocks = [
        header(card.title),
        section(f"*{len(card.problems)} problems* · topics: {topics}\nDifficulty: {esc(levels)}"),
        context(f"{closes} · solve all of them for *{esc(card.badge_name)}*"),
    ]
    if card.status == "open":
        blocks += actions([button("Start", ids.encode("start", card.challenge_id), style="primary")])
    else:
        blocks.append(context("This challenge is closed."))
    return blocks


def closed_blocks(card: ChallengeCard | ResultsCard) -> list[Block]:
    """The original post once its challenge closed (no Start button)."""
    return [header(card.title), context("This challenge is closed: the results are in the thread.")]


def packed_sections(lines: Sequence[str], heading: str = "") -> list[Block]:
    """Lines packed into as few sections as fit Slack's 3000 characters each (``heading`` on the first);
    a single line longer than that is cut.
    """
    blocks: list[Block] = []
    current = heading
    for line in lines:
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > MAX_TEXT and current:
            blocks.append(section(current))
            candidate = line
        current = candidate
    if current:
        blocks.append(section(current))
    return blocks


def _name_lines(label: str, names: Sequence[str]) -> list[str]:
    """``label: a, b, c`` lines, as many as needed so that none is longer than a section holds."""
    lines: list[str] = []
    current = ""
    for name in names:
        if current and len(current) + len(name) + 2 > MAX_TEXT - 100:
            lines.append(current)
            current = ""
        current = f"{current}, {name}" if current else f"{label}: {name}"
    return [*lines, current] if current else lines


def results_blocks(card: ResultsCard) -> list[Block]:
    """The results post, compact: one block per kind of content (problems, badges, streaks), each badge
    listing its earners, so a busy day still fits one message.
    """
    lead = [f"{card.players} players took part."]
    if card.winners:
        # A large tie is many winners: their names go on over as many lines (and sections) as they need.
        label = f":trophy: Winner{'s' if len(card.winners) > 1 else ''}"
        lead += _name_lines(label, [f"{esc(w.display_name)} ({w.points} pts)" for w in card.winners])
    blocks = [header(f"Results · {card.title}"), *packed_sections(lead)]
    problem_lines = []
    for p in card.problems:
        dist = "  ".join(f"{letter}: {n}" for letter, n in p.distribution.items())
        problem_lines.append(
            f"*{p.position}.* {esc(p.topic)} (`{esc(p.question_id)}`) · answer *{esc(p.correct_letter)}*"
            f" · {p.solved}/{p.players} solved · {dist}"
        )
    blocks += packed_sections(problem_lines)
    earners: dict[str, tuple[str, list[str]]] = {}
    for name, badge in card.badges:
        earners.setdefault(badge.code, (f"{badge.emoji} *{esc(badge.name)}*", []))[1].append(esc(name))
    badge_lines = [line for label, names in earners.values() for line in _name_lines(label, names)]
    blocks += packed_sections(badge_lines, "*Badges*" if badge_lines else "")
    streak_lines = [
        f"{':tada:' if s.milestone else ':fire:'} {esc(s.display_name)} · {s.days}-day streak"
        + (" · *milestone!*" if s.milestone else "")
        for s in card.streaks
    ]
    blocks += packed_sections(streak_lines, "*Streaks*" if streak_lines else "")
    blocks += packed_sections([f"Correction: {esc(note)}" for note in card.notes])
    blocks.append(context("See the standings with `/rankzero leaderboard`"))
    return blocks


def reminder_blocks(card: ReminderCard) -> list[Block]:
    """The nudge before closing."""
    return [
        section(
            f":alarm_clock: *{esc(card.title)}* closes {date_token(card.closes_at)}: still time to play!"
        ),
        *actions([button("Start", ids.encode("start", card.challenge_id), style="primary")]),
    ]


def leaderboard_blocks(card: LeaderboardCard) -> list[Block]:
    """A leaderboard (the caller's own line under the top when outside it)."""
    blocks = [header(card.title)]
    if not card.rows:
        blocks.append(section("Nobody has scored yet."))
        return blocks
    lines = [f"{r.rank}. {esc(r.display_name)} · *{r.points}* pts · {r.correct} correct" for r in card.rows]
    blocks.append(section("\n".join(lines)))
    if card.me is not None and all(r.player_pk != card.me.player_pk for r in card.rows):
        blocks.append(context(f"You: #{card.me.rank} of {card.total_players} · {card.me.points} pts"))
    return blocks


def stats_blocks(card: StatsCard) -> list[Block]:
    """A player's record: points, accuracy, streaks, badges, topics."""
    acc = f"{100 * card.correct / card.problems:.0f}%" if card.problems else "n/a"
    blocks = [
        header(f"Stats · {card.display_name}"),
        section(
            f"*{card.points}* points · {card.correct}/{card.problems} correct ({acc})\n"
            f"Challenges completed: {card.challenges_completed} · streak: *{card.streak}* "
            f"(longest {card.longest_streak})"
        ),
    ]
    if card.badges:
        blocks.append(
            section("Badges: " + ", ".join(f"{b.emoji} {esc(b.name)} ×{n}" for b, n in card.badges))
        )
    else:
        blocks.append(context("No badges yet: finish a challenge to earn one."))
    if card.by_topic:
        lines = [
            f"{esc(t.name)}: {t.correct}/{t.answered} {_bar(t.correct, t.answered)}" for t in card.by_topic
        ]
        blocks.append(section("*By topic*\n" + "\n".join(lines)))
    return blocks


def home_view(stats: StatsCard, board: LeaderboardCard, practice: Sequence[Block] = ()) -> Block:
    """The App Home tab: the player's stats, streak and badges, their ``practice`` panel (rendered by
    ``practice_blocks``), and the workspace leaderboard.
    """
    blocks = [*stats_blocks(stats), *practice, {"type": "divider"}, *leaderboard_blocks(board)]
    blocks.append(context("Type `/rankzero help` in any channel for the commands."))
    return {"type": "home", "blocks": fit_view(blocks)}


def help_text(admin: bool) -> str:
    """The slash command's help."""
    lines = [
        # Placeholders are escaped like any text: a raw ``<command>`` is mrkdwn's link syntax, not text.
        "*RankZero* · `/rankzero &lt;command&gt;`",
        "`challenge` today's challenge of this channel, with a Start button",
        "`leaderboard [channel|workspace] [today|week|all]` the standings",
        "`stats` your record (ranked) and your practice",
        "`quiz [topic]` 5 practice questions (`quiz weakest`: the team's weakest topics) · "
        "`review` your due flashcards · "
        "`explain [topic]` explain a concept in your own words (private, never ranked)",
        "`dispute &lt;problem-id&gt;` (or `today:N`, or a question id) run a finished problem's code in the "
        "sandbox; add a variant of the code after it, between triple backticks, to run that instead",
        "`web` a private link to this channel's read-only page (leaderboards and team report)",
    ]
    if admin:
        lines += [
            "*Admin*",
            "`schedule show` · `schedule set --time 09:00 --tz Europe/Berlin --days mon-fri ...`"
            " · `schedule pause` · `schedule resume`",
            "`post-now` post today's challenge now (with the channel's schedule settings) · "
            "`close-now [challenge-id]` close the open one and post the results",
            "`question add` open the question form (predict-the-output code is previewed on the runner"
            " before saving) · `question retire &lt;id&gt;`",
            "`question correct &lt;id&gt; &lt;letter&gt;` fix an official answer and re-score · "
            "`question flags [all]` questions a dispute contradicted",
            "`difficulty` questions whose label the workspace's answers disagree with · "
            "`insights` the team's weakest topics and the quiz that targets them",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------- the private problem flow
def _modal(title: str, blocks: Sequence[Block], metadata: str = "", **extra: Any) -> Block:
    view: Block = {
        "type": "modal",
        "callback_id": PLAY_CALLBACK,
        "title": {"type": "plain_text", "text": clip(title, 24)},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": fit_view(blocks),
        "private_metadata": metadata,
    }
    view.update(extra)
    return view


def problem_view(card: ProblemCard, feedback: Feedback | None = None, note: str | None = None) -> Block:
    """The problem modal: N of M, prompt, code, choices, attempts left, hint, deadline, feedback, Next."""
    blocks: list[Block] = [
        section(
            f"*Problem {card.position} of {card.total}* · {esc(card.topic)} · {esc(card.difficulty)}"
            f" · `{esc(card.kind)}`"
        ),
        *markdown_sections(card.prompt),
    ]
    # Prompt, code, choices, hint and explanation are shown whole, over several sections when long (the
    # bank's validation keeps every question within what a modal holds).
    if card.code:
        blocks += code_sections(card.code)
    over = card.over or (feedback is not None and feedback.over)
    wrong = set(card.wrong_letters)
    blocks += packed_sections([f"*{esc(letter)}.* {esc(text)}" for letter, text in card.choices])
    if card.hint:
        blocks += packed_sections([esc(card.hint)], ":bulb: *Hint:*")
    if feedback is not None and feedback.message:
        icon = ":white_check_mark:" if feedback.correct else (":x:" if feedback.letter else ":hourglass:")
        blocks.append(section(f"{icon} {esc(feedback.message)}"))
    if note:
        blocks.append(section(esc(note)))
    if not over:
        blocks.append(
            context(
                f"Attempts left: *{card.attempts_left}* of {card.attempts_total} · "
                f"time is up {date_token(card.deadline, '{time_secs}')}"
            )
        )
        buttons = [
            button(letter, ids.encode("answer", card.problem_id, letter), value=letter)
            for letter, _ in card.choices
            if letter not in wrong
        ]
        if card.has_hint and card.hint is None:
            buttons.append(button("Hint", ids.encode("hint", card.problem_id)))
        blocks += actions(buttons)
    else:
        reveal = feedback.reveal if feedback is not None else None
        if reveal is not None:
            head = f"*Answer: {esc(reveal.correct_letter)}*"
            blocks += markdown_sections(reveal.explanation or "", head)
        label = "Next" if card.position < card.total else "See my score"
        blocks += actions([button(label, ids.encode("next", card.challenge_id), style="primary")])
    return _modal("RankZero", blocks, metadata=f"{card.challenge_id}:{card.problem_id}")


def summary_view(summary: PlayerChallengeSummary) -> Block:
    """The modal once every problem is over for the player."""
    blocks = [
        section(
            f"*Done!* {summary.correct}/{summary.total} correct · *{summary.points}* points · "
            f"streak {summary.streak}"
        )
    ]
    for badge in summary.badges:
        blocks.append(section(f"{badge.emoji} You earned *{esc(badge.name)}*: {esc(badge.description)}"))
    return _modal("RankZero", blocks, metadata=str(summary.challenge_id))


def message_view(text: str) -> Block:
    """A modal that only says something (an error from the service, e.g. the challenge is closed)."""
    return _modal("RankZero", [section(esc(text))])


def as_message(view: Block) -> Block:
    """A problem-flow modal as a private message (a rush plays in the channel, not in modals): the same
    blocks and buttons, with a text fallback for notifications (check :func:`fits_message` first).
    """
    blocks = list(view.get("blocks") or [])
    first = blocks[0].get("text", {}).get("text", "RankZero") if blocks else "RankZero"
    return {"text": clip(str(first), 150), "blocks": blocks}


def fits_message(view: Block) -> bool:
    """Whether a modal's blocks fit one message (50 blocks)."""
    return len(view.get("blocks") or []) <= MAX_MESSAGE_BLOCKS


# ---------------------------------------------------------------------- admin: question add
#: block_id of each input of the question modal (= the QuestionSpec field it fills).
QUESTION_FIELDS = (
    "id",
    "kind",
    "topic",
    "difficulty",
    "prompt",
    "code",
    "choices",
    "hint",
    "explanation",
    "time_limit_s",
    "attempts",
    # the question's ``runner`` block (how a dispute or the preview runs its code)
    "runner_mode",
    "runner_nproc",
    "runner_gpus",
    "runner_init",
)
RUNNER_MODES = ("python", "dp", "ddp")


def _text_input(
    block_id: str, label: str, *, multiline: bool = False, optional: bool = False, hint: str | None = None
) -> Block:
    block: Block = {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": label},
        "optional": optional,
        "element": {"type": "plain_text_input", "action_id": "value", "multiline": multiline},
    }
    if hint:
        block["hint"] = {"type": "plain_text", "text": hint}
    return block


def _select(
    block_id: str, label: str, options: Sequence[str], *, optional: bool = False, hint: str | None = None
) -> Block:
    block: Block = {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": label},
        "optional": optional,
        "element": {
            "type": "static_select",
            "action_id": "value",
            "options": [{"text": {"type": "plain_text", "text": o}, "value": o} for o in options],
        },
    }
    if hint:
        block["hint"] = {"type": "plain_text", "text": hint}
    return block


def _checkbox(block_id: str, label: str, option: str) -> Block:
    return {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": label},
        "optional": True,
        "element": {
            "type": "checkboxes",
            "action_id": "value",
            "options": [{"text": {"type": "plain_text", "text": option}, "value": "yes"}],
        },
    }


def _prefilled(block: Block, value: str | None) -> Block:
    """An input block showing ``value`` (what the admin typed before), when there is one."""
    if not value:
        return block
    element = dict(block["element"])
    if element["type"] == "plain_text_input":
        element["initial_value"] = value[:MAX_TEXT]
    elif element["type"] == "static_select":
        chosen = [o for o in element["options"] if o["value"] == value]
        if chosen:
            element["initial_option"] = chosen[0]
    elif element["type"] == "checkboxes":
        element["initial_options"] = list(element["options"])
    return {**block, "element": element}


def question_modal(values: dict[str, str] | None = None, note: str | None = None) -> Block:
    """The admin form for one multiple-choice question (validated with questions.schema.QuestionSpec);
    ``values`` fills it again (a save that failed after the form's answer), ``note`` says why on top.
    """
    blocks = [
        _text_input("id", "Id (slug)", hint="lowercase letters, digits and '-', e.g. ddp-bucket-order"),
        _select("kind", "Kind", [k.value for k in MULTIPLE_CHOICE_KINDS]),
        _text_input("topic", "Topic"),
        _select("difficulty", "Difficulty", [d.value for d in Difficulty]),
        _text_input("prompt", "Prompt", multiline=True),
        _text_input("code", "Code", multiline=True, optional=True),
        _text_input(
            "choices", "Choices", multiline=True, hint="one per line; start the correct one with '*'"
        ),
        _text_input("hint", "Hint", optional=True),
        _text_input("explanation", "Explanation", multiline=True, optional=True),
        _text_input("time_limit_s", "Time limit (seconds)", optional=True, hint="10-3600, default 120"),
        _text_input("attempts", "Attempts", optional=True, hint="1-5, default 2"),
        _select(
            "runner_mode",
            "Runner mode",
            RUNNER_MODES,
            optional=True,
            hint="how disputes run the code (predict-the-output code also runs before saving); "
            "default python",
        ),
        _text_input(
            "runner_nproc", "Runner ranks (nproc)", optional=True, hint="1-8, more than 1 only with ddp"
        ),
        _text_input("runner_gpus", "GPUs needed", optional=True, hint="0-8, default 0 (CPU)"),
        _checkbox("runner_init", "Process group", "init_process_group before the snippet runs"),
    ]
    if values:
        blocks = [_prefilled(b, values.get(str(b["block_id"]))) for b in blocks]
    if note:
        blocks.insert(0, section(f":warning: {esc(note)}"))
    return {
        "type": "modal",
        "callback_id": QUESTION_CALLBACK,
        "title": {"type": "plain_text", "text": "Add a question"},
        "submit": {"type": "plain_text", "text": "Add"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def question_values(state: dict[str, Any]) -> dict[str, str]:
    """The raw strings a ``view_submission`` carries, by field (empty fields left out)."""
    out: dict[str, str] = {}
    for block_id, actions_ in state.get("values", {}).items():
        element = actions_.get("value", {})
        raw = element.get("value")
        if raw is None and element.get("selected_option"):
            raw = element["selected_option"].get("value")
        if raw is None and element.get("selected_options"):  # checkboxes
            raw = ",".join(str(o.get("value")) for o in element["selected_options"])
        if raw is not None and str(raw).strip() != "":
            out[block_id] = str(raw)
    return out
