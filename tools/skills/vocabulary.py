"""Everything a skill may name, read from the code: the places each kind of name is declared.

:func:`build_vocabulary` walks a tree once (bounded, skipping the index's folders) and keeps:

- ``words``: every identifier of the source, SQL, JSON and YAML files (``jobs_outbox``,
  ``JobOutboxFailedPostProcessor``, ``claimMinIdleTimeMs``);
- ``strings``: the contents of every short string literal (``'events.geocode_event'``,
  ``"stream:event"``);
- ``tables``: names after ``CREATE TABLE`` / ``ALTER TABLE`` / ``INSERT INTO`` / ``UPDATE`` /
  ``FROM`` / ``JOIN`` in SQL (``.sql`` files and query strings), plus the configured table names;
- ``files`` and ``dirs``: every path (for ``paths`` globs and paths named in a runbook);
- ``scripts``: package.json script names, with the package names that define them; and the
  Makefile targets.

A name is "absent" only when it is in none of these: the checks flag nothing that appears
anywhere in the code.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_EXTENSIONS = (
    ".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs", ".sql", ".json", ".yml", ".yaml", ".toml",
    ".py", ".sh", ".env", ".graphql", ".proto",
)
MAX_FILES = 40_000
MAX_FILE_BYTES = 2_000_000
MAX_TOTAL_BYTES = 400_000_000

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STRING = re.compile(r"""'([^'\\\n]{1,200})'|"([^"\\\n]{1,200})"|`([^`\\]{1,200})`""")
SQL_TABLE = re.compile(
    r"\b(?:CREATE\s+(?:UNLOGGED\s+)?TABLE(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE(?:\s+ONLY)?|INSERT\s+INTO|"
    r"UPDATE|DELETE\s+FROM|FROM|JOIN|RENAME\s+TO|ON)\s+(?:ONLY\s+)?(?:\"?[A-Za-z_]\w*\"?\.)?\"?([A-Za-z_]\w*)\"?",
    re.IGNORECASE,
)


@dataclass
class Vocabulary:
    """The names declared in a tree (see the module docstring)."""

    words: set[str] = field(default_factory=set)
    strings: set[str] = field(default_factory=set)
    tables: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    scripts: dict[str, set[str]] = field(default_factory=dict)
    """script name -> names (or folders) of the packages defining it."""
    make_targets: set[str] = field(default_factory=set)
    top_dirs: set[str] = field(default_factory=set)
    truncated: bool = False

    def knows(self, name: str) -> bool:
        """Whether ``name`` appears as an identifier, a string value or a table anywhere."""
        return name in self.words or name in self.strings or name in self.tables

    def add_names(self, names: Iterable[str]) -> None:
        """Names declared elsewhere than in files (config conventions, the CLI's commands)."""
        for name in names:
            self.strings.add(name)
            self.words.update(WORD.findall(name))


def _tables_in(text: str) -> Iterable[str]:
    for match in SQL_TABLE.finditer(text):
        yield match.group(1)


def _read_package(vocab: Vocabulary, rel: str, text: str) -> None:
    try:
        data = json.loads(text)
    except ValueError:
        return
    if not isinstance(data, dict):
        return
    owner = str(data.get("name") or (os.path.dirname(rel) or "."))
    scripts = data.get("scripts")
    if isinstance(scripts, dict):
        for script in scripts:
            vocab.scripts.setdefault(str(script), set()).update({owner, os.path.dirname(rel) or "."})


def build_vocabulary(root: Path, skip_dirs: Iterable[str] = (), *, max_files: int = MAX_FILES) -> Vocabulary:
    """Walk ``root`` once and collect its declared names (bounded; ``truncated`` says when cut)."""
    vocab = Vocabulary()
    skip = set(skip_dirs)
    seen = 0
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not os.path.islink(os.path.join(dirpath, d)))
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        if rel_dir:
            vocab.dirs.add(rel_dir)
        else:
            vocab.top_dirs.update(dirnames)
        for name in filenames:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            vocab.files.add(rel)
            if not (name.endswith(SOURCE_EXTENSIONS) or name in ("Makefile", "Dockerfile")):
                continue
            if seen >= max_files or total >= MAX_TOTAL_BYTES:
                vocab.truncated = True
                continue
            path = os.path.join(dirpath, name)
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            seen += 1
            total += len(text)
            vocab.words.update(WORD.findall(text))
            for match in STRING.finditer(text):
                vocab.strings.add(next(g for g in match.groups() if g is not None))
            if name.endswith((".sql", ".ts", ".js", ".py")):
                vocab.tables.update(_tables_in(text))
            if name == "package.json":
                _read_package(vocab, rel, text)
            elif name == "Makefile":
                vocab.make_targets.update(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.MULTILINE))
    return vocab
