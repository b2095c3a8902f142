"""Topology benchmark: discovery and inspect_stream on standalone Redis vs a 3-primary Redis Cluster,
and the read-only check (every key byte-for-byte unchanged after every read tool) on the cluster.

Starts its own servers on free loopback ports (a standalone ``redis-server`` and three
``redis-server --cluster-enabled yes`` joined by ``redis-cli --cluster create``, see
tests/topologies/servers.py) and stops them at the end. Seeds each with the same data:

- ``--streams`` streams (default 1,000) ``stream:bench:<n>``, each with 20 entries and a
  consumer group holding 5 pending entries, spread over the cluster's 16,384 slots;
- ``--queues`` BullMQ queues (default 200) ``bull:bq<n>:*`` with 3 waiting and 2 failed jobs;
- the stream/queue scenario of the test suite (every anomaly, a dead-letter stream, retry
  keys, a BullMQ queue in every state).

Then times, on each topology, the library calls the MCP tools run: ``list_streams`` and
``list_queues`` (a full SCAN of every primary, 500 detailed; median of 3) and
``inspect_stream`` (``--runs`` times: the scenario's stream and a 20-entry one).
On the cluster, the read-only check DUMPs every key of every primary, runs every stream
and queue tool through a real in-process MCP session, and DUMPs again after each tool:
any difference is printed and the bench exits 1.

    python bench/topology_bench.py                       # 1,000 streams, 200 queues
    python bench/topology_bench.py --streams 200 --queues 50 --runs 10
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import redis

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.config import Settings, load_settings  # noqa: E402
from server.connections import Connections  # noqa: E402
from server.demo.embedded import free_port, port_answers  # noqa: E402
from tests.helpers import in_process_client  # noqa: E402
from tests.streams import scenario as sc_mod  # noqa: E402
from tests.streams.conftest import merged  # noqa: E402
from tests.streams.snapshot import differences, snapshot  # noqa: E402
from tests.streams.test_read_only import calls  # noqa: E402
from tests.topologies.servers import start_cluster  # noqa: E402
from tools.queues.discovery import list_queues  # noqa: E402
from tools.streams.discovery import list_streams  # noqa: E402
from tools.streams.inspect import inspect_stream  # noqa: E402


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def seed(client: Any, streams: int, queues: int) -> None:
    pipe = client.pipeline(transaction=False)
    for n in range(streams):
        name = f"stream:bench:{n}"
        for i in range(20):
            pipe.xadd(name, {"id": f"{n}-{i}", "type": "bench.event", "payload": "{}"})
    pipe.execute()
    pipe = client.pipeline(transaction=False)
    for n in range(streams):
        pipe.xgroup_create(f"stream:bench:{n}", "pp-bench", id="0")
    pipe.execute()
    pipe = client.pipeline(transaction=False)
    for n in range(streams):
        pipe.xreadgroup("pp-bench", "worker", {f"stream:bench:{n}": ">"}, count=5)
    pipe.execute()
    pipe = client.pipeline(transaction=False)
    for n in range(queues):
        q = f"bull:bq{n}"
        for j in range(5):
            pipe.hset(f"{q}:{j}", mapping={"name": "bench.job", "data": "{}", "opts": "{}", "timestamp": "1"})
        pipe.rpush(f"{q}:wait", "0", "1", "2")
        pipe.zadd(f"{q}:failed", {"3": 1, "4": 2})
        pipe.hset(f"{q}:meta", mapping={"version": "bullmq:5.12.0"})
        pipe.set(f"{q}:id", 5)
    pipe.execute()


async def timed(fn: Callable[[], Awaitable[Any]], runs: int) -> tuple[list[float], Any]:
    out, last = [], None
    for _ in range(runs):
        start = time.perf_counter()
        last = await fn()
        out.append((time.perf_counter() - start) * 1000)
    return out, last


async def measure(settings: Settings, runs: int) -> dict[str, Any]:
    conns = Connections(settings)
    try:
        await inspect_stream(conns, settings, sc_mod.STREAM)  # connect and learn the topology first
        streams_ms, streams = await timed(lambda: list_streams(conns, settings, limit=500), 3)
        queues_ms, queues = await timed(lambda: list_queues(conns, settings, limit=500), 3)
        inspect_ms, _ = await timed(lambda: inspect_stream(conns, settings, sc_mod.STREAM), runs)
        bench_ms, _ = await timed(lambda: inspect_stream(conns, settings, "stream:bench:7"), runs)
    finally:
        await conns.aclose()
    assert streams.scan_complete and queues.scan_complete
    return {"list_streams": (statistics.median(streams_ms), streams.total_found, streams.scan_nodes),
            "list_queues": (statistics.median(queues_ms), queues.total_found, queues.scan_nodes),
            "inspect_stream": (statistics.median(inspect_ms), p95(inspect_ms)),
            "inspect_small": (statistics.median(bench_ms), p95(bench_ms))}


async def read_only_check(settings: Settings, client: Any, sc: sc_mod.Scenario) -> tuple[int, int, float, list]:
    """(keys compared, tool calls, seconds, differences) of the DUMP before/after every read tool."""
    start = time.perf_counter()
    before = snapshot(client)
    found: list[str] = []
    made = 0
    async with in_process_client(settings) as mcp:
        for name, args in calls(sc):
            result = await mcp.call_tool(name, args)
            made += 1
            if result.is_error:
                found.append(f"{name} {args}: tool error {result.content[0].text[:200]}")
            found += [f"after {name} {args}: {d}" for d in differences(before, snapshot(client))]
    return len(before), made, time.perf_counter() - start, found


def standalone_server() -> tuple[subprocess.Popen[bytes], int, tempfile.TemporaryDirectory[str]]:
    port = free_port()
    workdir = tempfile.TemporaryDirectory(prefix="mesh-bench-redis-")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", workdir.name], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not port_answers("127.0.0.1", port, 0.2):
        if time.monotonic() > deadline:
            raise RuntimeError("the standalone redis-server did not start")
        time.sleep(0.1)
    return proc, port, workdir


def settings_for(redis_config: dict[str, Any], state: str) -> Settings:
    return load_settings(environ={}, overrides=merged(sc_mod.SETTINGS, {"redis": redis_config, "state_dir": state}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=200)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    state = tempfile.mkdtemp(prefix="mesh-bench-state-")
    proc, port, workdir = standalone_server()
    cluster = None
    try:
        cluster = start_cluster()
        plain = redis.Redis(port=port)
        clustered = cluster.client()
        results: dict[str, dict[str, Any]] = {}
        scenario = None
        for label, client, cfg in (("standalone", plain, {"url": f"redis://127.0.0.1:{port}/0"}),
                                   ("cluster", clustered, {"url": cluster.url, "mode": "cluster"})):
            t0 = time.perf_counter()
            conv = settings_for(cfg, state).conventions
            scenario = sc_mod.build(client, conv, age=False)
            seed(client, args.streams, args.queues)
            seeded = time.perf_counter() - t0
            keys = sum(n.dbsize() for n in cluster.node_clients()) if label == "cluster" else plain.dbsize()
            print(f"seeded {label}: {keys} keys in {seeded:.1f} s", flush=True)
            results[label] = anyio.run(measure, settings_for(cfg, state), args.runs)
        per_node = [n.dbsize() for n in cluster.node_clients()]
        cluster_settings = settings_for({"url": cluster.url, "mode": "cluster"}, state)
        keys, made, seconds, found = anyio.run(read_only_check, cluster_settings, clustered, scenario)
    finally:
        if cluster is not None:
            cluster.stop()
        proc.terminate()
        proc.wait(10)
        workdir.cleanup()

    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"redis-py {redis.__version__}; {args.streams} bench streams, {args.queues} bench queues, "
          f"{args.runs} runs (medians; p95 for inspect_stream); load average {os.getloadavg()[0]:.1f}")
    print(f"cluster keys per primary: {per_node}")
    print(f"{'call':<38}{'standalone':>14}{'cluster (3 primaries)':>24}")
    for name in ("list_streams", "list_queues"):
        s, c = results["standalone"][name], results["cluster"][name]
        print(f"{name + ' (limit 500)':<38}{s[0]:>11.1f} ms{c[0]:>21.1f} ms   (found {s[1]} / {c[1]}, "
              f"nodes scanned {s[2]} / {c[2]})")
    for name, what in (("inspect_stream", "inspect_stream (scenario stream)"),
                       ("inspect_small", "inspect_stream (20-entry stream)")):
        s, c = results["standalone"][name], results["cluster"][name]
        print(f"{what:<38}{s[0]:>11.1f} ms{c[0]:>21.1f} ms   (p95 {s[1]:.1f} / {c[1]:.1f} ms)")
    print(f"\nread-only check on the cluster: {keys} keys DUMPed on {len(per_node)} primaries before and after "
          f"each of {made} tool calls in {seconds:.1f} s: {len(found)} differences")
    for line in found[:20]:
        print("  " + line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
