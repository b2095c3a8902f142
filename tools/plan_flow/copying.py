"""Copies of a sibling's code, renamed: a handler file, a producer method, a worker file.

Each copy keeps the sibling's shape (imports, decorators, fields, signature) and replaces
only what belongs to the sibling's own work: a handler's ``handle`` body becomes the
envelope read and the ``{ originalPayload: job.data.payload }`` return; a producer keeps
the statements that build and save its job; a new worker keeps only the new handler.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from tools.plan_flow.edits import Source, find_identifiers, parse_text, walk

METHOD_TYPES = frozenset({"method_definition"})


def class_node(src: Source, name: str) -> Node | None:
    for n in walk(src.root):
        if n.type in ("class_declaration", "abstract_class_declaration", "class"):
            ident = n.child_by_field_name("name")
            if ident is not None and src.node_text(ident) == name:
                return n
    return None


def methods(src: Source, cls: Node) -> list[Node]:
    body = cls.child_by_field_name("body")
    return [c for c in (body.named_children if body is not None else []) if c.type == "method_definition"]


def method_name(src: Source, method: Node) -> str:
    name = method.child_by_field_name("name")
    return src.node_text(name) if name is not None else ""


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _replace_spans(text: bytes, spans: list[tuple[int, int, str]]) -> str:
    out = text
    for start, end, new in sorted(spans, reverse=True):
        out = out[:start] + new.encode() + out[end:]
    return out.decode("utf-8", errors="replace")


def package_imports(src: Source) -> set[str]:
    """Names imported from packages (non-relative specifiers): the workspace's API, never renamed."""
    names: set[str] = set()
    for stmt in src.root.named_children:
        if stmt.type != "import_statement":
            continue
        source = stmt.child_by_field_name("source")
        if source is None or src.node_text(source).strip("'\"`").startswith("."):
            continue
        for n in walk(stmt):
            if n.type == "identifier":
                names.add(src.node_text(n))
    return names


def prune_imports(text: str) -> str:
    """Drop named imports the text no longer uses (and import statements left empty)."""
    src = parse_text(text)
    used_text = text
    spans: list[tuple[int, int, str]] = []
    for stmt in src.root.named_children:
        if stmt.type != "import_statement":
            continue
        body = used_text[:0]
        rest = src.data[: stmt.start_byte] + src.data[stmt.end_byte :]
        specs = [n for n in walk(stmt) if n.type == "import_specifier"]
        if not specs:
            continue
        keep = []
        for spec in specs:
            local = spec.child_by_field_name("alias") or spec.child_by_field_name("name")
            name = src.node_text(local) if local is not None else ""
            if name and find_identifiers(parse_text(rest.decode()), {name}):
                keep.append(src.node_text(spec))
        del body
        if len(keep) == len(specs):
            continue
        if not keep:
            end = stmt.end_byte + (1 if src.data[stmt.end_byte : stmt.end_byte + 1] == b"\n" else 0)
            spans.append((stmt.start_byte, end, ""))
            continue
        named = next(n for n in walk(stmt) if n.type == "named_imports")
        spans.append((named.start_byte, named.end_byte, "{ " + ", ".join(keep) + " }"))
    return _replace_spans(src.data, spans)


def handler_copy(
    src: Source,
    cls_name: str,
    handle_methods: tuple[str, ...],
    body: Callable[[str], str],
    rename: Callable[[str], str],
) -> str | None:
    """The sibling handler file with only its constructor and ``handle`` (body replaced), renamed."""
    cls = class_node(src, cls_name)
    if cls is None:
        return None
    spans: list[tuple[int, int, str]] = []
    found = False
    for m in methods(src, cls):
        name = method_name(src, m)
        if name in handle_methods:
            block = m.child_by_field_name("body")
            if block is None:
                return None
            indent = indent_of(src.lines[m.start_point[0]]) + "  "
            spans.append((block.start_byte, block.end_byte, "{\n" + body(indent) + "\n" + indent[:-2] + "}"))
            found = True
        elif name != "constructor":
            start = m.start_byte
            line_start = src.data.rfind(b"\n", 0, start) + 1
            end = m.end_byte + (1 if src.data[m.end_byte : m.end_byte + 1] == b"\n" else 0)
            # also the blank line before it
            prev = src.data.rfind(b"\n", 0, max(line_start - 1, 0)) + 1
            if src.data[prev:line_start].strip() == b"":
                line_start = prev
            spans.append((line_start, end, ""))
    if not found:
        return None
    return prune_imports(rename(_replace_spans(src.data, spans)))


