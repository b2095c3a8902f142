"""String constants named in decorators and ``getService`` calls, resolved through imports and barrels.

``@GrpcMethod(EVENT_SERVICE_NAME, 'CreateEvent')`` and ``getService<EventServiceClient>(EVENT_SERVICE_NAME)``
(the constants ts-proto generates) name a ``const X = 'EventService'`` declared in this file or
imported from another, possibly through ``export *`` barrels and package names: followed with the
index's own module resolution, a few files deep. An enum member (``Services.EVENT``) is looked up
in the enum's declaration. Anything else stays unresolved (None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tools.mesh_index.workspace import Layout

MAX_HOPS = 8


def arg_value(arg: Any, facts: dict[str, dict[str, Any]], layout: Layout, rel: str) -> str | None:
    """A fact argument's string: a literal as is, ``["ref", name]`` resolved from ``rel``, else None."""
    if isinstance(arg, str):
        return arg
    if isinstance(arg, list) and len(arg) == 2 and arg[0] == "ref" and isinstance(arg[1], str):
        head, _dot, member = arg[1].partition(".")
        return _lookup(facts, layout, rel, head, member or None, 0)
    return None


def _literal(f: dict[str, Any], name: str, member: str | None) -> str | None:
    if member is None:
        const = f.get("consts", {}).get(name)
        if const and isinstance(const[1], list) and const[1][:1] == ["s"]:
            return const[1][1]
        return None
    enum = f.get("enums", {}).get(name)
    for key, expr, _line in enum[1] if enum else ():
        if key == member and isinstance(expr, list) and expr[:1] == ["s"]:
            return expr[1]
    obj = f.get("objects", {}).get(name)
    for entry in obj[1] if obj else ():
        if isinstance(entry, list) and len(entry) >= 3 and entry[0] == "k" and entry[1] == member \
                and isinstance(entry[2], list) and entry[2][:1] == ["s"]:
            return entry[2][1]
    return None


def _lookup(facts: dict[str, dict[str, Any]], layout: Layout, rel: str, name: str, member: str | None,
            hops: int) -> str | None:
    f = facts.get(rel)
    if f is None or hops > MAX_HOPS:
        return None
    found = _literal(f, name, member)
    if found is not None:
        return found
    for local, imported, spec in f.get("imports", ()):
        if local == name and imported not in ("*", "default"):
            src = layout.resolve(rel, spec)
            if src is not None:
                return _exported(facts, layout, src, imported, member, hops + 1)
    return None


def _exported(facts: dict[str, dict[str, Any]], layout: Layout, rel: str, name: str, member: str | None,
              hops: int) -> str | None:
    f = facts.get(rel)
    if f is None or hops > MAX_HOPS:
        return None
    found = _literal(f, name, member)
    if found is not None:
        return found
    for exp, imported, spec in f.get("reexports", ()):
        if exp == name:
            src = layout.resolve(rel, spec)
            return _exported(facts, layout, src, imported, member, hops + 1) if src else None
    for spec in f.get("stars", ()):
        src = layout.resolve(rel, spec)
        if src is not None:
            found = _exported(facts, layout, src, name, member, hops + 1)
            if found is not None:
                return found
    return _lookup(facts, layout, rel, name, member, hops + 1)  # imported, then exported by name
