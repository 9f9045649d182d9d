"""Block Kit for disputes: the runner's verdict per rank, the question preview modal, corrections, flags.

Mirrors the console's ``dispute_render`` (same facts, same order) in mrkdwn. Everything the runner printed
or a question says is escaped with :func:`blocks.esc`, and fenced output cannot close its code block early
(a triple backtick inside gets a zero-width space). Each text stays within Slack's 3000 characters with its
fences intact; a verdict of 8 ranks is about 15 blocks, well inside 50 per message and 100 per modal.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.adapters.slack.blocks import (
    MAX_TEXT,
    Block,
    clip,
    code_block,
    context,
    esc,
    fit_view,
    section,
)
from bot.core.dispute_service import CorrectionCard, DisputeCard
from bot.core.disputes import AdminNotice
from bot.core.repositories import QuestionFlag
from bot.core.verdicts import RankOutcome, RunVerdict

#: callback_id of the preview modal pushed over the "question add" form.
PREVIEW_CALLBACK = "rz_question_preview"

_VERIFICATION = {
    "confirmed": ":white_check_mark: confirmed",
    "contradicted": ":warning: contradicted",
    "cannot_check": ":grey_question: cannot check",
}


def fenced(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` escaped in a code block of at most ``limit`` characters, closing fence always kept."""
    return code_block(text, limit)


def _rank_block(verdict: RunVerdict, rank: RankOutcome) -> Block:
    ending = esc(rank.ending())
    if verdict.root_cause_rank == rank.rank:
        ending = f":dart: *root cause:* {ending}"
    head = f"*Rank {rank.rank}* · {ending}"
    if rank.truncated:
        head += " · _output cut by the runner_"
    head = clip(head, 600)
    printed = fenced(rank.stdout.rstrip(), MAX_TEXT - len(head) - 1) if rank.stdout.strip() else "_(nothing)_"
    return section(f"{head}\n{printed}")


def verdict_blocks(card: DisputeCard, *, preview: bool = False) -> list[Block]:
    """A dispute's (or an admin preview's) verdict: hardware, each rank's output and ending, the choice it
    matches, and whether the question was flagged (a preview instead warns when the marked answer is wrong).
    """
    heading = "Preview of" if preview else "Dispute of"
    version = f" v{card.question_version}" if card.question_version else ""  # a draft has none yet
    blocks: list[Block] = [
        section(
            f"*{heading} `{esc(card.question_id)}`*{version} · {esc(card.run_shape)}"
            f" · {_VERIFICATION[card.verification]}"
        )
    ]
    if card.cannot_reproduce:
        blocks.append(section(f":no_entry: {esc(card.cannot_reproduce)}"))
        return blocks
    v = card.verdict
    if v is not None:
        sandbox = "sandboxed" if v.sandboxed else "NOT sandboxed"
        blocks.append(
            context(
                f"Ran on {esc(v.hardware.describe())} · {sandbox} · *{esc(v.status)}* in {v.elapsed_s:.2f} s"
            )
        )
        blocks += [_rank_block(v, r) for r in v.ranks]
        if v.notes:
            blocks.append(context("\n".join(f"note: {esc(n)}" for n in v.notes)))
    m = card.match
    if m is not None:
        lines = []
        for c in m.choices:
            mark = ":heavy_check_mark:" if c.matches else ":heavy_multiplication_x:"
            official = " _(official)_" if c.letter == m.official_letter else ""
            lines.append(f"{mark} *{esc(c.letter)}*{official}: {esc(c.reason)}")
        if lines:
            blocks.append(section("\n".join(lines)))
        matched = f"choice *{esc(m.matched_letter)}* matches" if m.matched_letter else "no choice matches"
        blocks.append(
            section(f"*{m.verification.replace('_', ' ').capitalize()}* ({matched}): {esc(m.explanation)}")
        )
    if not preview:
        blocks.append(context(_flag_line(card)))
    elif card.verification == "contradicted":
        blocks.append(
            section(":warning: *The run contradicts the answer marked correct*: check it before saving.")
        )
    return blocks


def _flag_line(card: DisputeCard) -> str:
    if card.flagged:
        return ":triangular_flag_on_post: The official answer looks wrong: flagged for the admins."
    if card.verification == "contradicted" and card.variant:
        return "Not flagged: a variant is another snippet, so it cannot prove the official answer wrong."
    return "Not flagged."


