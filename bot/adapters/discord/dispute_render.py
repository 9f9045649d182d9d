"""Disputes, runner previews, answer corrections and flags as Discord embeds.

Mirrors the console's ``dispute_render`` (same facts, same order): the hardware and status, each rank's
output and how it ended (exception, where it was stuck, signal, exit status), the root-cause rank, every
choice checked against the output, the verdict, and whether the question was flagged. Runner output is
shown in code blocks whose fences cannot be closed from inside and whose mentions are neutralised; every
other echoed text goes through :mod:`sanitize`. One embed per message, so Discord's 6000-character total
holds for the message: the ranks share an output budget, and ``fit_embed`` enforces the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

import discord

from bot.adapters.discord.sanitize import (
    EMBED_DESCRIPTION,
    EMBED_TITLE,
    EMBED_TOTAL,
    FIELD_VALUE,
    code_block,
    fit_embed,
    neutralise_mentions,
    plain,
    safe_text,
    truncate,
)
from bot.core.dispute_service import CorrectionCard, DisputeCard
from bot.core.disputes import AdminNotice
from bot.core.repositories import QuestionFlag
from bot.core.verdicts import RankOutcome, RunVerdict

#: Characters of runner output shared by all ranks of one verdict, at most (the rest of the embed's 6000
#: goes to the conclusion: description, choices, verdict and flag, which are sized first).
OUTPUT_BUDGET = 3000
#: Least output shown per rank when the embed has room for it (8 ranks: ~375 each).
MIN_RANK_OUTPUT = 120
#: How much of a rank's ending (its exception message, mostly) is shown: a few ranks get more.
ENDING_FEW_RANKS = 300
ENDING_MANY_RANKS = 120
#: Below this many characters a code block would show nothing but its fences and the cut marker.
_LEAST_BLOCK = 40
#: Slack kept under the 6000 total (the footer, the field names' rounding, a marker field).
_TOTAL_SLACK = 40

_COLOUR = {
    "confirmed": discord.Colour.green(),
    "contradicted": discord.Colour.red(),
    "cannot_check": discord.Colour.gold(),
}
_LABEL = {"confirmed": "✅ confirmed", "contradicted": "⚠️ contradicted", "cannot_check": "❔ cannot check"}


def runner_output(text: str, limit: int) -> str:
    """Runner output in a code block of at most ``limit`` characters: fences escaped, nobody pinged."""
    if not text.strip():
        return "*(nothing printed)*"
    return code_block(neutralise_mentions(text), "text", limit)


def _rank_head(verdict: RunVerdict, rank: RankOutcome, ending_limit: int) -> tuple[str, str]:
    """A rank field's name and its first line (how it ended), before its output."""
    root = verdict.root_cause_rank == rank.rank
    name = f"Rank {rank.rank}" + (" · 🎯 root cause" if root else "")
    ending = truncate(plain(rank.ending()), ending_limit)
    head = f"**ended:** {ending}" + (" · *output cut by the runner*" if rank.truncated else "")
    return name, head


def _rank_value(head: str, rank: RankOutcome, budget: int) -> str:
    limit = min(FIELD_VALUE - len(head) - 1, budget)
    if limit < _LEAST_BLOCK and rank.stdout.strip():
        return f"{head}\n*(output not shown: no room left in this message)*"
    return f"{head}\n{runner_output(rank.stdout.rstrip(), limit)}"


def _conclusion(card: DisputeCard, preview: bool) -> list[tuple[str, str]]:
    """The fields after the ranks: choices, verdict, and the flag (or the preview's warning)."""
    fields: list[tuple[str, str]] = []
    m = card.match
    if m is not None:
        choices = []
        for c in m.choices:
            mark = "✔" if c.matches else "✘"
            official = " *(official)*" if c.letter == m.official_letter else ""
            choices.append(f"{mark} **{plain(c.letter)}**{official}: {plain(c.reason)}")
        if choices:
            fields.append(("Choices", truncate("\n".join(choices), FIELD_VALUE)))
        matched = f"choice **{plain(m.matched_letter)}** matches" if m.matched_letter else "no choice matches"
        verdict = f"**{m.verification.replace('_', ' ').capitalize()}** ({matched}): {plain(m.explanation)}"
        fields.append(("Verdict", truncate(verdict, FIELD_VALUE)))
    fields.append(("Preview" if preview else "Flag", _flag_line(card, preview)))
    return fields


