"""Parsing files into facts, in parallel worker processes when there are many.

tree-sitter releases the GIL only partly, so threads do not scale; :func:`parse_files`
uses a process pool (one process per core, files sent in chunks, each worker reading the
files itself) when more than :data:`PARALLEL_THRESHOLD` files need parsing, and parses
in-process otherwise (or when the pool cannot start). Each result carries the content
hash; a file that makes the extractor crash gets empty facts flagged ``error``.

The command line can start the parse before it imports the rest of the index
(:func:`start_early`: the result models, the service, the linker: about 0.3 s of CPU): the
workers parse while the parent imports, and :func:`parse_files` collects what they parsed.

How workers start (:func:`pool_context`): a ``spawn`` worker starts a new interpreter and
re-imports the program's main module (for ``mesh-mcp``, the console script and its
settings: about 0.2 s per worker). A process with a single thread (the command line)
forks instead: workers start in milliseconds with the parser already imported. A
process with other threads (the MCP server) must not fork; it uses a ``forkserver``
preloaded with this module, started once and reused.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from server import workspace_files
from tools.mesh_index.parser import FACTS_VERSION, ExtractConfig, extract
from tools.mesh_index.ts_queries import parser, queries

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

log = logging.getLogger("mesh.index")

PARALLEL_THRESHOLD = 400
CHUNK = 250
MIN_CHUNK = 25

Item = tuple[str, str]  # (relative path, kind)
Result = tuple[str, int, int, str, dict[str, Any]]  # (rel, size, mtime_ns, sha1, facts)


class Parsed(list):  # type: ignore[type-arg]
    """The results of :func:`parse_files` (a list of :data:`Result`), with ``encoded``: the facts of
    some files already as the cache's JSON text, by path (workers encode what they parsed, in
    parallel, so that the cache's store does not do it after the parse)."""

    def __init__(self, items: Any = (), encoded: dict[str, str] | None = None) -> None:
        super().__init__(items)
        self.encoded: dict[str, str] = encoded if encoded is not None else {}

    def extend_parsed(self, other: list[Result]) -> None:
        self.extend(other)
        self.encoded.update(getattr(other, "encoded", {}))


def encode_facts(facts: dict[str, Any]) -> str:
    """The cache's JSON text of one file's facts (compact)."""
    return json.dumps(facts, separators=(",", ":"))


