"""Rich renderables for disputes, previews, verification and answer corrections."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bot.adapters.console.safe import safe
from bot.core.dispute_service import CorrectionCard, DisputeCard
from bot.core.disputes import AdminNotice

_VERIFICATION_STYLE = {"confirmed": "green", "contradicted": "bold red", "cannot_check": "yellow"}


@safe
def dispute(card: DisputeCard) -> RenderableType:
    """The verdict per rank, and which choice it matches."""
    title = f"⚖ {card.question_id} v{card.question_version} · {card.run_shape}"
    parts: list[RenderableType] = []
    if card.cannot_reproduce:
        parts.append(Text(card.cannot_reproduce, "yellow"))
        return Panel(Group(*parts), title=escape(title), border_style="yellow")
    v = card.verdict
    if v is not None:
        sandbox = "sandboxed" if v.sandboxed else "NOT sandboxed"
        parts.append(
            Text(f"ran on {v.hardware.describe()} · {sandbox} · {v.status} in {v.elapsed_s:.2f} s", "dim")
        )
        table = Table(show_header=True, expand=True)
        table.add_column("rank", justify="right")
        table.add_column("printed")
        table.add_column("ended")
        for r in v.ranks:
            ended = r.ending()
            if v.root_cause_rank == r.rank:
                ended = "⟵ root cause: " + ended
            table.add_row(str(r.rank), escape(r.stdout.rstrip()) or "[dim](nothing)[/dim]", escape(ended))
        parts.append(table)
        for note in v.notes:
            parts.append(Text(f"note: {note}", "dim"))
    m = card.match
    if m is not None:
        for c in m.choices:
            mark = "✔" if c.matches else "✘"
            parts.append(Text(f"{mark} {c.letter}: {c.reason}", "green" if c.matches else ""))
        style = _VERIFICATION_STYLE[m.verification]
        parts.append(Text(f"{m.verification.replace('_', ' ')}: {m.explanation}", style))
    if card.flagged:
        parts.append(Text("The official answer looks wrong: the question is flagged for the admins.", "bold"))
    return Panel(Group(*parts), title=escape(title), border_style=_VERIFICATION_STYLE[card.verification])


@safe
def verify_line(card: DisputeCard) -> Text:
    """One line of ``rankzero questions verify``."""
    label = {"confirmed": "confirmed", "contradicted": "CONTRADICTED", "cannot_check": "cannot check"}
    status = card.verification
    why = card.cannot_reproduce or (card.match.explanation if card.match else "")
    return Text.assemble(
        (f"{label[status]:13}", _VERIFICATION_STYLE[status]), f" {card.question_id}: ", escape(why)[:300]
    )


@safe
def correction(card: CorrectionCard) -> RenderableType:
    """What an answer correction changed."""
    return Text(
        f"{card.question_id}: answer {card.old_letter} → {card.new_letter} (v{card.from_version} → "
        f"v{card.to_version}); {card.sessions_rescored} session(s) re-scored, {card.players_affected} "
        f"player(s) moved, {card.points_delta:+d} points in total; {card.flags_resolved} flag(s) resolved"
        + (f". {card.left_note}" if card.left_note else "")
    )


@safe
def admin_notice(notice: AdminNotice) -> RenderableType:
    """The admin channel's message about a contradicted answer."""
    body = Text(
        f"{notice.question_id} v{notice.question_version}: the official answer is {notice.official_letter}, "
        f"but the runner shows {notice.matched_letter or 'none of the choices'}.\n{notice.explanation}\n"
        f"(raised by {notice.raised_by}; fix with `rankzero questions correct {notice.question_id} LETTER`)"
    )
    return Panel(body, title=f"🚩 flag #{notice.flag_id}", border_style="red")
