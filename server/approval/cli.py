"""``mesh-mcp approve PLAN_ID`` and ``mesh-mcp approver init``: the human side of remediation.

``approve`` refuses to run unless stdin is an interactive terminal, checks the plan's
integrity and expiry, resolves where every step runs with its own settings (the PostgreSQL
service and database, or the Redis instance: refused when the plan says otherwise), shows the
whole plan (where each step runs, every command, precondition, backup and
blast radius) and the approval gate as checked by this command (the approver set with
ids and key fingerprints, the trust file it came from, the trust check and any warning),
then (signature mode) finds the approver's key file, shows a random code and asks the
human to type it back, then asks for the key's passphrase, and prints the approval token
on stdout; the audit log's new head goes to stderr with the rest of the screen, so the
token is the only thing on stdout.

The code is random per run and shown only here: nothing a tool returns lets anyone guess
it. It proves someone read this screen; it does not prove that someone is human (an agent
can drive a pseudo-terminal). In ``local`` mode that is the whole gate; in ``signature``
mode the passphrase, which never leaves the human's terminal, is the real one. See
docs/remediation.md, threat model.
"""

from __future__ import annotations

import argparse
import getpass
import hmac
import secrets
import sys
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from server.approval.audit import audit_log
from server.approval.keys import (
    MIN_PASSPHRASE_CHARS,
    approver_keys,
    create_approver_key,
    fingerprint,
    key_file_approver,
    load_approver_key,
    public_key_text,
)
from server.approval.refusal_window import RefusalBound, flush_due, record_unknown_plan_refusal
from server.approval.tokens import describe_mode, mint_token
from server.approval.trust import GateStatus, gate_status
from server.cli_support import settings_from_args
from server.config import Settings
from server.errors import InvalidArgument, MeshError, NotFound, RemediationRefused
from tools.remediation import store
from tools.remediation.model import Plan
from tools.remediation.targets import check_targets

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
KEY_DIR = Path("~/.config/mesh-mcp")

Ask = Callable[[str], str]


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def _normalise(typed: str) -> str:
    return "".join(ch for ch in typed.upper() if ch.isalnum())


def safe(text: object) -> str:
    """``text`` with control and format characters shown as ``\\u{...}``: a plan file cannot move the
    cursor, erase lines or reorder text on the approver's terminal (ANSI escapes, bidi overrides)."""
    return "".join(
        f"\\u{{{ord(ch):04x}}}" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch
        for ch in str(text)
    )


def _check_text(kind: str, args: dict) -> str:
    where = " ".join(str(args[k]) for k in ("service", "table", "key", "stream", "group", "queue", "id", "job_id",
                                              "consumer", "member", "step") if args.get(k) is not None)
    return f"{kind} {where}".strip()


def render_plan(plan: Plan) -> str:
    """The whole plan as a human reads it before approving (every line made terminal-safe)."""
    return "\n".join(safe(line) for line in _plan_lines(plan))


def _plan_lines(plan: Plan) -> list[str]:
    br = plan.blast_radius
    lines = [
        f"Plan {plan.plan_id}  ({plan.symptom})",
        f"  {plan.summary}",
        f"  proposed {plan.created_at}, expires {plan.expires_at}",
        f"  sha256 {plan.plan_sha256}",
        f"  blast radius: {br.messages} message(s), {br.rows} row(s), {br.keys} key(s)"
        + (f"; streams {', '.join(br.streams)}" if br.streams else "")
        + (f"; tables {', '.join(br.tables)}" if br.tables else "")
        + (f"; replays reach groups {', '.join(br.consumer_groups_reached)}" if br.consumer_groups_reached else ""),
        "",
    ]
    for step in plan.steps:
        lines.append(f"Step {step.number}: {step.action} - {step.description}")
        lines.append(f"  runs on: {step.runs_on}")
        lines.append(f"  target: {step.target}")
        lines.extend(f"    {line}" for line in step.command.splitlines())
        for params in step.params:
            lines.append(f"    params: {params}")
        lines.append(f"  precondition: {step.precondition}")
        lines.extend(f"    check: {_check_text(c.kind, c.args)}" for c in step.checks)
        lines.append(f"  backup: {step.backup or 'none (nothing is deleted by this step)'}")
        lines.append(f"  reversible: {'yes' if step.reversible else 'NO'}")
        lines.append("")
    lines.extend(f"WARNING: {w}" for w in plan.warnings)
    lines.extend(f"note: {n}" for n in plan.notes)
    return lines


