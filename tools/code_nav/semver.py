"""npm semver ranges, enough to say whether a dependency range includes a version.

Supported: exact versions, ``=``, ``<``, ``<=``, ``>``, ``>=``, caret ``^``, tilde ``~``, x-ranges
(``1.x``, ``1.2.*``, ``*``, ``""``), partial versions (``1``, ``1.2``), hyphen ranges (``1.2 - 2``),
intersections (space separated) and unions (``||``), the ``workspace:`` protocol (``workspace:*``,
``workspace:^1.2.0``). Pre-release versions satisfy a comparator only with the same
``major.minor.patch`` (npm's rule). Anything else (dist-tags, URLs, ``file:``, ``git+``) gives
None: unknown, never a guess.
"""

from __future__ import annotations

import re

VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?\s*$")
PARTIAL = re.compile(r"^v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
COMPARATOR = re.compile(r"^(<=|>=|<|>|=|\^|~>?|)\s*(.*)$")

Ver = tuple[int, int, int, tuple[object, ...]]
Comp = tuple[str, Ver]


def parse_version(text: str) -> Ver | None:
    m = VERSION.match(text or "")
    if m is None:
        return None
    pre: tuple[object, ...] = ()
    if m.group(4):
        pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split("."))
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def _key(v: Ver) -> tuple[int, int, int, int, tuple[tuple[int, object], ...]]:
    """Sort key: a release sorts after its pre-releases; numeric identifiers before alphanumeric ones."""
    return (v[0], v[1], v[2], 0 if v[3] else 1,
            tuple((0, p) if isinstance(p, int) else (1, p) for p in v[3]))


def _cmp(a: Ver, b: Ver) -> int:
    ka, kb = _key(a), _key(b)
    return (ka > kb) - (ka < kb)


def _partial(text: str) -> tuple[list[int | None], tuple[object, ...]] | None:
    m = PARTIAL.match(text.strip())
    if m is None:
        return None
    parts: list[int | None] = []
    for g in m.group(1, 2, 3):
        parts.append(None if g is None or g in "xX*" else int(g))
    for i in range(1, 3):  # 1.x.3 -> 1.x.x
        if parts[i - 1] is None:
            parts[i] = None
    pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else ()
    return parts, pre


def _desugar(op: str, text: str) -> list[Comp] | None:
    if text in ("", "*", "x", "X"):
        return [(">=", (0, 0, 0, ()))] if op in ("", "=", ">=", "^", "~") else ([] if op != "<" else None)
    p = _partial(text)
    if p is None:
        return None
    (ma, mi, pa), pre = p
    if ma is None:
        return [(">=", (0, 0, 0, ()))]
    lo: Ver = (ma, mi or 0, pa or 0, pre)
    if op == "^":
        if ma > 0 or mi is None:
            hi: Ver = (ma + 1, 0, 0, (0,))
        elif mi > 0 or pa is None:
            hi = (0, mi + 1, 0, (0,))
        else:
            hi = (0, 0, pa + 1, (0,))
        return [(">=", lo), ("<", hi)]
    if op in ("~", "~>"):
        hi = (ma + 1, 0, 0, (0,)) if mi is None else (ma, mi + 1, 0, (0,))
        return [(">=", lo), ("<", hi)]
    if mi is None or pa is None:  # partial with a plain operator: an x-range
        upper: Ver = (ma + 1, 0, 0, (0,)) if mi is None else (ma, mi + 1, 0, (0,))
        if op in ("", "="):
            return [(">=", lo), ("<", upper)]
        if op == ">":  # npm: >1.2 is >=1.3.0 (no pre-release: 1.3.0-beta is below it)
            return [(">=", (ma + 1, 0, 0, ()) if mi is None else (ma, mi + 1, 0, ()))]
        if op == "<=":
            return [("<", upper)]
        return [(op, lo)]
    return [("=" if op == "" else op, lo)]


def _set(text: str) -> list[Comp] | None:
    text = text.strip()
    hyphen = re.match(r"^(\S+)\s+-\s+(\S+)$", text)
    if hyphen:
        lo = _desugar(">=", hyphen.group(1))
        hi_p = _partial(hyphen.group(2))
        if lo is None or hi_p is None:
            return None
        (ma, mi, pa), pre = hi_p
        if ma is None:
            return lo
        if mi is None:
            return [*lo, ("<", (ma + 1, 0, 0, (0,)))]
        if pa is None:
            return [*lo, ("<", (ma, mi + 1, 0, (0,)))]
        return [*lo, ("<=", (ma, mi, pa, pre))]
    comps: list[Comp] = []
    tokens = re.sub(r"(<=|>=|<|>|=|\^|~>?)\s+", r"\1", text).split()
    for tok in tokens or [""]:
        m = COMPARATOR.match(tok)
        if m is None:
            return None
        got = _desugar(m.group(1), m.group(2))
        if got is None:
            return None
        comps.extend(got)
    return comps


def _test(comp: Comp, v: Ver) -> bool:
    op, bound = comp
    c = _cmp(v, bound)
    return {"=": c == 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]


def satisfies(version: str, spec: str) -> bool | None:
    """Whether ``version`` is in the npm range ``spec`` (None: either cannot be read as semver)."""
    v = parse_version(version)
    if v is None or not isinstance(spec, str):
        return None
    spec = spec.strip()
    if spec.startswith("workspace:"):
        spec = spec[len("workspace:"):]
        if spec in ("*", "^", "~", ""):
            return True
    if spec.startswith("npm:"):
        at = spec.rfind("@")
        spec = spec[at + 1:] if at > 4 else ""
    if re.search(r"[:/#]", spec) or (spec and not re.match(r"^[\s\d<>=^~vxX*|.\-+A-Za-z]*$", spec)):
        return None
    if spec and re.fullmatch(r"[A-Za-z][\w.-]*", spec) and spec not in ("x", "X") and not re.match(r"v\d", spec):
        return None  # a dist-tag: latest, next, beta
    for part in spec.split("||"):
        comps = _set(part)
        if comps is None:
            return None
        if all(_test(c, v) for c in comps):
            if v[3] and not any(c[1][3] and c[1][:3] == v[:3] for c in comps):
                continue  # a pre-release needs a comparator of the same version with a pre-release
            return True
    return False
