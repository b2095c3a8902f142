"""The suite's scratch-Redis claim (tests/scratch_redis.py): a claim left by a process that died is
taken over, a live process's claim is never taken.

Each test runs its own redis-server (all 15 logical databases are the test's to look at) and real
child processes that claim a database through ``claim_database`` exactly as the ``redis_url``
fixture does, then are killed with SIGKILL (as the mutation bench kills a mutant's test run) or
kept alive while this process claims.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.remediation.redis_proc import ThrowawayRedis
from tests.scratch_redis import LOCK, claim_database, db_url

ROOT = Path(__file__).resolve().parents[2]

# a test process in miniature: claim a database, put a key in it, say which, then wait to be killed
CHILD = """
import sys, time
import redis
from tests.scratch_redis import claim_database
claims = claim_database(sys.argv[1])  # held: a dropped generator would release the claim
url = next(claims)
redis.Redis.from_url(url).set("left-behind", "by the child")
print(url, flush=True)
time.sleep(120)
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThrowawayRedis]:
    proc = ThrowawayRedis(tmp_path)
    yield proc
    proc.kill()


class Child:
    """A real process holding a claim on ``base_url``; ``url`` is the database it claimed."""

    def __init__(self, base_url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, base_url], cwd=ROOT, stdout=subprocess.PIPE,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True)
        self.url = self.proc.stdout.readline().strip()
        assert self.url, "the child process did not claim a database"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)  # reaped: no zombie left to answer kill(pid, 0)
        self.proc.stdout.close()


def _lock(base: redis.Redis, db: int) -> str | None:
    value = base.get(LOCK.format(db=db))
    return value.decode() if value is not None else None


def _claim(base_url: str) -> tuple[Iterator[str], str]:
    claims = claim_database(base_url)
    return claims, next(claims)


def _release(claims: Iterator[str]) -> None:
    with pytest.raises(StopIteration):
        next(claims)


def test_a_claim_left_by_a_killed_process_is_taken_over_and_flushed(server: ThrowawayRedis) -> None:
    base = redis.Redis.from_url(server.url)
    child = Child(server.url)
    try:
        assert child.url == db_url(server.url, 15)
        held = _lock(base, 15)
        assert held is not None and held.startswith(f"pid:{socket.gethostname()}:{child.proc.pid}:")
    finally:
        child.kill()
    assert _lock(base, 15) == held  # the dead process's claim is still there (30 minutes to live)
    claims, url = _claim(server.url)
    scratch = redis.Redis.from_url(url)
    try:
        assert url == db_url(server.url, 15)  # taken over, not skipped for database 14
        assert scratch.dbsize() == 0  # and flushed: the dead process's keys are gone
        mine = _lock(base, 15)
        assert mine != held and mine.startswith(f"pid:{socket.gethostname()}:{os.getpid()}:")
        assert 0 < base.ttl(LOCK.format(db=15)) <= 1800
        _release(claims)
        assert _lock(base, 15) is None
    finally:
        scratch.close()
        base.close()


def test_a_live_process_s_claim_is_never_taken(server: ThrowawayRedis) -> None:
    base = redis.Redis.from_url(server.url)
    child = Child(server.url)
    try:
        held = _lock(base, 15)
        assert held is not None and held.startswith(f"pid:{socket.gethostname()}:{child.proc.pid}:")
        claims, url = _claim(server.url)
        assert url == db_url(server.url, 14)  # the next database, not the live child's
        assert _lock(base, 15) == held
        child_db = redis.Redis.from_url(child.url)
        try:
            assert child_db.get("left-behind") == b"by the child"  # its keys untouched, even after we release
            _release(claims)
            assert child_db.get("left-behind") == b"by the child" and _lock(base, 15) == held
        finally:
            child_db.close()
        assert child.proc.poll() is None  # still alive all along
    finally:
        child.kill()
        base.close()


def test_a_dead_process_s_claim_of_another_kind_or_host_is_left_alone(server: ThrowawayRedis) -> None:
    """Only a lock of this module's form naming this host is judged by its pid: an older checkout's lock
    (no ``pid:`` form) and another host's (its pid means nothing here) are skipped until they expire."""
    base = redis.Redis.from_url(server.url)
    child = Child(server.url)
    child.kill()  # a pid that is certainly dead now
    dead = child.proc.pid
    base.set(LOCK.format(db=15), f"pid:another-host:{dead}:feed", ex=1800)
    base.set(LOCK.format(db=14), "f00dfeed", ex=1800)  # the older, untagged kind
    try:
        claims, url = _claim(server.url)
        assert url == db_url(server.url, 13)
        assert (_lock(base, 15), _lock(base, 14)) == (f"pid:another-host:{dead}:feed", "f00dfeed")
        _release(claims)
    finally:
        base.close()
