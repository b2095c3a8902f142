"""A small, bounded parser of ``.proto`` files (proto2/proto3): package, services and their rpcs,
messages (nested ones named ``Outer.Inner``) with their fields, enums with their values, and the
``reserved`` numbers and names of each message and enum. Comments and string contents are
ignored; ``option`` blocks, ``extend`` and ``oneof`` wrappers are understood enough to read the
fields inside a ``oneof``. Never executes anything; a file over the size cap is not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_][\w.]*|\.[A-Za-z_][\w.]*|\d+|[{}();=<>,\[\]\-]|\S')
# A string literal or a comment, whichever starts first: `//` inside "http://x" is part of the string.
STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)
MAX_TOKENS = 400_000


@dataclass
class Field:
    name: str
    number: int
    type: str
    label: str  # "", repeated, optional, required, map
    line: int


@dataclass
class Message:
    name: str
    line: int
    fields: dict[int, Field] = field(default_factory=dict)
    reserved_numbers: set[int] = field(default_factory=set)
    reserved_ranges: list[tuple[int, int]] = field(default_factory=list)
    reserved_names: set[str] = field(default_factory=set)

    def is_reserved(self, number: int) -> bool:
        """Whether the number is reserved (a reserved name alone leaves the number free for reuse)."""
        return number in self.reserved_numbers or any(lo <= number <= hi for lo, hi in self.reserved_ranges)


@dataclass
class Rpc:
    name: str
    request: str
    response: str
    client_streaming: bool
    server_streaming: bool
    line: int


@dataclass
class Service:
    name: str
    line: int
    rpcs: dict[str, Rpc] = field(default_factory=dict)


@dataclass
class ProtoFile:
    path: str
    package: str = ""
    services: dict[str, Service] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)
    enums: dict[str, Message] = field(default_factory=dict)  # values as fields (name, number)
    imports: list[str] = field(default_factory=list)
    error: str | None = None


def _tokens(text: str) -> list[tuple[str, int]]:
    stripped = STRING_OR_COMMENT.sub(
        lambda m: m.group(0) if m.group(0)[0] in "\"'" else "\n" * m.group(0).count("\n"), text)
    out: list[tuple[str, int]] = []
    line = 1
    pos = 0
    for m in TOKEN.finditer(stripped):
        line += stripped.count("\n", pos, m.start())
        pos = m.start()
        out.append((m.group(0), line))
        if len(out) > MAX_TOKENS:
            break
    return out


class _Parser:
    def __init__(self, path: str, text: str):
        self.toks = _tokens(text)
        self.i = 0
        self.out = ProtoFile(path)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.toks[j][0] if j < len(self.toks) else ""

    def line(self) -> int:
        return self.toks[self.i][1] if self.i < len(self.toks) else 0

    def take(self) -> str:
        tok = self.peek()
        self.i += 1
        return tok

    def skip_statement(self) -> None:
        depth = 0
        while self.i < len(self.toks):
            if self.peek() == "}" and depth == 0:
                return  # the enclosing block's end: left to its owner
            tok = self.take()
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth <= 0:
                    return
            elif tok == ";" and depth == 0:
                return

    def run(self) -> ProtoFile:
        while self.i < len(self.toks):
            tok = self.peek()
            if tok == "package":
                self.take()
                self.out.package = self.take()
                self.skip_statement()
            elif tok == "import":
                self.take()
                while self.peek() in ("public", "weak"):
                    self.take()
                self.out.imports.append(self.take().strip("\"'"))
                self.skip_statement()
            elif tok == "service":
                self.service()
            elif tok == "message":
                self.message("")
            elif tok == "enum":
                self.enum("")
            elif tok == "}":
                self.take()
            else:
                self.skip_statement()
        return self.out

    def service(self) -> None:
        line = self.line()
        self.take()
        svc = Service(self.take(), line)
        self.out.services[svc.name] = svc
        if self.take() != "{":
            return
        while self.i < len(self.toks) and self.peek() != "}":
            if self.peek() != "rpc":
                self.skip_statement()
                continue
            rline = self.line()
            self.take()
            name = self.take()
            req, cs = self._rpc_type()
            if self.peek() == "returns":
                self.take()
            res, ss = self._rpc_type()
            svc.rpcs[name] = Rpc(name, req, res, cs, ss, rline)
            if self.peek() == "{":
                self.skip_statement()
            elif self.peek() == ";":
                self.take()
        self.take()

    def _rpc_type(self) -> tuple[str, bool]:
        if self.peek() != "(":
            return "", False
        self.take()
        stream = False
        if self.peek() == "stream":
            stream = True
            self.take()
        name = self.take()
        while self.i < len(self.toks) and self.take() != ")":
            pass
        return name.lstrip("."), stream

    def message(self, outer: str) -> None:
        line = self.line()
        self.take()
        name = (outer + "." if outer else "") + self.take()
        msg = Message(name, line)
        self.out.messages[name] = msg
        if self.take() != "{":
            return
        self._body(msg, name)

    def _body(self, msg: Message, scope: str) -> None:
        while self.i < len(self.toks) and self.peek() != "}":
            tok = self.peek()
            if tok == "message":
                self.message(scope)
            elif tok == "enum":
                self.enum(scope)
            elif tok == "oneof":
                self.take()
                self.take()
                if self.take() == "{":
                    self._body(msg, scope)
            elif tok == "reserved":
                self.take()
                self.reserved(msg)
            elif tok in ("option", "extensions", "extend"):
                self.skip_statement()
            else:
                self.field(msg)
        self.take()

    def field(self, msg: Message) -> None:
        line = self.line()
        label = ""
        if self.peek() in ("repeated", "optional", "required"):
            label = self.take()
        if self.peek() == "map" and self.peek(1) == "<":
            self.take()
            self.take()
            parts = []
            while self.i < len(self.toks) and self.peek() != ">":
                parts.append(self.take())
            self.take()
            ftype, label = "map<" + "".join(parts) + ">", "map"
        else:
            ftype = self.take().lstrip(".")
        name = self.take()
        if self.peek() != "=" or not self.peek(1).isdigit():
            self.skip_statement()
            return
        self.take()
        number = int(self.take())
        msg.fields[number] = Field(name, number, ftype, label, line)
        self.skip_statement()

    def reserved(self, msg: Message) -> None:
        while self.i < len(self.toks) and self.peek() != ";":
            tok = self.take()
            if tok[:1] in "\"'":
                msg.reserved_names.add(tok.strip("\"'"))
            elif tok.isdigit():
                lo = int(tok)
                if self.peek() == "to":
                    self.take()
                    hi_tok = self.take()
                    hi = 536_870_911 if hi_tok == "max" else int(hi_tok) if hi_tok.isdigit() else lo
                    msg.reserved_ranges.append((lo, hi))
                else:
                    msg.reserved_numbers.add(lo)
        self.take()

    def enum(self, outer: str) -> None:
        line = self.line()
        self.take()
        name = (outer + "." if outer else "") + self.take()
        enum = Message(name, line)
        self.out.enums[name] = enum
        if self.take() != "{":
            return
        while self.i < len(self.toks) and self.peek() != "}":
            tok = self.peek()
            if tok == "reserved":
                self.take()
                self.reserved(enum)
            elif tok == "option":
                self.skip_statement()
            else:
                vline = self.line()
                vname = self.take()
                if self.peek() == "=":
                    self.take()
                    neg = self.peek() == "-"
                    if neg:
                        self.take()
                    num = self.take()
                    if num.isdigit():
                        value = -int(num) if neg else int(num)
                        enum.fields.setdefault(value, Field(vname, value, "enum", "", vline))
                self.skip_statement()
        self.take()


def parse_proto(path: str, text: str) -> ProtoFile:
    """The declarations of one .proto file (``error`` set when the parser gave up part-way)."""
    try:
        return _Parser(path, text).run()
    except (IndexError, ValueError) as exc:  # pragma: no cover - defensive: a malformed file
        out = ProtoFile(path)
        out.error = f"{type(exc).__name__}: {exc}"
        return out
