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
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from resources.workspace_skills import is_racy
from server import workspace_files

SOURCE_EXTENSIONS = (
    ".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs", ".sql", ".json", ".yml", ".yaml", ".toml",
    ".py", ".sh", ".env", ".graphql", ".proto",
)
MAX_FILES = 40_000
MAX_FILE_BYTES = 2_000_000
MAX_TOTAL_BYTES = 400_000_000

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STRING = re.compile(r"""'([^'\\\n]{1,200})'|"([^"\\\n]{1,200})"|`([^`\\]{1,200})`""")
SQL_TABLE = re.compile(  # the lookahead skips positions no keyword starts at (40% faster, same matches)
    r"(?=[CcAaIiUuDdFfJjRrOo])\b(?:CREATE\s+(?:UNLOGGED\s+)?TABLE(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE(?:\s+ONLY)?|INSERT\s+INTO|"
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
    dir_mtimes: dict[str, int] = field(default_factory=dict)
    """Every folder walked (``""`` = the root) -> its mtime before it was listed."""
    file_stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Every source file read -> (size, mtime_ns) before it was read."""
    racy: bool = False
    """Something changed less than two seconds before the walk: its mtimes prove nothing yet."""

    def unchanged(self, root: Path) -> bool:
        """Whether the tree still holds what was read: no folder gained, lost or renamed an entry (its
        mtime) and no file read was edited (size, mtime). One ``stat`` per folder and file, no reads."""
        base = str(root)
        for rel_dir, mtime in self.dir_mtimes.items():
            try:
                if os.stat(f"{base}/{rel_dir}" if rel_dir else base).st_mtime_ns != mtime:
                    return False
            except OSError:
                return False
        return all(_stat(f"{base}/{rel}") == stat for rel, stat in self.file_stats.items())

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
    except (ValueError, RecursionError):  # nested deeper than the parser's recursion limit
        return
    if not isinstance(data, dict):
        return
    owner = str(data.get("name") or (os.path.dirname(rel) or "."))
    scripts = data.get("scripts")
    if isinstance(scripts, dict):
        for script in scripts:
            vocab.scripts.setdefault(str(script), set()).update({owner, os.path.dirname(rel) or "."})


def _read_file(vocab: Vocabulary, root: str, rel: str, name: str) -> int:
    """Add one source file's names; the characters read (0 when skipped: over the cap, not a regular
    file, a symlink leaving the workspace; see :mod:`server.workspace_files`)."""
    try:
        text = workspace_files.read_text(root, rel, MAX_FILE_BYTES)
    except OSError:
        return 0
    vocab.words.update(WORD.findall(text))
    for match in STRING.finditer(text):
        vocab.strings.add(next(g for g in match.groups() if g is not None))
    if name.endswith((".sql", ".ts", ".js", ".py")):
        vocab.tables.update(_tables_in(text))
    if name == "package.json":
        _read_package(vocab, rel, text)
    elif name == "Makefile":
        vocab.make_targets.update(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.MULTILINE))
    return len(text)


def _stat(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return -1, -1
    return st.st_size, st.st_mtime_ns


def build_vocabulary(root: Path, skip_dirs: Iterable[str] = (), *, max_files: int = MAX_FILES) -> Vocabulary:
    """Walk ``root`` once and collect its declared names (bounded; ``truncated`` says when cut).

    It also keeps what :meth:`Vocabulary.unchanged` needs: each folder's mtime read before it
    was listed, and the (size, mtime) of each source file read before it was read.
    """
    vocab = Vocabulary()
    skip = set(skip_dirs)
    started = time.time_ns()
    seen = 0
    total = 0
    base = str(root)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        dirpath = f"{base}/{rel_dir}" if rel_dir else base
        try:
            mtime = os.stat(dirpath).st_mtime_ns
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        vocab.dir_mtimes[rel_dir] = mtime
        dirnames = []
        filenames = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in skip:
                        dirnames.append(entry.name)
                elif not entry.is_symlink() or entry.is_file():
                    filenames.append(entry.name)
            except OSError:
                continue
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
            path = f"{dirpath}/{name}"
            vocab.file_stats[rel] = _stat(path)
            read = _read_file(vocab, base, rel, name)
            if read:
                seen += 1
                total += read
        stack.extend(f"{rel_dir}/{d}" if rel_dir else d for d in reversed(dirnames))
    vocab.racy = is_racy([*vocab.dir_mtimes.values(), *(m for _s, m in vocab.file_stats.values())], started)
    return vocab
