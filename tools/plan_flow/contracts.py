"""The contracts steps of a new job: enum member, payload interface, registry key, merged spread, queue.

Mixed into :class:`tools.plan_flow.jobplan.JobPlanner` (``self.ws``, ``self.conv``, ``self.new``,
``self.value``); every anchor is a declaration the index resolved.
"""

from __future__ import annotations

import re
from pathlib import Path

from tree_sitter import Node

from server import workspace_files
from server.config import StaticConventions
from tools.plan_flow.domain import Member, cite
from tools.plan_flow.edits import Edit, find_identifiers, read_source, sibling_edits, walk
from tools.plan_flow.model import PlanStep
from tools.plan_flow.names import Renamer, pascal, suffix_word
from tools.plan_flow.sibling import step


class ContractSteps:
    ws: Path
    conv: StaticConventions
    new: str
    value: str

    # --- contracts ----------------------------------------------------------------------
    def add_member(self, last: Member) -> PlanStep | None:
        src = read_source(self.ws / last.file)
        if src is None:
            return None
        idents = [n for n in find_identifiers(src, {last.member}) if n.start_point[0] + 1 == last.line]
        if not idents:
            return None
        rename = Renamer({last.member: self.new, last.info.value: self.value})
        edits = sibling_edits(src, {last.member}, rename, within=idents[0].parent)
        if not edits:
            return None
        return step(
            "add_member",
            last.file,
            edits[0],
            f"after the domain's last member {last.qualified} ({cite(last)}), same shape",
        )

    def payload_type(self, old: str, sib: Member) -> str:
        if not re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", old):
            return old  # an inline type (`{ from: string }`): its shape is kept, its fields are the sibling's
        p_old, p_new = pascal(sib.member), pascal(self.new)
        if p_old in old:
            return old.replace(p_old, p_new, 1)
        prefix = "I" if len(old) > 1 and old[0] == "I" and old[1].isupper() else ""
        return f"{prefix}{p_new}{suffix_word(old) or 'Payload'}"

    def payload_interface(self, name: str, package: str) -> tuple[str, int, int, bool] | None:
        """(file, start line, end line, exported) of ``interface name`` in the contracts package."""
        from tools.verify.tsparse import marked_files

        for pf in marked_files(self.ws / package, self.conv.skip_dirs, [f"interface {name}".encode()], 5000):
            for n in walk(pf.root):
                if n.type == "interface_declaration" and pf.text(n.child_by_field_name("name")) == name:
                    top = n.parent if n.parent is not None and n.parent.type == "export_statement" else n
                    return (
                        pf.path.relative_to(self.ws).as_posix(),
                        top.start_point[0] + 1,
                        top.end_point[0] + 1,
                        top is not n,
                    )
        return None

    def add_payload(self, sib: Member, p_old: str, p_new: str, package: str) -> PlanStep | None:
        found = self.payload_interface(p_old, package)
        if found is None:
            return None
        file, start, end, exported = found
        lines = workspace_files.read_text(self.ws, file, errors="strict").splitlines()
        fields = [x.strip() for x in lines[start : end - 1] if x.strip() and not x.strip().startswith("//")]
        inner = "  // the fields of " + self.new + (f" (the sibling has: {' '.join(fields)})" if fields else "")
        snippet = "\n" + ("export " if exported else "") + f"interface {p_new} {{\n{inner}\n}}"
        edit = Edit("insert", end, end, lines[end - 1].strip(), snippet)
        return step(
            "add_payload_interface", file, edit, f"shape of {p_old} ({file}:{start}), the payload of {sib.qualified}"
        )

    def add_registry(
        self, registry_file: str, sib: Member, key_line: int, p_old: str, p_new: str, payload_file: str | None
    ) -> list[PlanStep]:
        src = read_source(self.ws / registry_file)
        if src is None:
            return []
        rename = Renamer({sib.member: self.new, p_old: p_new})
        out = []
        if payload_file != registry_file:
            imports = [n for n in find_identifiers(src, {p_old}) if _in_import(n)]
            if imports:
                edits = sibling_edits(src, {p_old}, rename, within=_import_of(imports[0]))
                if edits:
                    out.append(
                        step(
                            "add_import",
                            registry_file,
                            edits[0],
                            f"{p_old} is imported the same way ({registry_file}:{edits[0].line})",
                        )
                    )
        keys = [n for n in find_identifiers(src, {sib.member}) if n.start_point[0] + 1 == key_line]
        if keys:
            edits = sibling_edits(src, {sib.member}, rename, within=_property_of(keys[0]))
            if edits:
                out.append(
                    step(
                        "add_registry_key",
                        registry_file,
                        edits[0],
                        f"as {sib.qualified}'s key ({registry_file}:{key_line})",
                    )
                )
        return out

    def spread_into_merged(self, last: Member, package: str) -> list[PlanStep]:
        """Steps spreading ``last``'s enum into the merged job object, after the object's last spread."""
        import os

        from tools.verify.tsparse import marked_files

        markers = [f"const {name}".encode() for name in self.conv.merged_job_object]
        for pf in marked_files(self.ws / package, self.conv.skip_dirs, markers, 5000):
            rel = pf.path.relative_to(self.ws).as_posix()
            src = read_source(pf.path)
            if src is None:
                continue
            for n in walk(src.root):
                if (
                    n.type != "variable_declarator"
                    or src.node_text(n.child_by_field_name("name")) not in self.conv.merged_job_object
                ):
                    continue
                spreads = [c for c in walk(n) if c.type == "spread_element"]
                if not spreads:
                    continue
                idents = [c for c in walk(spreads[-1]) if c.type == "identifier"]
                if not idents:
                    continue
                other = src.node_text(idents[-1])
                rename = Renamer({other: last.owner})
                edits = sibling_edits(src, {other}, rename, within=spreads[-1].parent)
                if not edits:
                    continue
                name = src.node_text(n.child_by_field_name("name"))
                out = [
                    step(
                        "add_member",
                        rel,
                        edits[0],
                        f"{last.owner} is not spread into {name} yet: spread it like {other} ({rel}:{edits[0].line})",
                    )
                ]
                if not [i for i in find_identifiers(src, {last.owner}) if _in_import(i)]:
                    target = os.path.relpath(self.ws / last.file, (self.ws / rel).parent).replace(os.sep, "/")
                    target = ("./" if not target.startswith(".") else "") + target.rsplit(".", 1)[0]
                    ext = ".js" if ".js'" in src.text or '.js"' in src.text else ""
                    imports = [c for c in src.root.named_children if c.type == "import_statement"]
                    line = imports[-1].end_point[0] + 1 if imports else 0
                    out.insert(
                        0,
                        step(
                            "add_import",
                            rel,
                            Edit(
                                "insert",
                                line,
                                line,
                                src.lines[line - 1].strip() if line else "",
                                f"import {{ {last.owner} }} from '{target}{ext}';",
                            ),
                            f"{last.owner} must be imported where {name} spreads it",
                        ),
                    )
                return out
        return []

    def add_queue(self, last: Member, member: str, value: str) -> PlanStep | None:
        src = read_source(self.ws / last.file)
        if src is None:
            return None
        idents = [n for n in find_identifiers(src, {last.member}) if n.start_point[0] + 1 == last.line]
        if not idents:
            return None
        edits = sibling_edits(
            src, {last.member}, Renamer({last.member: member, last.info.value: value}), within=idents[0].parent
        )
        return (
            step("add_queue", last.file, edits[0], f"after {last.qualified} ({cite(last)}), the domain's queue enum")
            if edits
            else None
        )


def _in_import(node: Node) -> bool:
    return _import_of(node) is not None


def _import_of(node: Node) -> Node | None:
    n = node
    while n is not None and n.type != "import_statement":
        n = n.parent
    return n


def _property_of(node: Node) -> Node | None:
    n = node
    while n is not None and n.type not in ("property_signature", "pair", "enum_assignment"):
        n = n.parent
    return n
