"""What a method writes to the outbox: the index's producer sites inside it, and in what it calls.

From a ``Class.method`` (a ``@GrpcMethod`` handler, a gateway controller method), the producer sites
of the linked index whose enclosing symbol is that method (``createJob``, ``withFallback``,
``createEvent``, repository ``create``), then, a few levels deep, those of the methods it calls on
its injected collaborators (``this.postService.create(...)``: the field's declared type names the
class) and on itself (``this.helper(...)``). Each write carries the chain of calls followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tools.code_nav.files import read_text
from tools.code_nav.memo import per_build
from tools.code_nav.model import OutboxWrite, Where

if TYPE_CHECKING:
    from tools.mesh_index.service import IndexService

MEMBER_CALL = re.compile(r"this\s*\.\s*([A-Za-z_$][\w$]*)\s*\??\.\s*([A-Za-z_$][\w$]*)\s*(?:<[^()]*>)?\s*\(")
SELF_CALL = re.compile(r"this\s*\.\s*([A-Za-z_$][\w$]*)\s*(?:<[^()]*>)?\s*\(")
MAX_DEPTH = 3
PRODUCER_KINDS = ("create_job", "fallback", "create_event", "repository_create", "direct_queue", "ws_send")


class Writes:
    """Producer sites by (file, symbol), method declarations and class files: built once per question."""

    def __init__(self, service: IndexService, include_tests: bool):
        self.service = service
        self.facts = service.all_facts()
        self.include_tests = include_tests
        self.by_symbol, self.methods, self.classes = per_build(
            service, f"writes:{include_tests}", lambda: _tables(service, self.facts, include_tests))

    def field_type(self, cls: str, fld: str) -> str | None:
        """The declared class of ``this.<fld>`` in ``cls`` (constructor parameter or typed field), up its bases."""
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            rel = self.classes.get(cls)
            info = (self.facts.get(rel, {}).get("classes", {}).get(cls, {}) if rel else {})
            typed = info.get("field_types", {})
            if fld in typed:
                return typed[fld]
            cls = info.get("extends", "")
        return None

    def of(self, symbol: str, on_call: Callable[[str, str, int], None] | None = None) -> list[OutboxWrite]:
        out: list[OutboxWrite] = []
        self._walk(symbol, [], set(), out, on_call)
        return out

    def _walk(self, symbol: str, chain: list[str], seen: set[str], out: list[OutboxWrite],
              on_call: Callable[[str, str, int], None] | None) -> None:
        if symbol in seen or len(chain) > MAX_DEPTH:
            return
        seen.add(symbol)
        found = self.methods.get(symbol)
        if found is None:
            return
        rel, d = found
        for kind, value, s in self.by_symbol.get((rel, symbol), ()):
            out.append(OutboxWrite(kind=s.kind, value=value, at=Where(repo=s.repo, file=s.file, line=s.line,
                                                                       symbol=s.symbol),
                                   via=list(chain), confidence="heuristic" if chain and s.confidence != "exact"
                                   else s.confidence))  # type: ignore[arg-type]
            del kind
        text = read_text(self.service.workspace, rel)
        if text is None:
            return
        body = "\n".join(text.splitlines()[d[2] - 1:d[3]])
        cls = symbol.split(".", 1)[0]
        for m in MEMBER_CALL.finditer(body):
            target_cls = self.field_type(cls, m.group(1))
            if target_cls is None:
                continue
            callee = f"{target_cls}.{m.group(2)}"
            if on_call is not None:
                on_call(symbol, callee, d[2] + body.count("\n", 0, m.start()))
            self._walk(callee, [*chain, callee], seen, out, on_call)
        for m in SELF_CALL.finditer(body):
            callee = self._own_method(cls, m.group(1))
            if callee is not None:
                self._walk(callee, [*chain, callee], seen, out, on_call)

    def _own_method(self, cls: str, name: str) -> str | None:
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            if f"{cls}.{name}" in self.methods:
                return f"{cls}.{name}"
            rel = self.classes.get(cls)
            cls = self.facts.get(rel, {}).get("classes", {}).get(cls, {}).get("extends", "") if rel else ""
        return None


def _tables(service: IndexService, facts: dict[str, Any], include_tests: bool) -> tuple[Any, Any, Any]:
    by_symbol: dict[tuple[str, str | None], list[tuple[str, str, Any]]] = {}
    for (kind, value), sites in service.linked().producers.items():
        for s in sites:
            if s.kind in PRODUCER_KINDS and (include_tests or not s.test_only):
                by_symbol.setdefault((s.file, s.symbol), []).append((kind, value, s))
    methods: dict[str, tuple[str, list[Any]]] = {}
    classes: dict[str, str] = {}
    for rel, f in facts.items():
        for d in f.get("decls", ()):
            if d[1] == "method":
                methods.setdefault(d[0], (rel, d))
            elif d[1] == "class":
                classes.setdefault(d[0], rel)
    return by_symbol, methods, classes