def producer_copy(
    src: Source, site_line: int, new_method: str, rename: Callable[[str], str], missing: list[str]
) -> tuple[str, Node, str] | None:
    """(renamed method text, the sibling method, its name): the statements that build and save the job.

    ``missing`` receives the local names those statements read from the sibling's dropped statements."""
    method = None
    for n in walk(src.root):
        if (
            n.type in METHOD_TYPES
            and n.start_point[0] < site_line <= n.end_point[0] + 1
            and (method is None or n.start_byte >= method.start_byte)
        ):
            method = n
    if method is None:
        return None
    block = method.child_by_field_name("body")
    if block is None:
        return None
    stmts = [s for s in block.named_children if s.type != "comment"]
    first = next((i for i, s in enumerate(stmts) if s.start_point[0] < site_line <= s.end_point[0] + 1), None)
    if first is None:
        return None
    keep = [stmts[first]]
    declared = _declared_names(src, stmts[first])
    dropped: set[str] = set()
    for s in stmts[:first]:
        dropped |= _declared_names(src, s)
    for s in stmts[first + 1 :]:
        names = {src.node_text(i) for i in walk(s) if i.type == "identifier"}
        if declared & names and not (names & dropped):
            keep.append(s)
        else:
            dropped |= _declared_names(src, s)
    indent = indent_of(src.lines[stmts[first].start_point[0]])
    body_text = "\n".join(indent + src.node_text(s) for s in keep)
    used = {
        src.node_text(i) for s in keep for i in walk(s) if i.type in ("identifier", "shorthand_property_identifier")
    }
    earlier: set[str] = set()
    for s in stmts[:first]:
        earlier |= _declared_names(src, s)
    missing.extend(sorted(used & earlier))
    head = src.data[method.start_byte : block.start_byte].decode()
    ret = method.child_by_field_name("return_type")
    if ret is not None and not any(s.type == "return_statement" for s in keep):
        void = ": Promise<void>" if "async" in head.split("(", 1)[0] else ": void"
        old = src.node_text(ret)
        if "void" not in old:
            head = head.replace(old, void, 1)
    old_name = method_name(src, method)
    text = head + "{\n" + body_text + "\n" + indent_of(src.lines[method.start_point[0]]) + "}"
    text = indent_of(src.lines[method.start_point[0]]) + rename(text)
    renamed = rename(old_name)
    if renamed == old_name:
        text = text.replace(old_name, new_method, 1)
    return text, method, old_name


def _declared_names(src: Source, stmt: Node) -> set[str]:
    out = set()
    if stmt.type in ("lexical_declaration", "variable_declaration"):
        for d in stmt.named_children:
            if d.type == "variable_declarator":
                name = d.child_by_field_name("name")
                if name is not None:
                    out |= {
                        src.node_text(i)
                        for i in walk(name)
                        if i.type in ("identifier", "shorthand_property_identifier_pattern")
                    }
    return out


def remove_elements(src: Source, names: set[str], within: Node | None) -> str:
    """The text without the list elements (params, entries, imports, cases) that name any of ``names``."""
    from tools.plan_flow.edits import _element

    spans: list[tuple[int, int, str]] = []
    seen: set[int] = set()
    for ident in find_identifiers(src, names, None):
        in_scope = within is None or (within.start_byte <= ident.start_byte < within.end_byte)
        top = ident
        while top.parent is not None and top.parent.type != "program":
            top = top.parent
        if not in_scope and top.type != "import_statement":
            continue
        found = _element(ident, names, src)
        if found is None:
            continue
        elem, _container = found
        if elem.id in seen:
            continue
        if top.type == "import_statement" and elem.type == "import_specifier":
            specs = [n for n in walk(top) if n.type == "import_specifier"]
            if len(specs) == 1:
                elem = top
        seen.add(elem.id)
        start, end = elem.start_byte, elem.end_byte
        after = src.data[end : end + 2]
        line_start = src.data.rfind(b"\n", 0, start) + 1
        line_end = src.data.find(b"\n", end)
        line_end = len(src.data) if line_end < 0 else line_end
        tail = src.data[end:line_end].strip()
        if src.data[line_start:start].strip() == b"" and tail in (b"", b","):
            spans.append((line_start, min(line_end + 1, len(src.data)), ""))
        elif after.startswith(b","):
            spans.append((start, end + (2 if after == b", " else 1), ""))
        else:
            before = src.data.rfind(b",", 0, start)
            spans.append((before if before >= line_start else start, end, ""))
    return _replace_spans(src.data, spans)
