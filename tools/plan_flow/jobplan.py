"""The steps of a new job: contracts, the publish stop, the producer, the handler, worker and module.

Each role follows the sibling flow of the domain that shows it best (the index's sites:
a production ``createJob`` for the producer, a handler a worker routes on the job's queue
for the handler, worker and module); ``why`` cites the sibling's file:line.
"""

from __future__ import annotations

import re
from pathlib import Path

from tree_sitter import Node

from server.config import StaticConventions
from tools.mesh_index.linked import LinkedIndex, SiteRec, WorkerRec
from tools.plan_flow.contracts import ContractSteps, _import_of, _in_import
from tools.plan_flow.copying import class_node, handler_copy, package_imports, producer_copy, remove_elements
from tools.plan_flow.domain import Member, cite
from tools.plan_flow.edits import Edit, Source, find_identifiers, read_source, sibling_edits, walk
from tools.plan_flow.model import PlanStep
from tools.plan_flow.names import Renamer, camel, derived_pairs, kebab, member_forms, pascal, suffix_word
from tools.plan_flow.sibling import JobSibling, job_siblings, step

__all__ = ["JobPlanner", "JobSibling", "job_siblings", "step"]


class JobPlanner(ContractSteps):
    def __init__(self, workspace: Path, linked: LinkedIndex, conv: StaticConventions, new: str, value: str):
        self.ws = workspace
        self.linked = linked
        self.conv = conv
        self.new = new
        self.value = value
        self.notes: list[str] = []
        self.extra: dict[str, str] = {}  # names of a template from another domain -> this domain's

    # --- renaming -----------------------------------------------------------------------
    def renamer(
        self, sib: JobSibling, text: str, extra: dict[str, str] | None = None, protected: set[str] | None = None
    ) -> Renamer:
        pairs = member_forms(sib.member.member, self.new)
        # the member itself only where it is read through its enum (or an alias of it): `Streams.X` is not it
        del pairs[sib.member.member]
        owners = {n.split(".")[0] for n in [sib.member.qualified, *sib.member.info.aliases]}
        owners |= {m.group(1) for o in list(owners) for m in re.finditer(rf"\b{re.escape(o)}\s+as\s+(\w+)", text)}
        for owner in owners:
            pairs[f"{owner}.{sib.member.member}"] = f"{self.extra.get(owner, owner)}.{self.new}"
        pairs[sib.member.info.value] = self.value
        pairs.update(derived_pairs(text, sib.member.member, self.new, protected or set()))
        pairs.update(self.extra)
        pairs.update(extra or {})
        return Renamer(pairs)

    # --- producer -----------------------------------------------------------------------
    def emit(self, sib: JobSibling, site: SiteRec, queue_pairs: dict[str, str]) -> PlanStep | None:
        src = read_source(self.ws / site.file)
        if src is None:
            return None
        rename = self.renamer(sib, src.text, queue_pairs, package_imports(src))
        missing: list[str] = []
        copied = producer_copy(src, site.line, camel(self.new), rename, missing)
        if copied is None:
            return None
        text, method, old_name = copied
        end = method.end_point[0] + 1
        edit = Edit("insert", end, end, src.lines[end - 1].strip(), "\n" + text)
        return step(
            "emit",
            site.file,
            edit,
            f"copy of {site.symbol or old_name} ({cite(site)}), which writes {sib.member.qualified} "
            "with createJob in the outbox; set the payload fields of the new job"
            + (
                f" (it reads {', '.join(missing)} from the sibling's own code: supply the new job's)" if missing else ""
            ),
        )

    # --- handler, worker, module --------------------------------------------------------
    def handler_names(self, sib: JobSibling) -> tuple[str, str]:
        cls = sib.handler.key[1] if sib.handler else ""
        return cls, self._renamed_class(cls, sib, "Handler")

    def _renamed_class(self, cls: str, sib: JobSibling, suffix: str) -> str:
        p_old = pascal(sib.member.member)
        if p_old in cls:
            return cls.replace(p_old, pascal(self.new), 1)
        return pascal(self.new) + (suffix_word(cls) or suffix)

    def new_handler_file(self, sib: JobSibling) -> str:
        old = sib.handler.key[0]
        folder, _, name = old.rpartition("/")
        k_old = kebab(sib.member.member)
        if k_old in name:
            new_name = name.replace(k_old, kebab(self.new), 1)
        else:
            new_name = kebab(self.new) + "." + name.split(".", 1)[1] if "." in name else kebab(self.new) + ".ts"
        return f"{folder}/{new_name}"

    def create_handler(self, sib: JobSibling, payload_expr: str) -> PlanStep | None:
        h = sib.handler
        assert h is not None
        src = read_source(self.ws / h.key[0])
        if src is None:
            return None
        old_cls, new_cls = self.handler_names(sib)
        rename = self.renamer(sib, src.text, {old_cls: new_cls}, package_imports(src))
        data, payload = self.conv.job_data_field, self.conv.job_payload_field
        key = self.conv.original_payload_key

        def body(indent: str) -> str:
            return (
                f"{indent}const {payload} = job.{data}.{payload};\n"
                f"{indent}// the work of {self.new}: read its fields from {payload} ({payload_expr})\n"
                f"{indent}return {{ {key}: job.{data}.{payload} }};"
            )

        text = handler_copy(src, old_cls, tuple(self.conv.handler_methods), body, rename)
        if text is None:
            return None
        return step(
            "create_handler",
            self.new_handler_file(sib),
            None,
            f"shape of {old_cls} ({cite(h.site)}), in its folder; handle() reads the envelope and returns "
            "the original payload",
            snippet=text,
        )

    def worker_vars(self, src: Source, cls_node: Node, handler_cls: str, others: set[str] | None = None) -> set[str]:
        """Parameters and fields of the worker that hold the handler itself (not a list of handlers)."""
        out = set()
        for n in walk(cls_node):
            if others and find_identifiers(src, others, n):
                continue
            value = n.child_by_field_name("value")
            if value is not None and value.type == "array":
                continue
            if n.type in ("required_parameter", "optional_parameter", "public_field_definition") and find_identifiers(
                src, {handler_cls}, n
            ):
                name = n.child_by_field_name("pattern") or n.child_by_field_name("name")
                if name is not None:
                    out.add(src.node_text(name))
        return out

    def route(self, sib: JobSibling, worker: WorkerRec) -> list[PlanStep]:
        src = read_source(self.ws / worker.key[0])
        if src is None:
            return []
        cls = class_node(src, worker.key[1])
        old_cls, new_cls = self.handler_names(sib)
        handler_classes = {k[1] for k in worker.handlers} - {old_cls}
        vars_ = self.worker_vars(src, cls, old_cls, handler_classes) if cls is not None else set()
        extra = {old_cls: new_cls}
        for v in vars_:
            extra[v] = self._renamed_var(v, sib)
        old_file = sib.handler.key[0].rsplit("/", 1)[1].rsplit(".", 1)[0]
        new_file = self.new_handler_file(sib).rsplit("/", 1)[1].rsplit(".", 1)[0]
        extra[old_file] = new_file
        rename = self.renamer(sib, src.text, extra, package_imports(src))
        names = {old_cls, *vars_, sib.member.member}
        returns = []

        def skip(elem: Node) -> bool:
            if elem.type == "return_statement":
                returns.append(elem)
                return True
            return False

        edits = [e for e in sibling_edits(src, names, rename, skip=skip) if cls is None or e.line >= 1]
        edits = [e for e in edits if _in_scope(src, e, cls)]
        if returns:
            owner = self.merged_or_owner(sib.member)
            if not find_identifiers(src, {owner}):
                imported = [i for i in find_identifiers(src, set(package_imports(src))) if _in_import(i)]
                messaging = [i for i in imported if "messaging" in src.node_text(_import_of(i))] or imported
                if messaging:
                    first = src.node_text(messaging[0])
                    extra_edit = sibling_edits(src, {first}, Renamer({first: owner}), within=_import_of(messaging[0]))
                    edits.extend(e for e in extra_edit[:1])
        for ret in returns:
            line = ret.start_point[0]
            ind = src.lines[line][: len(src.lines[line]) - len(src.lines[line].lstrip())]
            job_type = f"{self.merged_or_owner(sib.member)}.{self.new}"
            snippet = f"{ind}if (job.name === {job_type}) {{\n{ind}  {rename(src.node_text(ret))}\n{ind}}}"
            edits.append(Edit("insert", line, line, src.lines[line - 1].strip() if line else "", snippet))
        why = f"as {old_cls} is routed by {worker.key[1]} ({cite(worker.site)})"
        return [step("route_in_worker", worker.key[0], e, why) for e in sorted(edits, key=lambda e: e.line)]

    def _renamed_var(self, var: str, sib: JobSibling) -> str:
        for form in (camel, pascal):
            if form(sib.member.member) in var:
                return var.replace(form(sib.member.member), form(self.new), 1)
        return camel(self.new) + ("Handler" if var.endswith("Handler") else "")

    def merged_or_owner(self, member: Member) -> str:
        """How code names the domain's jobs: the merged object when the member is spread into it."""
        for name in [member.qualified, *member.info.aliases]:
            if name.split(".")[0] in self.conv.merged_job_object:
                return name.split(".")[0]
        return self.extra.get(member.owner, member.owner)

    def provide(
        self,
        sib: JobSibling,
        module_file: str,
        module_line: int,
        cls_old: str,
        cls_new: str,
        extra: dict[str, str],
        what: str,
    ) -> list[PlanStep]:
        src = read_source(self.ws / module_file)
        if src is None:
            return []
        aliases = {
            src.node_text(spec.child_by_field_name("alias"))
            for spec in walk(src.root)
            if spec.type == "import_specifier"
            and spec.child_by_field_name("alias") is not None
            and src.node_text(spec.child_by_field_name("name")) == cls_old
        }
        extra = {**extra, **{a: cls_new for a in aliases}}
        rename = self.renamer(sib, src.text, {cls_old: cls_new, **extra}, package_imports(src))
        edits = sibling_edits(src, {cls_old, *aliases}, rename)
        return [
            step("provide_in_module", module_file, e, f"{what} is provided the same way ({module_file}:{module_line})")
            for e in edits
        ]

    def new_worker(
        self, sib: JobSibling, worker: WorkerRec, q_old: Member | None, q_new: tuple[str, str]
    ) -> tuple[str, str, str] | None:
        """(file, class, text) of a worker for queue ``q_new`` (owner, member), copied from ``worker`` with only
        the new handler."""
        from tools.plan_flow.edits import parse_text

        src = read_source(self.ws / worker.key[0])
        if src is None:
            return None
        cls = class_node(src, worker.key[1])
        old_cls, new_cls = self.handler_names(sib)
        others: set[str] = set()
        for key in worker.handlers:
            if key[1] != old_cls:
                others.add(key[1])
                others |= self.worker_vars(src, cls, key[1]) if cls is not None else set()
        text = remove_elements(src, others, cls) if others else src.text
        m_old = q_old.member if q_old is not None else ""
        p_old, p_new = pascal(m_old), pascal(q_new[1])
        if p_old and p_old not in worker.key[1] and p_old.endswith("s") and p_old[:-1] in worker.key[1]:
            p_old, p_new = p_old[:-1], (p_new[:-1] if p_new.endswith("s") else p_new)
        w_new = (
            worker.key[1].replace(p_old, p_new, 1)
            if p_old and p_old in worker.key[1]
            else p_new + suffix_word(worker.key[1])
        )
        folder, _, name = worker.key[0].rpartition("/")
        stem = re.sub(r"(?<!^)(?=[A-Z])", "-", p_old).lower() if p_old else ""
        new_stem = re.sub(r"(?<!^)(?=[A-Z])", "-", p_new).lower()
        fname = name.replace(stem, new_stem, 1) if stem and stem in name else new_stem + "." + name.split(".", 1)[-1]
        again = parse_text(text)
        again_cls = class_node(again, worker.key[1])
        extra = {worker.key[1]: w_new, old_cls: new_cls}
        if m_old:
            extra[m_old] = q_new[1]
        if q_old is not None and q_old.owner != q_new[0]:
            extra[q_old.owner] = q_new[0]
        for v in self.worker_vars(again, again_cls, old_cls) if again_cls is not None else set():
            extra[v] = self._renamed_var(v, sib)
        extra[sib.handler.key[0].rsplit("/", 1)[1].rsplit(".", 1)[0]] = (
            self.new_handler_file(sib).rsplit("/", 1)[1].rsplit(".", 1)[0]
        )
        rename = self.renamer(sib, text, extra, package_imports(again) - {worker.key[1]})
        return f"{folder}/{fname}", w_new, rename(text)


def _in_scope(src: Source, edit: Edit, cls: Node | None) -> bool:
    if cls is None:
        return True
    line = edit.line - 1
    inside = cls.start_point[0] <= line <= cls.end_point[0]
    return (
        inside
        or src.lines[edit.line - 1].lstrip().startswith("import")
        or src.lines[edit.end_line - 1].lstrip().startswith("import")
        or "from '" in edit.snippet
    )
