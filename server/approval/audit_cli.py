"""``mesh-mcp audit verify [--expect-head HASH]``: check the remediation audit log's chain.

Prints the records count, the head (``COUNT:SHA256``) and what was checked; exit 0 when
the chain is intact (and, with ``--expect-head``, the anchored record is still there),
1 otherwise. Without an anchor, lines dropped from the end or an edited last line cannot
be seen: the output says so. See :meth:`server.approval.audit.AuditLog.verify`.
"""

from __future__ import annotations

import argparse

from server.cli_support import add_common_flags, print_json, settings_from_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``audit`` subcommand's parser (called by :func:`server.cli.build_parser`)."""
    p = sub.add_parser("audit", help="check the remediation audit log (hash chain, optional anchor)")
    add_common_flags(p)
    p.add_argument("action", choices=["verify"])
    p.add_argument("--expect-head", metavar="HASH",
                   help="an audit head noted earlier (HASH or COUNT:HASH, printed by approve, apply and this "
                        "command): also detects truncation and an edited last line up to it")


def cmd_audit(args: argparse.Namespace) -> int:
    from server.approval.audit import audit_log, parse_anchor
    from server.errors import InvalidArgument

    settings = settings_from_args(args)
    if args.expect_head:
        try:
            parse_anchor(args.expect_head)
        except ValueError as exc:
            raise InvalidArgument(f"--expect-head: {exc}") from None
    log = audit_log(settings)
    result = log.verify(args.expect_head)
    if args.json:
        print_json({"ok": result.ok, "file": str(log.path), "records": result.records, "head": str(result.head),
                    "anchor_checked": result.anchor_checked, "detail": result.detail})
    else:
        print(f"{'ok' if result.ok else 'FAILED'}: {log.path}: {result.detail}")
        print(f"head {result.head}")
    return 0 if result.ok else 1


async def checks(runtime: object) -> list:
    """``mesh-mcp doctor``'s checks: the audit chain, and the approval gate's trust check."""
    from server.approval.audit import audit_log
    from server.approval.trust import gate_status
    from server.checks import Check

    settings = runtime.settings  # type: ignore[attr-defined]
    log = audit_log(settings)
    result = log.verify()
    out = [Check(name="audit_log", status="ok" if result.ok else "fail",
                 detail=f"{log.path}: {result.detail}; head {result.head}",
                 fix=None if result.ok else "the log was edited or cut: compare it with its copy "
                 "([approval] audit_copy_file or syslog) and keep the damaged file for inspection")]
    status = gate_status(settings)
    if status.mode == "local":
        out.append(Check(name="approval_gate", status="ok",
                         detail="local mode: stops accidents, not a determined agent running as this user",
                         fix=None))
    else:
        out.append(Check(name="approval_gate", status="fail" if status.problems else "ok",
                         detail="; ".join(status.lines()[1:] if not status.problems else status.problems),
                         fix=None if not status.problems else "make the trust file and every folder above it "
                         "owned by root (or another user) and not writable by the server's user"))
    return out