def parse_one(root: str, rel: str, kind: str, cfg: ExtractConfig) -> Result | None:
    """Read and extract one file; None when it vanished or cannot be read."""
    path = os.path.join(root, rel)
    try:
        st = os.stat(path)
        data = workspace_files.read_bytes(root, rel)
    except OSError:
        return None
    sha = hashlib.sha1(data, usedforsecurity=False).hexdigest()
    try:
        facts = extract(data, kind, cfg)
    except Exception as exc:  # a bug or a pathological file must not stop the index
        log.warning("extraction failed for %s: %s", rel, exc)
        facts = {"v": FACTS_VERSION, "error": True, "crash": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return rel, st.st_size, st.st_mtime_ns, sha, facts


def _parse_chunk(root: str, items: list[Item], cfg: ExtractConfig, encode: bool = False) -> list[Any]:
    """Facts of a chunk of files, the cyclic collector paused meanwhile (facts are acyclic: it would only
    walk the new containers again and again, 5-10% of a worker's time; it runs again after the chunk).
    With ``encode`` (a worker), each result also carries its facts' JSON text (a sixth item)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        out: list[Any] = []
        for rel, kind in items:
            res = parse_one(root, rel, kind, cfg)
            if res is not None:
                out.append((*res, encode_facts(res[4])) if encode else res)
        return out
    finally:
        if paused:
            gc.enable()


def worker_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def parse_files(root: str, items: list[Item], cfg: ExtractConfig,
                progress: Callable[[int, int, str], None] | None = None,
                workers: int | None = None, while_waiting: Callable[[], None] | None = None) -> Parsed:
    """Facts of every item (parallel across cores for large batches), reporting progress.

    ``while_waiting`` runs in this process once the workers have their files (the caller's
    next step can import its modules meanwhile, instead of after the parse)."""
    early = take_early(root, cfg)
    if early is not None:
        try:
            return _collect_early(early, root, items, cfg, progress, while_waiting)
        except Exception as exc:  # BrokenProcessPool (a worker killed), ...: parsed again below
            log.warning("the early parse failed (%s); parsing again", exc)
            while_waiting = None
    total = len(items)
    n = workers if workers is not None else worker_count()
    if total >= PARALLEL_THRESHOLD and n > 1:
        try:
            return _parallel(root, items, cfg, progress, n, while_waiting)
        except Exception as exc:  # BrokenProcessPool, no /dev/shm, ...
            log.warning("parallel parsing unavailable (%s); parsing in-process", exc)
    out = Parsed()
    step = max(1, total // 50)
    for i, (rel, kind) in enumerate(items, 1):
        res = parse_one(root, rel, kind, cfg)
        if res is not None:
            out.append(res)
        if progress is not None and (i % step == 0 or i == total):
            progress(i, total, rel)
    return out


def split_chunks(items: list[Item], workers: int) -> list[list[Item]]:
    """Chunks of decreasing size (guided): each half of a worker's share of what is left, from
    :data:`CHUNK` files down to :data:`MIN_CHUNK`, so that the last chunks are short and no worker
    waits long for another's at the end."""
    out, start, n = [], 0, len(items)
    while start < n:
        size = max(MIN_CHUNK, min(CHUNK, (n - start) // (2 * max(1, workers))))
        out.append(items[start:start + size])
        start += size
    return out


def pool_context() -> BaseContext:
    """``fork`` in a single-threaded process, else a ``forkserver`` preloaded with this module, else ``spawn``."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and sys.platform == "linux" and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        # the main module too: else each worker would re-run it (the console script) before its first task
        ctx.set_forkserver_preload(["__main__", __name__])
        return ctx
    return multiprocessing.get_context("spawn")


def _submit(root: str, items: list[Item], cfg: ExtractConfig, n: int) -> tuple[Any, dict[Any, list[Item]]]:
    """A started pool of ``n`` workers and its futures (one per chunk of ``items``)."""
    from concurrent.futures import ProcessPoolExecutor

    ctx = pool_context()
    if ctx.get_start_method() == "fork":
        # the language of most files compiled once here, inherited by every forked worker (else each
        # compiles its queries: ~60 ms); another (a few .tsx files) is compiled by a worker that meets one
        kinds = Counter(k for _rel, k in items if k in ("ts", "tsx"))
        if kinds:
            kind = kinds.most_common(1)[0][0]
            queries(kind, cfg).compile_all()
            parser(kind)
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=gc.enable)
    try:
        return pool, {pool.submit(_parse_chunk, root, chunk, cfg, True): chunk for chunk in split_chunks(items, n)}
    except BaseException:
        pool.shutdown(cancel_futures=True)
        raise


def _gather(futures: dict[Any, list[Item]], total: int, progress: Callable[[int, int, str], None] | None,
            while_waiting: Callable[[], None] | None, keep: set[str] | None = None) -> Parsed:
    from concurrent.futures import as_completed

    if while_waiting is not None:
        while_waiting()
    out = Parsed()
    done = 0
    for fut in as_completed(futures):
        res = fut.result()
        for r in res:
            if keep is None or r[0] in keep:
                out.append(r[:5])
                out.encoded[r[0]] = r[5]
        done += len(futures[fut]) if keep is None else sum(1 for rel, _k in futures[fut] if rel in keep)
        if progress is not None:
            progress(done, total, res[-1][0] if res else "")
    return out


def _parallel(root: str, items: list[Item], cfg: ExtractConfig,
              progress: Callable[[int, int, str], None] | None, n: int,
              while_waiting: Callable[[], None] | None = None) -> Parsed:
    pool, futures = _submit(root, items, cfg, n)
    with pool:
        return _gather(futures, len(items), progress, while_waiting)


# -- started early (the command line) ------------------------------------------------------------------

_EARLY: dict[str, Any] = {}  # root, cfg, pool, futures of the parse start_early began


def start_early(root: str, items: list[Item], cfg: ExtractConfig, workers: int | None = None) -> bool:
    """Start parsing ``items`` now, in forked workers, for a later :func:`parse_files` of ``root``
    with the same ``cfg`` (which takes their results, and parses itself what they did not cover).

    Only where it pays and is safe: enough files for the pool, several cores, a process with one
    thread (``fork``). Returns whether it started."""
    n = workers if workers is not None else worker_count()
    if _EARLY or len(items) < PARALLEL_THRESHOLD or n < 2 or pool_context().get_start_method() != "fork":
        return False
    pool, futures = _submit(root, items, cfg, n)
    _EARLY.update(root=root, cfg=cfg, pool=pool, futures=futures)
    return True


def take_early(root: str, cfg: ExtractConfig) -> dict[str, Any] | None:
    """The parse :func:`start_early` began for ``root`` and ``cfg`` (then no longer pending), else None;
    one begun for another root or config is cancelled."""
    if not _EARLY:
        return None
    early = dict(_EARLY)
    _EARLY.clear()
    if early["root"] == root and early["cfg"] == cfg:
        return early
    early["pool"].shutdown(wait=True, cancel_futures=True)
    return None


def pending_early() -> tuple[str, ExtractConfig] | None:
    """The root and names of the parse :func:`start_early` began and nobody collected yet, else None."""
    return (_EARLY["root"], _EARLY["cfg"]) if _EARLY else None


def cancel_early() -> None:
    """Stop a parse begun by :func:`start_early` that nobody collected (the command failed before)."""
    if _EARLY:
        pool = _EARLY["pool"]
        _EARLY.clear()
        pool.shutdown(wait=True, cancel_futures=True)


def _collect_early(early: dict[str, Any], root: str, items: list[Item], cfg: ExtractConfig,
                   progress: Callable[[int, int, str], None] | None,
                   while_waiting: Callable[[], None] | None) -> Parsed:
    """The early workers' results for ``items`` (a file they parsed but ``items`` does not hold is
    dropped), then those of the files they were not given, parsed as :func:`parse_files` would."""
    wanted = {rel for rel, _kind in items}
    pool = early["pool"]
    try:
        out = _gather(early["futures"], len(items), progress, while_waiting, keep=wanted)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # Ctrl-C, a broken pool: no queued chunk is waited for
        raise
    pool.shutdown(wait=True)
    covered = {rel for chunk in early["futures"].values() for rel, _kind in chunk}
    rest = [item for item in items if item[0] not in covered]
    if rest:
        out.extend_parsed(parse_files(root, rest, cfg))
    return out
