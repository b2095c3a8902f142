"""Name forms and substitution: a sibling's names (member, class, file, variable) turned into the new one's.

Everything here is text: the planner decides *which* names a sibling flow uses (from the
index: its member, handler class, worker variable, payload interface, queue member), and
:class:`Renamer` rewrites copied code on identifier boundaries only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MEMBER_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")


def words(member: str) -> list[str]:
    return [w for w in member.lower().split("_") if w]


def pascal(member: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in words(member))


def camel(member: str) -> str:
    p = pascal(member)
    return p[:1].lower() + p[1:]


def kebab(member: str) -> str:
    return "-".join(words(member))


def snake(member: str) -> str:
    return "_".join(words(member))


VALUE_FORMS = {
    "snake": lambda m: "_".join(words(m)),
    "kebab": lambda m: "-".join(words(m)),
    "dotted": lambda m: ".".join(words(m)),
    "upper": lambda m: m,
    "camel": camel,
}


@dataclass
class ValueConvention:
    """How a domain spells the values of its members: ``prefix + separator + form(member)``."""

    prefix: str
    separator: str
    form: str
    seen: list[str] = field(default_factory=list)  # the sibling values it was read from
    suffix: str = ""  # a value written `form(member) + suffix` (queues: `calendar-queue`)

    def value_for(self, member: str) -> str:
        body = VALUE_FORMS[self.form](member)
        if self.suffix:
            return body + self.suffix
        return f"{self.prefix}{self.separator}{body}" if self.prefix else body

    def describe(self) -> str:
        if self.suffix:
            return f"{self.form} member, suffix '{self.suffix}'"
        if not self.prefix:
            return f"{self.form} member, no prefix"
        return f"prefix '{self.prefix}', separator '{self.separator}', {self.form} member"


def value_convention(members: list[tuple[str, str]]) -> ValueConvention | None:
    """The convention most (member, value) pairs follow, or None when none is seen."""
    votes: dict[tuple[str, str, str], list[str]] = {}
    for member, value in members:
        for form, fn in VALUE_FORMS.items():
            tail = fn(member)
            if value == tail:
                votes.setdefault(("", "", form), []).append(value)
                continue
            if value.endswith(tail) and len(value) > len(tail):
                head = value[: -len(tail)]
                sep = head[-1]
                if not sep.isalnum():
                    votes.setdefault((head[:-1], sep, form), []).append(value)
            elif value.startswith(tail) and len(value) > len(tail) and not value[len(tail)].isalnum():
                votes.setdefault(("+" + value[len(tail) :], "", form), []).append(value)
    if not votes:
        return None
    joiner = {"snake": "_", "kebab": "-", "dotted": ".", "upper": "_", "camel": ""}

    def rank(kv: tuple[tuple[str, str, str], list[str]]) -> tuple[int, bool, int]:
        (pre, _sep, form), seen = kv
        tails = [v[len(pre) + 1 :] if pre and not pre.startswith("+") else v for v in seen]
        return (len(seen), pre != "", sum(joiner[form] in t for t in tails) if joiner[form] else 0)

    (prefix, sep, form), seen = max(votes.items(), key=rank)
    if prefix.startswith("+"):
        return ValueConvention("", "", form, seen, suffix=prefix[1:])
    return ValueConvention(prefix, sep, form, seen)


_IDENT_EDGE = r"(?<![A-Za-z0-9_$]){}(?![A-Za-z0-9_$])"


class Renamer:
    """Replace whole identifiers (and path segments, quoted values) of a sibling by the new names."""

    def __init__(self, pairs: dict[str, str]):
        self.pairs = {k: v for k, v in pairs.items() if k and k != v}
        keys = sorted(self.pairs, key=len, reverse=True)
        self._re = re.compile("|".join(_IDENT_EDGE.format(re.escape(k)) for k in keys)) if keys else None

    def __call__(self, text: str) -> str:
        if self._re is None:
            return text
        return self._re.sub(lambda m: self.pairs[m.group(0)], text)


def member_forms(old: str, new: str) -> dict[str, str]:
    """The usual spellings of a member name in code: UPPER, Pascal, camel, kebab, snake."""
    return {old: new, pascal(old): pascal(new), camel(old): camel(new), kebab(old): kebab(new), snake(old): snake(new)}


def renamed_identifier(name: str, old_member: str, new_member: str, fallback_suffix: str = "") -> str:
    """``name`` with the old member's Pascal/camel form replaced; else ``new``'s form plus a suffix."""
    for form in (pascal, camel):
        if form(old_member) in name:
            return name.replace(form(old_member), form(new_member))
    base = pascal(new_member) if name[:1].isupper() else camel(new_member)
    return base + fallback_suffix


def suffix_word(name: str) -> str:
    """The last CamelCase word of a name (``GeocodeEventHandler`` -> ``Handler``)."""
    parts = re.findall(r"[A-Z][a-z0-9]*", name)
    return parts[-1] if parts else ""


_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def derived_pairs(text: str, old_member: str, new_member: str, protected: set[str]) -> dict[str, str]:
    """Identifiers of ``text`` spelled after the old member (``ShipOrderHandler``, ``shipOrderJob``), renamed.

    A form counts only on CamelCase word edges; ``protected`` names (imported from packages) never change.
    """
    out: dict[str, str] = {}
    forms = [(pascal(old_member), pascal(new_member)), (camel(old_member), camel(new_member))]
    for ident in set(_IDENT.findall(text)):
        if ident in protected:
            continue
        for old, new in forms:
            idx = ident.find(old)
            if idx < 0:
                continue
            end = idx + len(old)
            left_ok = idx == 0 or ident[idx - 1].islower() or ident[idx - 1].isdigit() or ident[idx - 1] == "_"
            right_ok = end == len(ident) or not (ident[end].islower() or ident[end].isdigit())
            if left_ok and right_ok:
                out[ident] = ident[:idx] + new + ident[end:]
                break
        else:
            s_old, s_new = snake(old_member), snake(new_member)
            if ident != s_old and re.search(rf"(?:^|_){re.escape(s_old)}(?:_|$)", ident):
                out[ident] = re.sub(rf"(^|_){re.escape(s_old)}(_|$)", rf"\g<1>{s_new}\g<2>", ident, count=1)
    return out
