"""Names in a runbook's code that nothing declares: tables, streams, types, classes, identifiers, paths.

Each candidate must have the *shape* of its kind and be absent from every place that kind is
declared (:class:`~tools.skills.vocabulary.Vocabulary`); anything else is left alone. A
suggestion is the closest declared name of the same kind.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tools.skills.paths import last_literal, matches_any, normalise
from tools.skills.spans import Span
from tools.skills.vocabulary import SQL_TABLE, Vocabulary

SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
CAMEL = re.compile(r"^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+$")
PASCAL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
QUALIFIED = re.compile(r"^([A-Z][A-Za-z0-9]+)\.([A-Z][A-Z0-9_]+)$")
TYPE_VALUE = re.compile(r"^[a-z][a-z0-9_-]*(?:[.:][a-z0-9_-]+)+$")
KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)+$")
PATH = re.compile(r"^[\w.@*<>{}-]+(?:/[\w.@*<>{}-]+)+/?$")
SQL_START = re.compile(r"^\s*(SELECT|UPDATE|INSERT|DELETE|WITH|ALTER|CREATE)\b", re.IGNORECASE)
ELLIPSIS = re.compile(r"\.\.\.|\u2026")
CALL = re.compile(r"^(?:this\.)?(?:[a-z]\w*\.)*([a-z]\w*)\(\)?$")

FILE_EXTENSIONS = {
    "ts", "tsx", "js", "mjs", "cjs", "json", "md", "sql", "yml", "yaml", "toml", "py", "sh", "lock", "env", "txt",
}
SQL_WORDS = {
    "select", "set", "where", "values", "returning", "now", "only", "lateral", "unnest", "exists", "not", "conflict",
    "new", "old", "each", "row", "statement", "table", "update", "delete", "insert", "into", "from", "join",
}
CLASS_SUFFIXES = (
    "Service", "PostProcessor", "Processor", "Handler", "Worker", "Entity", "Module", "Controller", "Repository",
    "Consumer", "Dispatcher", "Helper", "Runner", "Gateway", "Factory", "Provider", "Client", "Interface",
)


@dataclass(frozen=True)
class Stale:
    """A name the code does not declare."""

    kind: str
    name: str
    line: int
    suggestion: str | None
    severity: str = "warning"


def closest(name: str, pool: Iterable[str]) -> str | None:
    """The declared name nearest to ``name`` (same first word wins a tie), or None if none is near."""
    head = re.split(r"[_.:\-/]|(?<=[a-z])(?=[A-Z])", name, maxsplit=1)[0].lower()
    best, best_score = None, 0.0
    for candidate in pool:
        if candidate == name or abs(len(candidate) - len(name)) > max(6, len(name)):
            continue
        matcher = difflib.SequenceMatcher(None, name, candidate)
        if matcher.real_quick_ratio() < 0.55 or matcher.quick_ratio() < 0.55:
            continue
        score = matcher.ratio()
        if re.split(r"[_.:\-/]|(?<=[a-z])(?=[A-Z])", candidate, maxsplit=1)[0].lower() == head:
            score += 0.1
        if score > best_score or (score == best_score and best is not None and candidate < best):
            best, best_score = candidate, score
    return best if best_score >= 0.6 else None


class NameChecker:
    """Checks the spans of one skill against a vocabulary (pools of each kind built once)."""

    def __init__(self, vocab: Vocabulary, *, stream_prefix: str, dlq_suffix: str, known_tables: Iterable[str]) -> None:
        self.vocab = vocab
        self.stream_prefix = stream_prefix
        self.dlq_suffix = dlq_suffix
        self.tables = set(vocab.tables) | set(known_tables)
        self.vocab.add_names(known_tables)
        self._type_prefixes = {m.group(0) for s in vocab.strings if TYPE_VALUE.match(s)
                               for m in [re.match(r"^[a-z0-9_-]+[.:]", s)] if m}
        self._type_pool = [s for s in vocab.strings if TYPE_VALUE.match(s)]
        self._kebab_tails = {s.rsplit("-", 1)[1] for s in vocab.strings if KEBAB.match(s)}
        self._paths = vocab.files | vocab.dirs
        self._basenames: dict[str, list[str]] = {}
        self._stems: set[str] = set()
        for path in self._paths:
            base = path.rsplit("/", 1)[-1]
            self._basenames.setdefault(base, []).append(path)
            stem = base.split(".", 1)[0]
            if stem and stem != base:
                self._stems.add(stem)

    # -- kinds --------------------------------------------------------------------------------

    def check(self, span: Span) -> Iterator[Stale]:
        text = span.text
        if span.lang == "sql" or SQL_START.match(text):
            yield from self._sql(span)
            return
        if span.lang is not None or " " in text or "://" in text or "$" in text or ELLIPSIS.search(text):
            return  # prose-like, a URL, a shell variable, or cut short ('stream:ms-user...'): not one name
        text = text.rstrip(",;")
        if PATH.match(text) and ":" not in text:
            yield from self._path(text, span.line)
        elif text.startswith(self.stream_prefix) and "<" not in text and "{" not in text and "*" not in text:
            yield from self._stream(text, span.line)
        elif SNAKE.match(text):
            if not self.vocab.knows(text):
                suggestion = closest(text, self.tables) or closest(text, self._snake_words())
                severity = "error" if suggestion in self.tables else "warning"
                yield Stale("table or identifier", text, span.line, suggestion, severity)
        elif QUALIFIED.match(text):
            owner, member = QUALIFIED.match(text).groups()  # type: ignore[union-attr]
            for part in (owner, member):
                if part not in self.vocab.words:
                    yield Stale("code identifier", text, span.line, closest(part, self._pascal_words()))
                    break
        elif PASCAL.match(text) and text.endswith(CLASS_SUFFIXES):
            if text not in self.vocab.words:
                yield Stale("class", text, span.line, closest(text, self._pascal_words()))
        elif CAMEL.match(text) or CALL.match(text):
            name = CALL.match(text).group(1) if CALL.match(text) else text  # type: ignore[union-attr]
            if CAMEL.match(name) and name not in self.vocab.words:
                # flagged only as a rename or typo of a declared one: a method or option unlike anything
                # in the code may be a library's (node_modules is not read)
                suggestion = closest(name, self._camel_words())
                if suggestion is not None:
                    yield Stale("code identifier", text, span.line, suggestion)
        elif TYPE_VALUE.match(text):
            yield from self._type_value(text, span.line)
        elif KEBAB.match(text) and text.rsplit("-", 1)[1] in self._kebab_tails and not self._known_kebab(text):
            pool = [s for s in self.vocab.strings if KEBAB.match(s)]
            yield Stale("queue or name", text, span.line, closest(text, pool))

    def _known_kebab(self, text: str) -> bool:
        return (self.vocab.knows(text) or text in self._basenames or text in self._stems
                or text in self.vocab.scripts)

    def _sql(self, span: Span) -> Iterator[Stale]:
        for match in SQL_TABLE.finditer(span.text):
            name = match.group(1)
            if name.lower() in SQL_WORDS or not re.search(r"[a-z]", name) or "<" in span.text[match.end():][:1]:
                continue
            if name not in self.tables and not self.vocab.knows(name):
                yield Stale("table", name, span.line, closest(name, self.tables), "error")

    def _stream(self, text: str, line: int) -> Iterator[Stale]:
        base = text.removesuffix(self.dlq_suffix)
        target = base[len(self.stream_prefix):]
        if self.vocab.knows(text) or self.vocab.knows(base) or not target or self.vocab.knows(target):
            return
        pool = [s for s in self.vocab.strings if s.startswith(self.stream_prefix)]
        yield Stale("stream", text, line, closest(base, pool) or closest(target, self.vocab.strings))

    def _type_value(self, text: str, line: int) -> Iterator[Stale]:
        last = re.split(r"[.:]", text)[-1]
        if last in FILE_EXTENSIONS or self.vocab.knows(text) or text in self._basenames:
            return
        prefix = re.match(r"^[a-z0-9_-]+[.:]", text)
        if prefix is None or prefix.group(0) not in self._type_prefixes:
            return  # not the shape of any declared type value
        parts = re.split(r"[.:]", text)
        if all(part in self.vocab.words for part in parts):
            return  # a property path such as job.data.payload
        yield Stale("job or event type", text, line, closest(text, self._type_pool))

    def _path(self, text: str, line: int) -> Iterator[Stale]:
        last = text.rstrip("/").rsplit("/", 1)[-1]
        if not re.search(r"[a-z]", text):
            return
        if "." not in last and text.count("/") < 2 and not text.endswith("/"):
            return  # 'job/event' in prose, not a path
        if self.find_path(text) is None:
            yield Stale("path", text, line, self.moved_to(text))

    # -- lookups ------------------------------------------------------------------------------

    def find_path(self, pattern: str) -> str | None:
        """A workspace path matched by ``pattern``, as written or relative to any repository."""
        norm = normalise(pattern)
        hit = matches_any(norm, self._paths)
        if hit is None and not norm.startswith(("*", "/")):
            hit = matches_any(f"**/{norm}", self._paths)  # relative to a repository, or to its src/
        return hit

    def moved_to(self, pattern: str) -> str | None:
        """Where a path that moved may now be: folders or files with its last literal name."""
        name = last_literal(pattern)
        if not name:
            return None
        candidates = sorted(self._basenames.get(name, []), key=len)
        if candidates:
            return candidates[0]
        return closest(pattern.rstrip("/*"), self._paths) if len(self._paths) < 20_000 else None

    def _snake_words(self) -> list[str]:
        return [w for w in self.vocab.words if "_" in w and w.islower()]

    def _pascal_words(self) -> list[str]:
        return [w for w in self.vocab.words if w[:1].isupper() and not w.isupper()]

    def _camel_words(self) -> list[str]:
        return [w for w in self.vocab.words if CAMEL.match(w)]
