"""migration-diverges and migration-missing: shared migrations copied across repositories.

A migration is a TypeScript file whose path holds a ``migration_path_markers`` entry; its
identity is its class name (TypeORM puts the timestamp in it), else its file name. Its SQL is
every string of its ``up()`` method, compared with blanks collapsed, case folded and the
repository's own name (``ms-user``) replaced by a placeholder, so copies that only differ by the
service they run in are the same. ``down()`` is ignored (it does not shape the database).

- ``migration-diverges``: one identity, several repositories, different SQL. The finding is on
  a copy that differs from the most common version, with the first differing words.
- ``migration-missing``: a repository holding migrations of a folder whose migrations other
  repositories share (present in two or more), but not the later ones of that set.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from tools.lint.context import LintContext
from tools.lint.model import Evidence, Finding
from tools.verify.tsparse import CLASS_NODES, class_methods, line_of, walk

_TS = re.compile(r"^(\d{10,})")
_CLASS_TS = re.compile(r"(\d{10,})$")
_BLANKS = re.compile(r"\s+")


@dataclass
class Migration:
    file: str
    package: str
    folder: str  # folder inside the package
    name: str
    timestamp: int
    line: int
    sql: str  # normalised


def _normalise(sql: str, package: str) -> str:
    text = _BLANKS.sub(" ", sql).strip().lower()
    own = PurePosixPath(package).name.lower()
    return text.replace(own, "<repo>") if own else text


def read_migrations(ctx: LintContext) -> list[Migration]:
    out: list[Migration] = []
    for rel in ctx.production_files:
        if not any(m in "/" + rel for m in ctx.lint.migration_path_markers):
            continue
        pf = ctx.parse(rel)
        if pf is None:
            continue
        package = ctx.package_of(rel)
        inside = rel[len(package) + 1:] if package and rel.startswith(package + "/") else rel
        stem = PurePosixPath(rel).stem
        for cls in walk(pf.root):
            if cls.type not in CLASS_NODES:
                continue
            methods = class_methods(pf, cls, ctx.lint.migration_up_methods)
            if not methods:
                continue
            name = pf.text(cls.child_by_field_name("name")) or stem
            found = _CLASS_TS.search(name) or _TS.match(stem)
            strings = [pf.text(n)[1:-1] for n in walk(methods[0]) if n.type in ("string", "template_string")]
            out.append(Migration(file=rel, package=package, folder=str(PurePosixPath(inside).parent), name=name,
                                 timestamp=int(found.group(1)) if found else 0, line=line_of(cls),
                                 sql=_normalise("\n".join(strings), package)))
    return out


def _first_difference(a: str, b: str) -> str:
    wa, wb = a.split(" "), b.split(" ")
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag != "equal":
            left = " ".join(wa[max(0, i1 - 2):i2 + 1][:10]) or "(nothing)"
            right = " ".join(wb[max(0, j1 - 2):j2 + 1][:10]) or "(nothing)"
            return f"'{left}' vs '{right}'"
    return "(same words)"


def _diverging(groups: dict[str, list[Migration]]) -> list[Finding]:
    findings = []
    for name, copies in sorted(groups.items()):
        if len({m.package for m in copies}) < 2:
            continue
        variants: dict[str, list[Migration]] = {}
        for m in copies:
            variants.setdefault(m.sql, []).append(m)
        if len(variants) < 2:
            continue
        ranked = sorted(variants.values(), key=lambda ms: (-len(ms), ms[0].file))
        reference = ranked[0]
        odd = ranked[1][0]
        evidence = [Evidence(file=m.file, line=m.line, note=f"version 1 of {name} ({len(reference)} cop(ies))")
                    for m in reference]
        for number, group in enumerate(ranked[1:], start=2):
            diff = _first_difference(reference[0].sql, group[0].sql)
            evidence += [Evidence(file=m.file, line=m.line, note=f"version {number} of {name}: differs at {diff}")
                         for m in group]
        findings.append(Finding(
            code="migration-diverges", severity="warning", file=odd.file, line=odd.line,
            message=f"migration {name} exists in {len({m.package for m in copies})} repositories with "
                    f"{len(variants)} different SQL versions ({_first_difference(reference[0].sql, odd.sql)}): "
                    "databases migrated from different repositories end up different",
            fix=f"make every copy of {name} identical to the reference version ({reference[0].file}), or give the "
                "variant a migration of its own",
            evidence=evidence, subject=f"migration:{name}",
        ))
    return findings


def _missing(migrations: list[Migration], groups: dict[str, list[Migration]]) -> list[Finding]:
    shared = {name: ms for name, ms in groups.items() if len({m.package for m in ms}) >= 2}
    by_package: dict[str, set[str]] = {}
    for m in migrations:
        by_package.setdefault(m.package, set()).add(m.name)
    folders: dict[str, set[str]] = {}
    for name, ms in shared.items():
        for m in ms:
            folders.setdefault(m.folder, set()).add(name)
    findings = []
    for package in sorted(by_package):
        mine = by_package[package]
        for folder, names in sorted(folders.items()):
            present = [next(m for m in shared[n] if m.package == package) for n in sorted(names & mine)]
            present = [m for m in present if m.folder == folder]
            if not present:
                continue
            latest = max(m.timestamp for m in present)
            lacking = sorted((n for n in names - mine if min(m.timestamp for m in shared[n]) > latest),
                             key=lambda n: (shared[n][0].timestamp, n))
            if not lacking:
                continue
            last = max(present, key=lambda m: (m.timestamp, m.name))
            evidence = [Evidence(file=last.file, line=last.line,
                                 note=f"latest migration of the shared set in {package}: {last.name}")]
            for n in lacking:
                holders = sorted(shared[n], key=lambda m: m.file)
                evidence += [Evidence(file=m.file, line=m.line, note=f"{n} exists in {m.package}") for m in holders[:3]]
            findings.append(Finding(
                code="migration-missing", severity="warning", file=last.file, line=last.line,
                message=f"{package} lacks {len(lacking)} later migration(s) of the set shared in {folder} "
                        f"({', '.join(lacking)}): its database keeps the older definitions",
                fix=f"copy {', '.join(lacking)} into {package}/{folder}",
                evidence=evidence, subject=f"migrations:{package}/{folder}",
            ))
    return findings


def check(ctx: LintContext) -> list[Finding]:
    migrations = read_migrations(ctx)
    groups: dict[str, list[Migration]] = {}
    for m in migrations:
        groups.setdefault(m.name, []).append(m)
    return _diverging(groups) + _missing(migrations, groups)
