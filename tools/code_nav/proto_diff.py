"""Wire-format breaking changes of ``.proto`` files between a git revision and the working tree.

Reported: a field removed without ``reserved`` (its number or name), a field's number changed, a
number reused by another field, a field's type changed (with the note when both types share a wire
encoding: int32/int64/uint32/uint64/bool, sint32/sint64, fixed32/sfixed32, fixed64/sfixed64,
string/bytes), an enum value removed without ``reserved`` or renumbered, an rpc or service removed,
an rpc's request or response type changed, a whole ``.proto`` file removed.
"""

from __future__ import annotations

from tools.code_nav.model import BreakingChange
from tools.code_nav.proto import Message, ProtoFile

COMPATIBLE = [{"int32", "int64", "uint32", "uint64", "bool"}, {"sint32", "sint64"}, {"fixed32", "sfixed32"},
              {"fixed64", "sfixed64"}, {"string", "bytes"}]


def _same_wire(a: str, b: str) -> bool:
    return any(a in group and b in group for group in COMPATIBLE)


def compare(path: str, old: ProtoFile, new: ProtoFile) -> list[BreakingChange]:
    out: list[BreakingChange] = []

    def add(line: int, kind: str, message: str) -> None:
        out.append(BreakingChange(file=path, line=line, kind=kind, message=message))

    for name, msg in old.messages.items():
        now = new.messages.get(name)
        if now is None:
            add(1, "message_removed", f"message {name} removed (rpcs or fields using it break)")
            continue
        _fields(msg, now, add, "field")
    for name, enum in old.enums.items():
        now = new.enums.get(name)
        if now is None:
            add(1, "enum_removed", f"enum {name} removed")
            continue
        _fields(enum, now, add, "enum_value")
    for sname, svc in old.services.items():
        now_svc = new.services.get(sname)
        if now_svc is None:
            add(1, "service_removed", f"service {sname} removed: every client call fails (UNIMPLEMENTED)")
            continue
        for rname, rpc in svc.rpcs.items():
            now_rpc = now_svc.rpcs.get(rname)
            if now_rpc is None:
                add(now_svc.line, "rpc_removed", f"rpc {sname}.{rname} removed: its clients get UNIMPLEMENTED")
            elif (rpc.request, rpc.response, rpc.client_streaming, rpc.server_streaming) != (
                    now_rpc.request, now_rpc.response, now_rpc.client_streaming, now_rpc.server_streaming):
                add(now_rpc.line, "rpc_signature_changed",
                    f"rpc {sname}.{rname}: ({rpc.request}) returns ({rpc.response}) became "
                    f"({now_rpc.request}) returns ({now_rpc.response})")
    return out


def _fields(old: Message, new: Message, add: object, what: str) -> None:
    by_name_new = {f.name: f for f in new.fields.values()}
    for number, f in old.fields.items():
        now = new.fields.get(number)
        moved = by_name_new.get(f.name)
        label = "enum value" if what == "enum_value" else "field"
        if moved is not None and moved.number != number:
            add(moved.line, f"{what}_number_changed",  # type: ignore[operator]
                f"{new.name}.{f.name}: {label} number {number} -> {moved.number} (old senders' data lands elsewhere)")
        if now is None:
            if moved is None and not new.is_reserved(number, f.name):
                add(new.line, f"{what}_removed",  # type: ignore[operator]
                    f"{new.name}.{f.name} = {number} removed without `reserved {number};`: a later field may reuse "
                    "the number")
            continue
        if now.name != f.name:
            add(now.line, "number_reused",  # type: ignore[operator]
                f"{new.name}: number {number} was {f.name}, now {now.name}" +
                ("" if now.type == f.type else f" ({f.type} -> {now.type})"))
        elif what == "field" and (now.type != f.type or (now.label == "repeated") != (f.label == "repeated")):
            note = " (same wire encoding: values may still be misread)" if _same_wire(f.type, now.type) else ""
            add(now.line, "field_type_changed",  # type: ignore[operator]
                f"{new.name}.{f.name} = {number}: {f.label + ' ' if f.label else ''}{f.type} -> "
                f"{now.label + ' ' if now.label else ''}{now.type}{note}")
