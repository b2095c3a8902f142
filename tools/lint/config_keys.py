"""config-key-unread (heuristic): keys of a package's JSON configuration that no source file names.

A key is flagged only when it sits in an object (not at the top level) at least one of whose
other keys is read key by key in the workspace's production sources (``parent.key``,
``parent?.key``, ``parent['key']``, or ``'...parent.key'`` in a string) and its own name
appears in none of them (as an identifier, a property or a word of a string such as
``'postProcessor.maxRetries'``). A key read through a computed name, or by a library outside
the workspace, is not seen: the finding says so.

The sources are scanned once, whatever the number of keys: one pass collects every
``name.member`` / ``name['member']`` pair (:func:`member_reads`), and each key is then a set
lookup. (The check used to run one regular expression per key over all sources joined: its
time grew with keys x source size.)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from server import workspace_files
from tools.lint.context import LintContext
from tools.lint.model import Evidence, Finding

_WORD = re.compile(r"[A-Za-z_$][\w$]*")
MAX_CONFIG_BYTES = 1_000_000


def config_files(ctx: LintContext) -> list[str]:
    wanted = set(ctx.lint.config_dirs)
    skip = set(ctx.static.skip_dirs)
    out = []
    for dirpath, dirnames, filenames in os.walk(ctx.workspace):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        if Path(dirpath).name in wanted:
            rel_dir = Path(dirpath).relative_to(ctx.workspace).as_posix()
            out.extend(f"{rel_dir}/{n}" for n in sorted(filenames) if n.endswith(".json"))
    return [f for f in out if not ctx.is_test(f)]


def _line_of_key(lines: list[str], key: str, start: int) -> int:
    needle = f'"{key}"'
    for i in range(start, len(lines)):
        if needle in lines[i]:
            return i + 1
    return 1


# ``parent.key`` / ``parent?.key`` (the member's run of word characters and dashes, so a dashed key
# named in a string such as 'parent.max-retries' counts), each name of a chain ``a.b.c`` paired with
# the next one; ``parent['key']`` with any quote. The dotted reads are found from their dots: a
# scan for ``.member`` (few places in a text) and a step back over the parent's name, rather than
# an expression tried at the start of every word.
_DOT_MEMBER = re.compile(r"\.\s*+([\w$-]+)")
_INDEX_KEY = re.compile(r"\[\s*['\"`]([^'\"`\n]+)['\"`]\s*\]")


_ASCII_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _name_before(text: str, end: int) -> str:
    """The name that ends at ``end`` in ``text``, whitespace before ``end`` skipped ('' when none);
    a name is a run of word characters (``\\w``: letters and digits of any script, ``_``)."""
    while end and text[end - 1].isspace():
        end -= 1
    start = end
    while start:
        ch = text[start - 1]
        if ch in _ASCII_NAME or (ch > "\x7f" and ch.isalnum()):
            start -= 1
        else:
            break
    return text[start:end]


def dotted_reads(text: str) -> Iterable[tuple[str, str]]:
    """``(parent, member)`` of every ``parent.member`` / ``parent ?. member`` in ``text``."""
    for m in _DOT_MEMBER.finditer(text):
        end = m.start()
        if end and text[end - 1] == "?":
            end -= 1
        parent = _name_before(text, end)
        if parent:
            yield parent, m.group(1)


def indexed_reads(text: str) -> Iterable[tuple[str, str]]:
    """``(parent, key)`` of every ``parent['key']`` (any quote) in ``text``."""
    for m in _INDEX_KEY.finditer(text):
        parent = _name_before(text, m.start())
        if parent:
            yield parent, m.group(1)


def member_reads(texts: Iterable[str]) -> set[tuple[str, str]]:
    """Every ``(parent, key)`` read key by key in ``texts``: one pass per text."""
    pairs: set[tuple[str, str]] = set()
    for text in texts:
        for parent, member in dotted_reads(text):
            pairs.add((parent, member))
            # 'parent.max-retries' names max-retries, code 'parent.key-1' reads key: both count
            head = member.split("-", 1)[0]
            if head != member:
                pairs.add((parent, head))
        pairs.update(indexed_reads(text))
    return pairs


def _walk(obj: dict[str, Any], path: list[str], words: set[str], reads: set[tuple[str, str]], lines: list[str],
          found: list[tuple[str, int, list[str]]], cursor: list[int]) -> None:
    parent = path[-1] if path else ""
    read = [k for k in obj if parent and (parent, k) in reads]
    for key, value in obj.items():
        line = _line_of_key(lines, key, cursor[0])
        cursor[0] = max(cursor[0], line - 1)
        if read and key not in words:
            found.append((".".join([*path, key]), line, read))
        if isinstance(value, dict) and key in words:
            _walk(value, [*path, key], words, reads, lines, found, cursor)


def check(ctx: LintContext) -> list[Finding]:
    files = config_files(ctx)
    if not files:
        return []
    words: set[str] = set()
    for rel in ctx.production_files:
        words.update(_WORD.findall(ctx.text(rel)))
    reads = member_reads(ctx.text(rel) for rel in ctx.production_files)
    findings = []
    for rel in files:
        try:
            text = workspace_files.read_text(ctx.workspace, rel, MAX_CONFIG_BYTES)
            data = json.loads(text)
        except workspace_files.FileTooLarge:
            continue
        except (OSError, ValueError, RecursionError):
            ctx.notes.append(f"{rel}: not readable as JSON, its keys were not checked")
            continue
        if not isinstance(data, dict):
            continue
        found: list[tuple[str, int, list[str]]] = []
        _walk(data, [], words, reads, text.splitlines(), found, [0])
        for dotted, line, siblings in found:
            findings.append(Finding(
                code="config-key-unread", severity="warning", file=rel, line=line, heuristic=True,
                message=f"configuration key '{dotted}' is named by no source file of the workspace while its "
                        f"sibling(s) {', '.join(siblings[:4])} are read key by key (heuristic: a computed key or a "
                        "library reading it is not seen)",
                fix=f"remove '{dotted}' or read it where {siblings[0]} is read (check the spelling)",
                evidence=[Evidence(file=rel, line=line, note=f"'{dotted}' is set here"),
                          Evidence(file=rel, line=0, note=f"searched {len(ctx.production_files)} production "
                                                          "source file(s) for the name")],
                subject=f"config:{rel}:{dotted}",
            ))
    return findings
