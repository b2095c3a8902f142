"""A scratch Redis logical database whose claim survives a test process that was killed.

The suite's ``redis_url`` fixture (tests/conftest.py) claims an empty database here, with a
lock key that lives 30 minutes, and flushes the database after the test. A process killed in the
middle (the mutation bench kills a mutant's test run at its CPU time limit) leaves the lock
and the keys behind, so after 15 such kills no database is free and every later test fails
at setup: a mutant would then be "killed" by the fixture, not by a test. The claim here
records host and pid in the lock; a lock of this kind whose process is gone on this host is
taken over and its database flushed; a lock of another kind (an older checkout's, another
host's) is never touched, and a database holding keys without a lock is never used.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator

import pytest
import redis

PREFIX = "pid:"
LOCK = "mesh-mcp:test-db-lock:{db}"


def db_url(base_url: str, db: int) -> str:
    """``base_url`` with logical database ``db`` (a db in the URL wins over ``db=``, so rewrite it)."""
    head, _, last = base_url.rstrip("/").rpartition("/")
    if last.isdigit() and head.count("/") >= 2:
        return f"{head}/{db}"
    return f"{base_url.rstrip('/')}/{db}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(holder: bytes | None, host: str) -> bool:
    """A lock of this module's kind (``pid:<host>:<pid>:<token>``) whose process is gone on this host."""
    if holder is None:
        return False
    parts = holder.decode(errors="replace").split(":")
    if len(parts) != 4 or f"{parts[0]}:" != PREFIX or parts[1] != host or not parts[2].isdigit():
        return False
    return not _alive(int(parts[2]))


def claim_database(base_url: str) -> Iterator[str]:
    """Yield the URL of an empty logical database (15 down to 1) claimed for the caller; flush it after."""
    host = socket.gethostname()
    token = f"{PREFIX}{host}:{os.getpid()}:{uuid.uuid4().hex}"
    base = redis.Redis.from_url(base_url)
    chosen = None
    try:
        for db in range(15, 0, -1):
            lock = LOCK.format(db=db)
            holder = base.get(lock)
            if _stale(holder, host):
                # compare-and-set: take the lock over only if it still holds the dead process's value
                taken = base.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                  "return redis.call('SET', KEYS[1], ARGV[2], 'EX', 1800) else return nil end",
                                  1, lock, holder, token)
                if taken is None:
                    continue
                client = redis.Redis.from_url(db_url(base_url, db))
                try:
                    client.flushdb()
                finally:
                    client.close()
                chosen = db
                break
            if not base.set(lock, token, nx=True, ex=1800):
                continue
            client = redis.Redis.from_url(db_url(base_url, db))
            try:
                if client.dbsize() == 0:
                    chosen = db
                    break
            finally:
                client.close()
            base.delete(lock)
        if chosen is None:
            pytest.fail("no free empty Redis logical database (1-15) for a scratch test database")
        url = db_url(base_url, chosen)
        yield url
        client = redis.Redis.from_url(url)
        try:
            client.flushdb()
        finally:
            client.close()
    finally:
        if chosen is not None and base.get(LOCK.format(db=chosen)) == token.encode():
            base.delete(LOCK.format(db=chosen))
        base.close()
