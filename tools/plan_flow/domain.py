"""A domain as the index sees it: its declared members, queues and the sibling flows to copy.

The domain a caller names is matched against what each declaration is *about*: the enum or
object that declares it (``EventsJobType`` -> ``events``), the prefix of its values
(``events.geocode_event``) and the folder of its declaration. Everything else (handlers,
workers, producers, modules) is reached from the declared values through the index's
resolution, never from file names.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from tools.mesh_index.linked import LinkedIndex, SiteRec, TypeInfo

OWNER_SUFFIXES = (
    "eventmessagingtype",
    "messagingtype",
    "jobtypes",
    "jobtype",
    "eventtypes",
    "eventtype",
    "queues",
    "queue",
    "jobs",
    "events",
    "job",
    "event",
    "types",
    "type",
    "enum",
)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _singular(text: str) -> str:
    return text[:-1] if len(text) > 3 and text.endswith("s") else text


def owner_key(owner: str) -> str:
    key = _norm(owner)
    for suffix in OWNER_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            key = key[: -len(suffix)]
            break
    return _singular(key)


def keys_of(info: TypeInfo) -> set[str]:
    keys = {owner_key(info.name.split(".")[0])}
    head = re.split(r"[.:/_-]", info.value, maxsplit=1)[0]
    if head != info.value:
        keys.add(_singular(_norm(head)))
    if info.defined_at is not None:
        parts = info.defined_at.file.split("/")
        if len(parts) >= 2:
            keys.add(_singular(_norm(parts[-2])))
    return {k for k in keys if k}


@dataclass
class Member:
    info: TypeInfo
    owner: str
    member: str
    file: str
    line: int

    @property
    def qualified(self) -> str:
        return self.info.name


@dataclass
class Domain:
    name: str
    kind: str
    members: list[Member] = field(default_factory=list)
    queues: list[Member] = field(default_factory=list)
    fallback_from: str | None = None  # the requested domain when this one is its fallback


def _member(info: TypeInfo) -> Member | None:
    d = info.defined_at
    if d is None:
        return None
    owner, _, member = info.name.partition(".")
    return Member(info, owner, member, d.file, d.line)


def declared(linked: LinkedIndex, kind: str, package: str) -> list[Member]:
    out = []
    for (k, _v), info in linked.declared.items():
        if k != kind or info.test_only or info.defined_at is None:
            continue
        if not info.defined_at.file.startswith(package):
            continue
        m = _member(info)
        if m is not None:
            out.append(m)
    return sorted(out, key=lambda m: (m.file, m.line))


def domain_names(linked: LinkedIndex, kind: str, package: str) -> dict[str, list[Member]]:
    """Domain key (from the declaring enum) -> members."""
    out: dict[str, list[Member]] = {}
    for m in declared(linked, kind, package):
        out.setdefault(owner_key(m.owner), []).append(m)
    return out


def resolve_domain(linked: LinkedIndex, kind: str, domain: str, package: str) -> Domain:
    want = _singular(_norm(domain))
    members = [m for m in declared(linked, kind, package) if want in keys_of(m.info)]
    queues = [m for m in declared(linked, "queue", package) if want in keys_of(m.info)] if kind == "job" else []
    return Domain(domain, kind, members, queues)


def closest_domain(linked: LinkedIndex, kind: str, domain: Domain, package: str) -> Domain | None:
    """The domain to follow when ``domain`` has no member of ``kind``: the one declared nearest to it."""
    names = domain_names(linked, kind, package)
    if not names:
        return None
    own_files = [q.file for q in domain.queues]
    if kind == "event" or not own_files:
        own_files += [
            m.file
            for m in declared(linked, "event" if kind == "job" else "job", package)
            if _singular(_norm(domain.name)) in keys_of(m.info)
        ]

    def score(item: tuple[str, list[Member]]) -> tuple[int, float, int, str]:
        key, members = item
        shared = max((len(_common(f, m.file)) for f in own_files for m in members), default=0)
        similar = difflib.SequenceMatcher(None, _norm(domain.name), key).ratio()
        return (shared, similar, len(members), key)

    key, members = max(names.items(), key=score)
    queues = [m for m in declared(linked, "queue", package) if key in keys_of(m.info)]
    return Domain(key, kind, members, queues, fallback_from=domain.name)


def _common(a: str, b: str) -> list[str]:
    out = []
    for x, y in zip(a.split("/")[:-1], b.split("/")[:-1], strict=False):
        if x != y:
            break
        out.append(x)
    return out


def production(sites: list[SiteRec] | None) -> list[SiteRec]:
    return [s for s in sites or [] if not s.test_only]


def cite(site: Any) -> str:
    return f"{site.file}:{site.line}"