def verdict_embed(card: DisputeCard, *, preview: bool = False) -> discord.Embed:
    """A dispute's (or an admin preview's) verdict, per rank, with the matched choice.

    A preview warns when the run contradicts the answer marked correct instead of saying "flagged".
    The conclusion (description, notes, choices, verdict, flag) is sized first and the ranks share what is
    left of Discord's 6000 characters, so many noisy ranks shorten their output, never the conclusion.
    """
    heading = "Runner preview" if preview else "Dispute"
    version = f" v{card.question_version}" if card.question_version else ""  # a draft has no version yet
    embed = discord.Embed(
        title=truncate(
            safe_text(f"⚖ {heading} · {card.question_id}{version} · {card.run_shape}"), EMBED_TITLE
        ),
        colour=_COLOUR[card.verification],
    )
    lines = [f"**{_LABEL[card.verification]}**"]
    if card.cannot_reproduce:
        lines.append(f"⛔ {plain(card.cannot_reproduce)}")
    v = card.verdict
    notes: str | None = None
    if v is not None:
        sandbox = "sandboxed" if v.sandboxed else "**NOT sandboxed**"
        lines.append(
            f"Ran on {plain(v.hardware.describe())} · {sandbox} · "
            f"**{plain(v.status)}** in {v.elapsed_s:.2f} s"
        )
        if v.root_cause_rank is not None:
            lines.append(f"🎯 Root cause: **rank {v.root_cause_rank}**")
        if v.notes:
            notes = truncate("\n".join(f"• {plain(n)}" for n in v.notes), FIELD_VALUE)
    embed.description = truncate("\n".join(lines), EMBED_DESCRIPTION)
    after = ([("Notes", notes)] if notes is not None else []) + _conclusion(card, preview)
    footer = f"dispute #{card.dispute_id}" if card.dispute_id is not None else ""
    if v is not None and v.ranks:
        # What the ranks may use: the total less everything else, then less their names and endings.
        reserved = len(embed) + sum(len(n) + len(val) for n, val in after) + len(footer) + _TOTAL_SLACK
        ending_limit = ENDING_MANY_RANKS if len(v.ranks) > 4 else ENDING_FEW_RANKS
        heads = [_rank_head(v, r, ending_limit) for r in v.ranks]
        room = EMBED_TOTAL - reserved - sum(len(n) + len(h) + 1 for n, h in heads)
        share = max(MIN_RANK_OUTPUT, OUTPUT_BUDGET // len(v.ranks))
        per_rank = min(share, max(0, room) // len(v.ranks))
        for r, (name, head) in zip(v.ranks, heads, strict=True):
            embed.add_field(name=name, value=_rank_value(head, r, per_rank), inline=False)
    for name, value in after:
        embed.add_field(name=name, value=value, inline=False)
    if footer:
        embed.set_footer(text=footer)
    return fit_embed(embed)


def _flag_line(card: DisputeCard, preview: bool) -> str:
    if preview:
        if card.verification == "contradicted":
            return "⚠️ **The run contradicts the answer marked correct**: check it before saving."
        if card.verification == "confirmed":
            return "The run confirms the answer marked correct. **Save** adds the question."
        return "The runner could not check the answer marked correct."
    if card.flagged:
        return "🚩 The official answer looks wrong: the question is flagged for the admins."
    if card.verification == "contradicted" and card.variant:
        return "Not flagged: a variant is another snippet, so it cannot prove the official answer wrong."
    return "Not flagged."


def preview_error_embed(question_id: str, error: str) -> discord.Embed:
    """The runner could not run a draft: why, and that it may still be saved unverified."""
    return fit_embed(
        discord.Embed(
            title=safe_text(f"⚖ Runner preview · {question_id}"),
            description=f"⚠️ The runner could not run this draft: {plain(error)}\n\n"
            "**Save unverified** adds it without a checked output; **Cancel** drops it.",
            colour=discord.Colour.gold(),
        )
    )


def correction_text(card: CorrectionCard) -> str:
    """What ``/question correct`` changed."""
    return (
        f"✅ `{safe_text(card.question_id)}`: answer {plain(card.old_letter or '?')} → "
        f"**{plain(card.new_letter)}** "
        f"(v{card.from_version} → v{card.to_version}); {card.sessions_rescored} session(s) re-scored, "
        f"{card.players_affected} player(s) moved, {card.points_delta:+d} points in total; "
        f"{card.flags_resolved} flag(s) resolved. The next results post of each channel notes the correction."
        + (f" {card.left_note}" if card.left_note else "")
    )


def flags_embed(flags: Sequence[QuestionFlag], *, everything: bool = False) -> discord.Embed:
    """The flagged questions, one field each (over 25: the rest counted by ``fit_embed``)."""
    which = "Flags" if everything else "Open flags"
    embed = discord.Embed(title=f"🚩 {which} · {len(flags)}", colour=discord.Colour.red())
    if not flags:
        embed.description = "No flagged questions."
        return embed
    embed.description = "Fix one with `/question correct question:<id> letter:<letter>`."
    for f in flags:
        embed.add_field(
            name=plain(f"#{f.id} · {f.question_id} v{f.question_version} · {f.status}"),
            value=truncate(
                f"official **{plain(f.official_letter or '?')}**, "
                f"runner **{plain(f.matched_letter or '-')}** "
                f"· {f.created_at:%Y-%m-%d}\n{plain(f.explanation)}",
                FIELD_VALUE,
            ),
            inline=False,
        )
    return fit_embed(embed)


def admin_notice_text(notice: AdminNotice) -> str:
    """The admin channel's message about a contradicted official answer (escaped, markdown for Discord)."""
    return (
        f"🚩 **Flag #{notice.flag_id}**: `{safe_text(notice.question_id)}` v{notice.question_version}: "
        f"the official answer is **{plain(notice.official_letter or '?')}**, but the runner shows "
        f"**{plain(notice.matched_letter or 'none of the choices')}**.\n{plain(notice.explanation)}\n"
        f"Raised by {plain(notice.raised_by)} · fix with "
        f"`/question correct question:{safe_text(notice.question_id)} letter:<letter>`"
    )