def _load_checked(settings: Settings, plan_id: str, plan_file: Path | None) -> Plan:
    plan = store.load_plan_file(plan_file) if plan_file is not None else store.load_plan(settings, plan_id)
    if plan.plan_id != plan_id:
        raise RemediationRefused(f"{plan_file} holds plan {plan.plan_id}, not {plan_id}")
    store.check_integrity(plan, settings.conventions)
    check_targets(plan, settings)  # resolved with this command's settings: the screen shows where steps run
    if store.is_expired(plan):
        raise RemediationRefused(f"plan {plan_id} expired at {plan.expires_at}: have the agent propose it again")
    if store.application_record(settings, plan_id) is not None:
        raise RemediationRefused(f"plan {plan_id} was already applied: a plan runs once")
    return plan


def approve_plan(
    settings: Settings,
    plan_id: str,
    *,
    is_tty: bool,
    ask: Ask,
    ask_secret: Ask,
    out: TextIO,
    approver: str | None = None,
    key_path: Path | None = None,
    plan_file: Path | None = None,
) -> str:
    """The interactive approval; returns the token. Raises RemediationRefused/MeshError on refusal."""
    audit = audit_log(settings)
    bound = RefusalBound.of(settings)
    plan_id = store.validate_plan_id(plan_id)

    def refuse(reason: str, message: str, plan: Plan | None = None, *, unknown: bool = False) -> RemediationRefused:
        if unknown:  # no such plan: audited within the bound of server.approval.refusal_window
            record_unknown_plan_refusal(audit, bound, "approval_refused", plan_id=plan_id, plan_sha256=None,
                                        approver=approver, result=reason, detail=message)
        else:
            audit.record("approval_refused", plan_id=plan_id, plan_sha256=plan.plan_sha256 if plan else None,
                         approver=approver, result=reason, detail=message)
        return RemediationRefused(message)

    flush_due(audit, bound)  # an ended window of counted refusals is written before this approval's records
    if not is_tty:
        no_plan = not (plan_file or store.plan_path(settings, plan_id)).exists()
        raise refuse("not_a_terminal", "refusing: stdin is not an interactive terminal. `mesh-mcp approve` is run "
                     "by a human at a terminal, who reads the plan and types its code; piped input is refused",
                     unknown=no_plan)
    try:
        plan = _load_checked(settings, plan_id, plan_file)
    except MeshError as exc:
        raise refuse("plan_unusable", str(exc), unknown=isinstance(exc, NotFound)) from None
    print(render_plan(plan), file=out)
    status = gate_status(settings)
    print("\n" + "\n".join(safe(line) for line in gate_screen(settings, plan, status)), file=out)
    key_file: Path | None = None
    if settings.approval.mode == "signature":  # find the key before asking anything
        key_file = (key_path or KEY_DIR / f"{approver or getpass.getuser()}.key").expanduser()
        try:
            file_approver = key_file_approver(key_file)
        except MeshError as exc:
            raise refuse("bad_key", str(exc), plan) from None
        if approver is not None and approver != file_approver:
            raise refuse("bad_key", f"{key_file} is the key of approver {file_approver!r}, not {approver!r}", plan)
        approver = file_approver
        if approver not in settings.approval.approvers:
            raise refuse("unknown_approver", f"approver {approver!r} (key {key_file}) is not listed in the trust file "
                         f"{settings.approval.trust_file}: the server would refuse the token", plan)
        print(f"key file: {safe(key_file)} (approver {safe(approver)})", file=out)
    code = new_code()
    print(f"\nTo approve exactly this plan, type the code {code} (anything else cancels).", file=out)
    typed = ask("code: ")
    if not hmac.compare_digest(_normalise(typed).encode(), code.encode()):
        raise refuse("wrong_code", "the code did not match: nothing was approved", plan)
    private_key = None
    if key_file is not None:
        passphrase = ask_secret(f"passphrase of approver key {key_file}: ")
        try:
            file_approver, private_key = load_approver_key(key_file, passphrase)
        except MeshError as exc:
            raise refuse("bad_key", str(exc), plan) from None
        listed = approver_keys(settings)[file_approver]
        if public_key_text(listed) != public_key_text(private_key.public_key()):
            raise refuse("bad_key", f"{key_file} does not match the public key listed for {approver!r} "
                         f"({fingerprint(listed)}): the server would refuse the token", plan)
    else:
        approver = f"local:{getpass.getuser()}"
    token, claims = mint_token(
        settings, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256,
        plan_expires_at=datetime.fromisoformat(plan.expires_at), approver=approver, private_key=private_key,
    )
    expires = datetime.fromtimestamp(claims.exp, UTC).isoformat(timespec="seconds")
    entry = audit.record("approved", plan_id=plan.plan_id, plan_sha256=plan.plan_sha256, approver=approver,
                         result="approved", detail=f"token expires {expires}", nonce=claims.nonce, expires=claims.exp)
    print(f"\nApproved by {approver}. The token approves this plan once and expires at {expires}.\n"
          "Give it to the agent as approval_token of apply_remediation (or apply with dry_run first).\n"
          f"Audit log head now: {entry['head']} (note it: `mesh-mcp audit verify --expect-head {entry['head']}` "
          "later proves the log was not cut or rewritten since)", file=out)
    return token


