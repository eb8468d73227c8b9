"""Held calls and who may release them: `approvals list|show|approve|deny` and
`approvers add|invite|rotate|tenants|acts-as|list|revoke`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape

from toolgate.cli.common import console, fail, literal, print_json, print_rows, registry_call, running
from toolgate.settings import Settings

approvals_app = typer.Typer(no_args_is_help=True, help="Held calls: list, show the confirmation card, approve, deny.")
approvers_app = typer.Typer(no_args_is_help=True, help="Approvers and their signing keys.")

WAIT_OPTION = typer.Option("--wait", help="seconds to wait for the judgment of the decision (0: do not wait)")
ACTOR_OPTION = typer.Option("--as", help="who makes the change (written to the audit log)")
IDS_ARGUMENT = typer.Argument(help="approval ids, or any start of one that names only it (several: one decision each)")
APPROVER_OPTION = typer.Option("--as", help="approver id (its key must be in the local keyring)")
EDIT_HELP = (
    "a JSON object merged over the held call's arguments (each key it names replaces that argument); "
    "it may only narrow: a spent value (an amount) may not grow"
)
TENANT_OPTION = typer.Option("--tenant", help="a tenant the approver decides for (repeat for each)")
ACTS_AS_OPTION = typer.Option(
    "--acts-as", help="a user id the approver acts as: never counted on that user's calls (repeat for each)"
)


@approvals_app.command("list")
def approvals_list(
    status: Annotated[str | None, typer.Option(help="PENDING, APPROVED, DENIED or AUTO_DENIED")] = None,
    approver: Annotated[str | None, typer.Option("--for", help="only the tenants this approver decides for")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Approval tickets, newest first."""
    from toolgate.ops import approvals

    rows = approvals.list_approvals(running(), status, approver=approver)
    print_json(rows) if as_json else approvals.print_list(rows, console)


