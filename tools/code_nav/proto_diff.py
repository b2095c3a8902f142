"""Wire-format breaking changes of ``.proto`` files between a git revision and the working tree.

Reported: a field removed without ``reserved`` of its number (a reserved name alone leaves the number
free for reuse), a field's number changed, a number reused by another field, a field renamed with the
same number and type (``field_renamed``: wire-compatible, breaks JSON/text format only), a field's
type changed (message and enum types compared fully qualified, so ``Inner`` and ``M.Inner`` are the
same type; with the note when both types share a wire encoding: int32/int64/uint32/uint64/bool,
sint32/sint64, fixed32/sfixed32, fixed64/sfixed64, string/bytes, and an enum with
int32/int64/uint32/uint64), an enum value removed without ``reserved`` or renumbered, an rpc or
service removed, an rpc's request or response type changed, a whole ``.proto`` file removed.
"""

from __future__ import annotations

from tools.code_nav.model import BreakingChange
from tools.code_nav.proto import Message, ProtoFile

COMPATIBLE = [{"int32", "int64", "uint32", "uint64", "bool"}, {"sint32", "sint64"}, {"fixed32", "sfixed32"},
              {"fixed64", "sfixed64"}, {"string", "bytes"}]


ENUM_VARINT = {"int32", "int64", "uint32", "uint64"}  # an enum's wire form is an int32 varint


def _same_wire(a: str, b: str) -> bool:
    return any(a in group and b in group for group in COMPATIBLE)


def _qualified(ftype: str, scope: str, pf: ProtoFile) -> str:
    """A field type as declared in message ``scope``, resolved by protobuf's scoping rules (innermost
    scope first) to a message or enum of this file, named without the package; scalars and types
    this file does not declare (imports) are returned as written, without the package prefix."""
    if ftype.startswith("map<") and "," in ftype:
        key, value = ftype[4:-1].split(",", 1)
        return f"map<{key},{_qualified(value, scope, pf)}>"
    known = pf.messages.keys() | pf.enums.keys()
    if pf.package and ftype.startswith(pf.package + "."):
        rest = ftype[len(pf.package) + 1:]
        if rest in known:
            return rest
    parts = scope.split(".") if scope else []
    for i in range(len(parts), -1, -1):
        candidate = ".".join([*parts[:i], ftype])
        if candidate in known:
            return candidate
    return ftype


def compare(path: str, old: ProtoFile, new: ProtoFile) -> list[BreakingChange]:
    out: list[BreakingChange] = []

    def add(line: int, kind: str, message: str) -> None:
        out.append(BreakingChange(file=path, line=line, kind=kind, message=message))

    for name, msg in old.messages.items():
        now = new.messages.get(name)
        if now is None:
            add(1, "message_removed", f"message {name} removed (rpcs or fields using it break)")
            continue
        _fields(msg, now, add, "field", old, new)
    for name, enum in old.enums.items():
        now = new.enums.get(name)
        if now is None:
            add(1, "enum_removed", f"enum {name} removed")
            continue
        _fields(enum, now, add, "enum_value", old, new)
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


def _fields(old: Message, new: Message, add: object, what: str, old_file: ProtoFile, new_file: ProtoFile) -> None:
    by_name_new = {f.name: f for f in new.fields.values()}
    for number, f in old.fields.items():
        now = new.fields.get(number)
        moved = by_name_new.get(f.name)
        label = "enum value" if what == "enum_value" else "field"
        if moved is not None and moved.number != number:
            add(moved.line, f"{what}_number_changed",  # type: ignore[operator]
                f"{new.name}.{f.name}: {label} number {number} -> {moved.number} (old senders' data lands elsewhere)")
        if now is None:
            if moved is None and not new.is_reserved(number):
                only_name = f" (only the name is reserved: `reserved \"{f.name}\";` leaves the number free)" \
                    if f.name in new.reserved_names else ""
                add(new.line, f"{what}_removed",  # type: ignore[operator]
                    f"{new.name}.{f.name} = {number} removed without `reserved {number};`: a later field may reuse "
                    f"the number{only_name}")
            continue
        if what == "field":
            old_type = _qualified(f.type, old.name, old_file)
            new_type = _qualified(now.type, new.name, new_file)
            same_type = old_type == new_type and (now.label == "repeated") == (f.label == "repeated")
        else:
            old_type, new_type, same_type = f.type, now.type, True
        if now.name != f.name:
            if same_type:
                add(now.line, f"{what}_renamed",  # type: ignore[operator]
                    f"{new.name}: {label} {number} renamed {f.name} -> {now.name} (wire-compatible; "
                    "breaks JSON/text format only)")
            else:
                add(now.line, "number_reused",  # type: ignore[operator]
                    f"{new.name}: number {number} was {f.name}, now {now.name} ({f.type} -> {now.type})")
        elif not same_type:
            add(now.line, "field_type_changed",  # type: ignore[operator]
                f"{new.name}.{f.name} = {number}: {f.label + ' ' if f.label else ''}{f.type} -> "
                f"{now.label + ' ' if now.label else ''}{now.type}"
                f"{_wire_note(old_type, new_type, old_file, new_file)}")


def _wire_note(old_type: str, new_type: str, old_file: ProtoFile, new_file: ProtoFile) -> str:
    if _same_wire(old_type, new_type):
        return " (same wire encoding: values may still be misread)"
    old_enum, new_enum = old_type in old_file.enums, new_type in new_file.enums
    if (old_enum and new_type in ENUM_VARINT) or (new_enum and old_type in ENUM_VARINT):
        return (" (enum and integer share the varint wire encoding: not a wire break; JSON/text format "
                "changes between the value's name and its number, and unknown values may be truncated)")
    return ""
