"""``search_docs``: the workspace's Markdown (docs folders, READMEs, skills, runbooks) split into sections
at its headings and ranked by BM25 against the query (heading words count twice).

Bounded: at most :data:`MAX_FILES` files of :data:`MAX_FILE_BYTES` each, :data:`MAX_TOTAL_BYTES` in
all (the answer says when a bound was hit). The sections' text is workspace text: returned as
quoted data, with control characters removed, never as instructions.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING

from server.errors import InvalidArgument
from tools.code_nav.files import clean, read_text, walk
from tools.code_nav.model import DocSection, DocsResult

if TYPE_CHECKING:
    from pathlib import Path

MAX_FILES = 3000
MAX_FILE_BYTES = 512 * 1024
MAX_TOTAL_BYTES = 48 * 1024 * 1024
MAX_SECTION_CHARS = 4000
WORD = re.compile(r"[A-Za-z0-9]+")
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
K1, B = 1.2, 0.75


def tokens(text: str) -> list[str]:
    out = []
    for w in WORD.findall(text):
        low = w.lower()
        out.append(low)
        parts = CAMEL.split(w)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


def sections(rel: str, text: str) -> list[tuple[str, int, str]]:
    """(heading, line, body) of each section of a Markdown file (headings inside code fences ignored)."""
    out: list[tuple[str, int, str]] = []
    heading, start, body = rel, 1, []
    fence = False
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        m = HEADING.match(line) if not fence else None
        if m:
            if any(b.strip() for b in body) or heading != rel:
                out.append((heading, start, "\n".join(body).strip()))
            heading, start, body = m.group(2), i, []
        else:
            body.append(line)
    if any(b.strip() for b in body) or heading != rel:
        out.append((heading, start, "\n".join(body).strip()))
    return out


def search_docs(workspace: Path, skip_dirs: tuple[str, ...] | list[str], query: str,
                max_sections: int = 3) -> DocsResult:
    q = (query or "").strip()
    if not q or len(q) > 500:
        raise InvalidArgument("query must be 1-500 characters: words to look for in the workspace's docs")
    if not 1 <= max_sections <= 20:
        raise InvalidArgument(f"max_sections must be 1-20 (got {max_sections})")
    q_terms = list(dict.fromkeys(tokens(q)))
    if not q_terms:
        raise InvalidArgument(f"query {q!r} holds no word to search for")
    found = walk(workspace, (".md", ".mdx"), skip_dirs, max_files=MAX_FILES)
    notes: list[str] = []
    docs: list[tuple[str, int, str, str, Counter[str], int]] = []
    total = 0
    for rel in found.files:
        text = read_text(workspace, rel, MAX_FILE_BYTES)
        if text is None:
            continue
        total += len(text)
        if total > MAX_TOTAL_BYTES:
            notes.append(f"stopped reading after {MAX_TOTAL_BYTES // 2**20} MB of Markdown")
            break
        for heading, line, body in sections(rel, text):
            toks = tokens(heading) * 2 + tokens(body)
            docs.append((rel, line, heading, body, Counter(toks), len(toks)))
    if found.truncated:
        notes.append(f"only the first {MAX_FILES} Markdown files were searched")
    n = len(docs)
    avg = sum(d[5] for d in docs) / n if n else 0.0
    df = {t: sum(1 for d in docs if t in d[4]) for t in q_terms}
    scored = []
    for rel, line, heading, body, tf, length in docs:
        score = 0.0
        for t in q_terms:
            f = tf.get(t, 0)
            if not f:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * length / (avg or 1)))
        if score > 0:
            scored.append((score, rel, line, heading, body))
    scored.sort(key=lambda s: (-s[0], s[1], s[2]))
    out = [DocSection(file=rel, line=line, heading=clean(heading)[:200], score=round(score, 3),
                      text=clean(body)[:MAX_SECTION_CHARS])
           for score, rel, line, heading, body in scored[:max_sections]]
    if not out:
        notes.append(f"no section of {len({d[0] for d in docs})} Markdown file(s) mentions {q!r}")
    return DocsResult(query=q, sections=out, files_searched=len({d[0] for d in docs}), notes=notes)