@approvals_app.command("show")
def approvals_show(
    approval_id: Annotated[str, typer.Argument(help="an approval id, or any start of one that names only it")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The confirmation card of one held call."""
    from toolgate.ops import approval_card, approvals

    settings = running()
    (full_id,) = _resolved(settings, [approval_id])
    packet, state = approvals.load(settings, full_id)
    if as_json:
        print_json({"packet": packet.model_dump(mode="json"), **state})
    else:
        console.print(approval_card.card(packet, state))


def _resolved(settings: Settings, typed: list[str]) -> list[str]:
    """The full approval id each typed one names, each once, in order (exit 1 on one that names
    none or several)."""
    from toolgate.ops import approvals

    try:
        return list(dict.fromkeys(approvals.resolve(settings, typed)))
    except approvals.Unresolved as exc:
        raise fail(str(exc), code=1) from exc


def _decide(
    typed: list[str], approver: str, approve: bool, reason: str | None, as_json: bool, wait: float, edit: str | None
) -> None:
    """Sign one decision per approval, publish them, and say what became of each (exit 1 when
    any was refused, or when nothing could be signed)."""
    from toolgate.contracts.edits import EditRefused
    from toolgate.ops import approvals
    from toolgate.trust.signing import PacketMismatch

    settings = running()
    approval_ids = _resolved(settings, typed)
    try:
        if edit is None:
            decisions = approvals.decide(settings, approval_ids, approver, approve, reason)
        else:
            decisions = [approvals.edit(settings, _one(approval_ids), approver, _edit_object(edit))]
    except (PacketMismatch, approvals.NotServed, EditRefused) as exc:
        console.print(f"[red]refused to sign: {escape(str(exc))}[/red]")
        raise typer.Exit(1) from exc
    verb = "approved" if edit is None and approve else "denied" if edit is None else "approved with edit"
    ids = [d.decision_id for d in decisions]
    judged = approvals.judgments(settings, ids, wait) if wait > 0 else [None for _ in decisions]
    if edit is not None and judged[0] is not None and judged[0].get("status_after") == "EDITED":
        judged[0]["edited_approval_id"] = approvals.edited_into(settings, approval_ids[0], wait)
    for approval_id, decision, judgment in zip(approval_ids, decisions, judged, strict=True):
        if as_json:
            print_json(
                {
                    "decision_id": decision.decision_id,
                    "approval_id": approval_id,
                    "approver": approver,
                    "verdict": verb,
                    "judgment": judgment,
                }
            )
        else:
            shown = escape(literal(approval_id).plain)
            console.print(f"{escape(approver)} {verb} {shown} (decision {decision.decision_id}, signed)")
            _print_judgment(judgment, shown, wait)
    if any(j is not None and j["outcome"] == "refused" for j in judged):
        raise typer.Exit(1)


def _one(approval_ids: list[str]) -> str:
    if len(approval_ids) != 1:
        raise fail("--edit edits one held call: name one approval", code=2)
    return approval_ids[0]


def _edit_object(text: str) -> dict[str, Any]:
    """The --edit text: a JSON object of the arguments it changes."""
    try:
        edit = json.loads(text)
    except ValueError as exc:
        raise fail(f"--edit is not JSON: {exc}", code=2) from exc
    if not isinstance(edit, dict):
        raise fail("--edit is a JSON object of the arguments it changes, e.g. '{\"amount_cents\": 3000}'", code=2)
    return edit


def _print_edited(held_as: str | None) -> None:
    """Where the edited call went: held again under its own approval (the editor counted once),
    or not held within the wait (it needed no more approvals, or validation or policy refused it)."""
    if held_as is not None:
        console.print(f"the edited call is held as {escape(literal(held_as).plain)}; your approval counts on it once")
    else:
        console.print("[yellow]the edited call is not held (yet); its observation says how it ended[/yellow]")


def _print_judgment(judged: dict[str, Any] | None, shown: str, wait: float) -> None:
    """What became of a signed decision: counted, a no-op, refused, or not judged in time."""
    if judged is None and wait > 0:
        console.print(f"[yellow]not judged within {wait:g} s; see toolgate approvals show {shown}[/yellow]")
    elif judged is not None and judged["outcome"] == "counted":
        console.print(f"counted: the approval is now {escape(str(judged['status_after']))}")
        if judged.get("status_after") == "EDITED":
            _print_edited(judged.get("edited_approval_id"))
    elif judged is not None:
        color = "yellow" if judged["outcome"] == "noop" else "red"
        said = escape(literal(f"{judged['outcome']}: {judged['code']}: {judged['reason']}").plain)
        console.print(f"[{color}]{said}[/{color}]")


@approvals_app.command("approve")
def approvals_approve(
    approval_ids: Annotated[list[str], IDS_ARGUMENT],
    approver: Annotated[str, APPROVER_OPTION],
    reason: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    wait: Annotated[float, WAIT_OPTION] = 15.0,
    edit: Annotated[str | None, typer.Option("--edit", help=EDIT_HELP)] = None,
) -> None:
    """Sign and publish an approval of each held call (one signed decision each); say whether
    each counted (exit 1 when any was refused). With --edit, approve edited arguments of one held
    call instead: the edited call goes back through validation and policy and needs its own
    approvals (yours counts once); an edit that widens is refused and the approval stays open."""
    _decide(approval_ids, approver, True, reason, as_json, wait, edit)


@approvals_app.command("deny")
def approvals_deny(
    approval_ids: Annotated[list[str], IDS_ARGUMENT],
    approver: Annotated[str, APPROVER_OPTION],
    reason: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    wait: Annotated[float, WAIT_OPTION] = 15.0,
) -> None:
    """Sign and publish a denial of each held call: the calls end, nothing runs."""
    _decide(approval_ids, approver, False, reason, as_json, wait, None)


@approvers_app.command("add")
def approvers_add(
    approver: str,
    risk_classes: Annotated[str, typer.Option(help="comma-separated side-effect classes")] = "HIGH_RISK_EXTERNAL",
    groups: Annotated[str, typer.Option(help="comma-separated approver groups")] = "",
    tenant: Annotated[list[str] | None, TENANT_OPTION] = None,
    acts_as: Annotated[list[str] | None, ACTS_AS_OPTION] = None,
    actor: Annotated[str, ACTOR_OPTION] = "operator",
) -> None:
    """Register a new approver for the tenants it decides for (at least one): a new Ed25519 key
    (private in the local keyring, public in Postgres), linked to the user ids it acts as. An
    approver already registered is refused (`rotate` replaces a key, `tenants` its tenants,
    `acts-as` its users)."""
    from toolgate.ops import approvers

    classes, named = [c for c in risk_classes.split(",") if c], [g for g in groups.split(",") if g]
    grant = approvers.Grant(classes, named, tenant or [], acts_as or [])
    path = registry_call(approvers.add_approver, running(), approver, grant, actor)
    console.print(
        escape(f"approver {approver} registered for {', '.join(sorted(set(tenant or [])))}; private key at {path}")
    )


@approvers_app.command("invite")
def approvers_invite(
    approver: str,
    tenant: Annotated[list[str] | None, TENANT_OPTION] = None,
    groups: Annotated[str, typer.Option(help="comma-separated approver groups")] = "",
    risk_classes: Annotated[str, typer.Option(help="comma-separated side-effect classes")] = "HIGH_RISK_EXTERNAL",
    expires: Annotated[str, typer.Option(help="how long the invitation may be used: 30m, 24h, 7d")] = "24h",
    console_url: Annotated[str, typer.Option(help="the console's URL (default: the one `toolgate up` started)")] = "",
    actor: Annotated[str, ACTOR_OPTION] = "operator",
) -> None:
    """Invite a new approver to enrol in the console: its browser makes its key (only the public
    half is registered). Prints the one-time enrol URL, once; audited."""
    from toolgate.ops import invitations

    classes, named = [c for c in risk_classes.split(",") if c], [g for g in groups.split(",") if g]
    invited = registry_call(
        invitations.invite, running(), approver, tenant or [], named, classes, expires, actor, console_url
    )
    console.print(literal(f"invitation for {approver}, valid until {invited.expires_at} (shown once):"))
    console.print(literal(invited.url), soft_wrap=True)


@approvers_app.command("rotate")
def approvers_rotate(approver: str, actor: Annotated[str, ACTOR_OPTION] = "operator") -> None:
    """Give an active approver a new key; decisions signed with the old one stop counting."""
    from toolgate.ops import approvers

    key_id, path = registry_call(approvers.rotate_approver, running(), approver, actor)
    console.print(f"approver {approver} has a new key {key_id}; private key at {path}")


@approvers_app.command("tenants")
def approvers_tenants(
    approver: str,
    tenant: Annotated[list[str] | None, TENANT_OPTION] = None,
    actor: Annotated[str, ACTOR_OPTION] = "operator",
) -> None:
    """Set the tenants an active approver decides for; its decisions on any other tenant's
    tickets stop counting at once."""
    from toolgate.ops import approvers

    served = registry_call(approvers.serve, running(), approver, tenant or [], actor)
    console.print(escape(f"approver {approver} decides for {', '.join(served)}"))


@approvers_app.command("acts-as")
def approvers_acts_as(
    approver: str,
    user: Annotated[list[str] | None, typer.Option("--user", help="a user id it acts as (repeat for each)")] = None,
    nobody: Annotated[bool, typer.Option("--none", help="it acts as no user")] = False,
    actor: Annotated[str, ACTOR_OPTION] = "operator",
) -> None:
    """Set the user ids an active approver acts as; its decisions on a call any of them requested
    stop counting at once, even those already made."""
    from toolgate.ops import approvers

    if bool(user) == nobody:
        raise SystemExit("name each user with --user, or --none for no user")
    users = registry_call(approvers.act_as, running(), approver, user or [], actor)
    console.print(escape(f"approver {approver} acts as {', '.join(users) or 'no user'}"))


@approvers_app.command("list")
def approvers_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    from toolgate.ops import approvers

    print_rows(
        approvers.list_approvers(running()),
        as_json,
        lambda r: (
            f"{r['approver']:12} {r['status']:8} {r['key_id']}  {','.join(r['risk_classes'])}  "
            f"groups={','.join(r['groups'])}  tenants={','.join(r['tenants'])}  acts_as={','.join(r['acts_as'])}"
        ),
    )


@approvers_app.command("revoke")
def approvers_revoke(approver: str, actor: Annotated[str, ACTOR_OPTION] = "operator") -> None:
    """Revoke an approver for good: its decisions stop counting at once."""
    from toolgate.ops import approvers

    if not approvers.revoke_approver(running(), approver, actor):
        raise SystemExit(f"no active approver {approver}")
    console.print(f"approver {approver} revoked")
