"""Which config entry a site reads, when each subclass binds the key through ``super(...)``.

The shape (target-system.md, "Shapes of the real workspace that a name-matcher misses"): a JSON
config holds an array of entries (``scatterGather.aggregations[]``, each with ``trigger``,
``successEvent``, ...); a service method returns the entry whose key field equals its argument
(``aggregations.find(agg => agg.trigger === trigger)``); a base class reads
``aggregation.successEvent`` of the entry for ``this.triggerType``, a constructor parameter each
concrete subclass fills with its own value through ``super(..., EventType.X, ...)``.

:func:`ConfigLookup.narrow` gives, for a site in such a base class, one binding per concrete
subclass: the entries of the config values the site reads whose key field (the field the lookup's
``find`` predicate compares with its argument, :meth:`ConfigLookup.key_fields`) holds a value the
subclass passes to ``super(...)`` (the entry the lookup chooses for it). When no predicate is known, any
scalar field is tried; a subclass whose value is held in different fields of the entries binds as candidates
(``Bound.candidate``, the reason), since which entry the lookup chooses is not known. A subclass passing no
value any entry holds chooses nothing; a class without concrete subclasses that bind a value
gives ``None`` (the caller keeps the values unnarrowed, as candidates when there are several).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tools.mesh_index.symbols import Decl

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker


@dataclass(frozen=True, slots=True)
class Bound:
    """One subclass's entry: the value read, where, and the path that chose it."""

    sub_path: str
    sub_name: str
    value: str
    cfg_path: str
    key: str
    why: str  # "super(...) of X (file:line) passes 'v' = <entry>.<field>"
    candidate: str = ""  # the reason when which entry is chosen is not known (the lookup's key field unknown)


class ConfigLookup:
    def __init__(self, linker: Linker) -> None:
        self.l = linker
        self.r = linker.r
        self._subs: dict[tuple[str, str], list[tuple[str, str, list[tuple[str | None, str, Any]]]]] | None = None

    def subclasses(self, path: str, cls: str) -> list[tuple[str, str, list[tuple[str | None, str, Any]]]]:
        """Concrete classes of the workspace that extend ``cls`` (directly or not), with their ancestors."""
        if self._subs is None:
            subs: dict[tuple[str, str], list[tuple[str, str, list[tuple[str | None, str, Any]]]]] = {}
            for p, f in self.l.facts.items():
                for name, info in f.get("classes", {}).items():
                    if info.get("abstract") or "extends" not in info:
                        continue
                    chain = self.r.ancestors(p, name)
                    for bp, bn, _bi in chain[1:]:
                        if bp is not None:
                            subs.setdefault((bp, bn), []).append((p, name, chain))
            self._subs = subs
        return self._subs.get((path, cls), [])

    def _super_values(self, chain: list[tuple[str | None, str, Any]], base: tuple[str, str]) -> list[tuple[str, str]]:
        """(value, where) of every string a class of ``chain`` below ``base`` passes to ``super(...)``."""
        out: list[tuple[str, str]] = []
        for p, _n, info in chain:
            if (p, _n) == base or p is None or info is None:
                break
            for arg in info.get("super_args", ()):
                if not isinstance(arg, list) or not arg or arg[0] not in ("s", "r", "x", "c", "t", "+"):
                    continue
                for v in self.r.eval(arg, p):
                    out.append((v.value, f"{p}:{info.get('super_line', info.get('line', 0))}"))
        return out

    def key_fields(self, path: str, cls: str) -> set[str]:
        """The fields the lookups the class calls compare with their argument: ``trigger`` when the class (or a
        base) calls ``this.scatterGather.getAggregation(...)`` and that method returns
        ``aggregations.find((agg) => agg.trigger === trigger)``; empty when no such predicate is known."""
        keys: set[str] = set()
        for p, _n, info in self.r.ancestors(path, cls):
            if p is None or info is None:
                continue
            types = info.get("field_types", {})
            for call in info.get("member_calls", ()):
                if not isinstance(call, list) or len(call) < 2 or call[0] not in types:
                    continue
                decl = self.r.symbol(p, types[call[0]])
                if isinstance(decl, Decl) and decl.kind == "class":
                    cinfo = self.l.facts.get(decl.path, {}).get("classes", {}).get(decl.name, {})
                    keys.update(cinfo.get("finds", {}).get(call[1], ()))
        return keys

    def narrow(self, path: str, symbol: str | None, found: list[tuple[str, str, str]],
               json_rows: list[tuple[str, str, str]]) -> list[Bound] | None:
        """The entries of ``found`` ((value, config file, key) of the config values a site reads) that each concrete
        subclass of the site's class chooses; None when no subclass binds a value any entry holds."""
        cls = (symbol or "").split(".")[0]
        if not cls or not found:
            return None
        scalars: dict[tuple[str, str], dict[str, str]] = {}  # (file, entry) -> field -> value
        entries = {(cfg, key.rsplit(".", 1)[0]) for _v, cfg, key in found if "." in key}
        for p, k, v in json_rows:
            if "." not in k:
                continue
            entry, leaf = k.rsplit(".", 1)
            if (p, entry) in entries:
                scalars.setdefault((p, entry), {})[leaf] = v
        keys = self.key_fields(path, cls)
        out: list[Bound] = []
        for sp, sn, chain in self.subclasses(path, cls):
            passed = self._super_values(chain, (path, cls))
            own: list[tuple[str, str, str, str, str]] = []  # value, cfg, key, field, why
            for value, cfg, key in found:
                if "." not in key:
                    continue
                entry, leaf = key.rsplit(".", 1)
                fields = scalars.get((cfg, entry), {})
                hit = next(((pv, where, f) for pv, where in passed for f, fv in sorted(fields.items())
                            if f != leaf and fv == pv and (not keys or f in keys)), None)
                if hit is not None:
                    pv, where, f = hit
                    own.append((value, cfg, key, f, f"super(...) of {sn} ({where}) passes '{pv}' = {cfg}: {entry}.{f}"))
            used = sorted({f for *_x, f, _w in own})
            reason = "" if keys or len(used) < 2 else (
                f"the field the lookup compares is not known and {sn}'s super(...) value is in several fields "
                f"({', '.join(used)}) of the entries: which entry it chooses is not known, a candidate")
            out.extend(Bound(sp, sn, value, cfg, key, why, reason) for value, cfg, key, _f, why in own)
        return out or None


def dotted_refs(expr: Any) -> list[str]:
    """Dotted names an expression reads: parameters, references, alternatives, and a property of a value the
    extractor kept as text (``aggregation.successEvent`` of a local bound to a call)."""
    if not isinstance(expr, list) or not expr:
        return []
    if expr[0] == "p" and isinstance(expr[1], str):
        return [expr[1]]
    if expr[0] == "r" and isinstance(expr[1], list):
        return [".".join(expr[1])]
    if expr[0] == "|":
        return [r for e in expr[1] for r in dotted_refs(e)]
    if expr[0] == "?" and isinstance(expr[1], str):
        text = expr[1]
        parts = text.split(".")
        if len(parts) >= 2 and all(p.isidentifier() for p in parts):
            return [text]
    return []