def gate_screen(settings: Settings, plan: Plan, status: GateStatus) -> list[str]:
    """What the human must see before approving: approvers, where they came from, the trust check, warnings.

    ``status`` is computed here, in the approver's own process; the plan's note is what the
    server (or whoever wrote the plan file) said, shown for comparison.
    """
    lines = ["Approval gate (checked now, by this command):", *(f"  {line}" for line in status.lines())]
    if status.mode == "signature" and status.problems:
        lines.append("  WARNING: an agent running as the server's user could have added its own approver key; "
                     "check the approver list above before typing your passphrase")
    if status.mode == "local":
        lines.append("  " + describe_mode(settings))
    lines.append(f"Server's note in the plan: {plan.approval_note}")
    if plan.approval_mode != settings.approval.mode:
        lines.append(f"  WARNING: the plan was proposed in {plan.approval_mode} mode but this command runs in "
                     f"{settings.approval.mode} mode: the server and this command do not read the same settings")
    return lines


def _ask_on_stderr(prompt: str) -> str:
    """Like ``input`` but the prompt goes to stderr: stdout carries the token only."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return sys.stdin.readline()


def cmd_approve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    token = approve_plan(
        settings, args.plan_id, is_tty=sys.stdin.isatty(), ask=_ask_on_stderr, ask_secret=getpass.getpass,
        out=sys.stderr,
        approver=args.approver, key_path=args.key, plan_file=args.plan_file,
    )
    print(token)
    return 0


def init_approver(approver_id: str, out_path: Path | None, *, is_tty: bool, ask_secret: Ask, out: TextIO,
                  scrypt_n: int | None = None) -> str:
    """Create a passphrase-protected key pair; returns the config line. Refuses without a terminal."""
    if not is_tty:
        raise RemediationRefused("refusing: stdin is not an interactive terminal; the passphrase must be typed "
                                 "by the approver")
    path = (out_path or KEY_DIR / f"{approver_id}.key").expanduser()
    first = ask_secret(f"new passphrase for {path} (at least {MIN_PASSPHRASE_CHARS} characters): ")
    if len(first) < MIN_PASSPHRASE_CHARS:
        raise InvalidArgument(f"the passphrase must have at least {MIN_PASSPHRASE_CHARS} characters")
    if ask_secret("the same passphrase again: ") != first:
        raise InvalidArgument("the two passphrases differ: nothing was created")
    kwargs = {"scrypt_n": scrypt_n} if scrypt_n else {}
    public = create_approver_key(path, approver_id, first, **kwargs)
    line = f'{approver_id} = "{public}"'
    print(f"created {path} (keep it private; the passphrase never leaves your terminal).\n"
          "Add this line under [approvers] of the server's trust file (default /etc/mesh-mcp/trust.toml, owned "
          "by root or another user than the server's, mode 0644; see docs/remediation.md):", file=out)
    return line


def cmd_approver(args: argparse.Namespace) -> int:
    approver_id = args.approver_id or getpass.getuser()
    line = init_approver(approver_id, args.out, is_tty=sys.stdin.isatty(), ask_secret=getpass.getpass,
                         out=sys.stderr)
    print("mode = \"signature\"\n\n[approvers]\n" + line)
    return 0
