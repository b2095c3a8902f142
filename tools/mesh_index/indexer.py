"""Parsing files into facts, in parallel worker processes when there are many.

tree-sitter releases the GIL only partly, so threads do not scale; :func:`parse_files`
uses a ``spawn`` process pool (one process per core, files sent in chunks, each worker
reading the files itself) when more than :data:`PARALLEL_THRESHOLD` files need parsing,
and parses in-process otherwise (or when the pool cannot start). Each result carries the
content hash; a file that makes the extractor crash gets empty facts flagged ``error``.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

from tools.mesh_index.parser import FACTS_VERSION, ExtractConfig, extract

log = logging.getLogger("mesh.index")

PARALLEL_THRESHOLD = 400
CHUNK = 250

Item = tuple[str, str]  # (relative path, kind)
Result = tuple[str, int, int, str, dict[str, Any]]  # (rel, size, mtime_ns, sha1, facts)


def parse_one(root: str, rel: str, kind: str, cfg: ExtractConfig) -> Result | None:
    """Read and extract one file; None when it vanished or cannot be read."""
    path = os.path.join(root, rel)
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    sha = hashlib.sha1(data, usedforsecurity=False).hexdigest()
    try:
        facts = extract(data, kind, cfg)
    except Exception as exc:  # a bug or a pathological file must not stop the index
        log.warning("extraction failed for %s: %s", rel, exc)
        facts = {"v": FACTS_VERSION, "error": True, "crash": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return rel, st.st_size, st.st_mtime_ns, sha, facts


def _parse_chunk(root: str, items: list[Item], cfg: ExtractConfig) -> list[Result]:
    out = []
    for rel, kind in items:
        res = parse_one(root, rel, kind, cfg)
        if res is not None:
            out.append(res)
    return out


def worker_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def parse_files(root: str, items: list[Item], cfg: ExtractConfig,
                progress: Callable[[int, int, str], None] | None = None,
                workers: int | None = None) -> list[Result]:
    """Facts of every item (parallel across cores for large batches), reporting progress."""
    total = len(items)
    n = workers if workers is not None else worker_count()
    if total >= PARALLEL_THRESHOLD and n > 1:
        try:
            return _parallel(root, items, cfg, progress, n)
        except Exception as exc:  # BrokenProcessPool, no /dev/shm, ...
            log.warning("parallel parsing unavailable (%s); parsing in-process", exc)
    out: list[Result] = []
    step = max(1, total // 50)
    for i, (rel, kind) in enumerate(items, 1):
        res = parse_one(root, rel, kind, cfg)
        if res is not None:
            out.append(res)
        if progress is not None and (i % step == 0 or i == total):
            progress(i, total, rel)
    return out


def _parallel(root: str, items: list[Item], cfg: ExtractConfig,
              progress: Callable[[int, int, str], None] | None, n: int) -> list[Result]:
    chunks = [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]
    out: list[Result] = []
    done = 0
    with ProcessPoolExecutor(max_workers=n, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_parse_chunk, root, chunk, cfg): len(chunk) for chunk in chunks}
        for fut in as_completed(futures):
            res = fut.result()
            out.extend(res)
            done += futures[fut]
            if progress is not None:
                progress(done, len(items), res[-1][0] if res else "")
    return out