def dispute_blocks(card: DisputeCard) -> list[Block]:
    """The ephemeral answer to ``/rankzero dispute``."""
    return verdict_blocks(card)


# ---------------------------------------------------------------------- admin: the question preview
def _preview_modal(blocks: Sequence[Block], metadata: str, external_id: str, submit: str | None) -> Block:
    view: Block = {
        "type": "modal",
        "callback_id": PREVIEW_CALLBACK,
        "external_id": external_id,
        "title": {"type": "plain_text", "text": "Runner preview"},
        "close": {"type": "plain_text", "text": "Cancel"},
        # Cancel sends view_closed, so a draft kept server-side is dropped at once.
        "notify_on_close": True,
        "blocks": fit_view(blocks),
        "private_metadata": metadata,
    }
    if submit:
        view["submit"] = {"type": "plain_text", "text": submit}
    return view


def running_view(question_id: str, metadata: str, external_id: str) -> Block:
    """Shown while the runner works (longer than Slack's 3 s): updated with the preview when it answers."""
    return _preview_modal(
        [
            section(f":hourglass_flowing_sand: Running `{esc(question_id)}` on the runner…"),
            context("The real output appears here when the run ends. Cancel goes back to the form."),
        ],
        metadata,
        external_id,
        None,
    )


def preview_view(card: DisputeCard, metadata: str, external_id: str) -> Block:
    """The runner's real output for a draft question, with Save (imports it) and Cancel (back to the form)."""
    intro = context("What the runner really printed for this draft. *Save* adds it; *Cancel* goes back.")
    blocks = [intro, *verdict_blocks(card, preview=True)]
    return _preview_modal(blocks, metadata, external_id, "Save")


def preview_error_view(question_id: str, error: str, metadata: str, external_id: str) -> Block:
    """The runner could not run the draft: say why; the admin may still save it unverified."""
    return _preview_modal(
        [
            section(f":warning: The runner could not run `{esc(question_id)}`: {esc(error)}"),
            context("*Cancel* goes back to the form; *Save unverified* adds it without a checked output."),
        ],
        metadata,
        external_id,
        "Save unverified",
    )


# ---------------------------------------------------------------------- admin: corrections and flags
def correction_blocks(card: CorrectionCard) -> list[Block]:
    """What ``/rankzero question correct`` changed."""
    return [
        section(
            f":white_check_mark: `{esc(card.question_id)}`: answer {esc(card.old_letter or '?')} → "
            f"*{esc(card.new_letter)}* (v{card.from_version} → v{card.to_version})"
        ),
        context(
            f"{card.sessions_rescored} session(s) re-scored, {card.players_affected} player(s) moved, "
            f"{card.points_delta:+d} points in total; {card.flags_resolved} flag(s) resolved. "
            "The next results post of each channel notes the correction."
            + (f" {card.left_note}" if card.left_note else "")
        ),
    ]


def flags_blocks(flags: Sequence[QuestionFlag]) -> list[Block]:
    """The flagged questions, one block each (split over messages by the caller past 50)."""
    if not flags:
        return [section("No flagged questions.")]
    blocks = [section(f"*{len(flags)} flagged question{'s' if len(flags) != 1 else ''}*")]
    for f in flags:
        blocks.append(
            section(
                f"#{f.id} · {esc(f.status)} · `{esc(f.question_id)}` v{f.question_version}: official "
                f"*{esc(f.official_letter or '?')}*, runner *{esc(f.matched_letter or '-')}*\n"
                f"{esc(f.explanation)}"
            )
        )
    blocks.append(context("Fix one with `/rankzero question correct &lt;id&gt; &lt;letter&gt;`."))
    return blocks


def admin_notice_text(notice: AdminNotice) -> str:
    """The admin notice as plain text, escaped (the message's notification fallback)."""
    return esc(
        f"Flag #{notice.flag_id}: {notice.question_id} v{notice.question_version}: the official answer is "
        f"{notice.official_letter or '?'}, but the runner shows "
        f"{notice.matched_letter or 'none of the choices'}"
    )


def admin_notice_blocks(notice: AdminNotice) -> list[Block]:
    """The admin channel's message about a contradicted official answer."""
    return [
        section(f":triangular_flag_on_post: *{admin_notice_text(notice)}*\n{esc(notice.explanation)}"),
        context(
            f"Raised by {esc(notice.raised_by)} · fix with "
            f"`/rankzero question correct {esc(notice.question_id)} LETTER`"
        ),
    ]
