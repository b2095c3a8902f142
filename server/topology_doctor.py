"""Doctor checks of the production topologies: each Redis instance, and PostgreSQL behind a pooler.

Redis, per instance (``redis`` for ``[redis]``, ``redis:<name>`` for the others):

- reachability and version, through the configured topology (a sentinel asks for the
  primary, a cluster names its primaries and whether every slot is served);
- ``cluster_enabled:1`` reported by a server configured as ``standalone`` or
  ``sentinel`` (discovery would scan one node of the cluster and miss the others'
  keys), and ``mode = "cluster"`` against a server that is not a cluster node: fail,
  with the setting to change;
- ``read_from_replicas``: a warning that replicas lag the primary.

PostgreSQL, per service (``postgres:<name>:connection``):

- the DSN as used, redacted, with its TLS settings (``sslmode``, ``sslrootcert``);
- a pooler or proxy in between (the server's own port, ``inet_server_port()``, differs
  from the DSN's port, as with PgBouncer): what mesh-mcp relies on is checked inside one
  read transaction, where it must hold behind a transaction pooler: the transaction is
  READ ONLY and the statement timeout (a ``SET LOCAL``) is in force. Startup options in
  the DSN (``options=-c ...``) are session settings a transaction pooler refuses or
  drops: warned. Server-side prepared statements are never used (``prepare_threshold``
  is off), so transaction pooling is safe for them.
"""

from __future__ import annotations

from typing import Any

import psycopg

from server.checks import Check
from server.errors import MeshError
from server.redaction import redact_dsn, redact_text
from server.redis_clients import single_server_client
from server.redis_settings import DEFAULT_INSTANCE
from server.runtime import Runtime


def _redis_name(instance: str) -> str:
    return "redis" if instance == DEFAULT_INSTANCE else f"redis:{instance}"


async def redis_checks(runtime: Runtime) -> list[Check]:
    out: list[Check] = []
    for instance in runtime.settings.redis.instance_names():
        out += await _redis_instance(runtime, instance)
    return out


async def _redis_instance(runtime: Runtime, instance: str) -> list[Check]:
    conn = runtime.connections
    cfg = runtime.settings.redis.instance(instance)
    name = _redis_name(instance)
    client = None
    try:
        async with conn.redis_errors(instance):
            client, where = await single_server_client(cfg, runtime.settings.limits)
            info: dict[str, Any] = await client.info("server")
            cluster_info: dict[str, Any] = await client.info("cluster")
            primaries = None
            bare: list[str] | None = None
            if cfg.mode == "cluster" and str(cluster_info.get("cluster_enabled")) == "1":
                state = await client.execute_command("CLUSTER", "INFO")
                primaries = await _cluster_primaries(conn.redis(instance))
                if cfg.read_from_replicas:
                    bare = await _shards_without_replica(conn.redis_reader(instance))
    except MeshError as exc:
        return [Check(name=name, status="fail", detail=redact_text(str(exc)),
                      fix=f"check {_section(instance)} and that Redis is up")]
    finally:
        if client is not None:
            await client.aclose()
    tls = ", TLS" if cfg.tls else ""
    version = info.get("redis_version")
    enabled = str(cluster_info.get("cluster_enabled")) == "1"
    checks: list[Check] = []
    if enabled and cfg.mode != "cluster":
        checks.append(Check(
            name=f"{name}:mode", status="fail",
            detail=f"{where} reports cluster_enabled:1 but {_section(instance)} mode is \"{cfg.mode}\": discovery "
            "would scan one node and miss the keys of the others, and keys of other slots would be refused",
            fix=f"set mode = \"cluster\" in {_section(instance)}"))
    elif cfg.mode == "cluster" and not enabled:
        checks.append(Check(
            name=f"{name}:mode", status="fail",
            detail=f"{_section(instance)} mode is \"cluster\" but {where} reports cluster_enabled:0",
            fix=f"set mode = \"standalone\" (or \"sentinel\") in {_section(instance)}"))
    if cfg.mode == "cluster" and enabled:
        cluster_state = _cluster_state(state)
        detail = (f"Redis {version} cluster{tls}: {primaries or '?'} primaries, cluster_state {cluster_state} "
                  f"(asked {where}); discovery scans every primary")
        checks.insert(0, Check(name=name, status="ok" if cluster_state == "ok" else "fail", detail=detail,
                               fix=None if cluster_state == "ok" else "some slots are not served: fix the cluster"))
    elif cfg.mode == "sentinel":
        checks.insert(0, Check(name=name, status="ok",
                               detail=f"Redis {version}{tls}: primary of '{cfg.service_name}' is {where} "
                               f"(sentinels {', '.join(cfg.sentinels)})"))
    else:
        checks.insert(0, Check(name=name, status="ok", detail=f"Redis {version}{tls} at {where}"))
    if cfg.read_from_replicas:
        shards = ""
        if bare:
            shards = (f"; the shard(s) of {', '.join(bare)} have no replica: their reads go to that primary "
                      "although results say replica")
        elif bare == []:
            shards = "; every shard has a replica"
        checks.append(Check(name=f"{name}:replicas", status="warn",
                            detail="read_from_replicas = true: read tools read replicas, which lag the primary "
                            f"(results say so); remediation always reads and writes the primary{shards}",
                            fix="set read_from_replicas = false for exact reads"
                            + (", or add a replica to each shard" if bare else "")))
    return checks


def _section(instance: str) -> str:
    return "[redis]" if instance == DEFAULT_INSTANCE else f"[redis.instances.{instance}]"


def _cluster_state(raw: Any) -> str:
    if isinstance(raw, dict):
        return str(raw.get("cluster_state", "?"))
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    for line in text.splitlines():
        if line.startswith("cluster_state:"):
            return line.split(":", 1)[1].strip()
    return "?"


async def _cluster_primaries(client: Any) -> int | None:
    try:
        if client._initialize:
            await client.initialize()
        return len(client.get_primaries())
    except AttributeError:
        return None


async def _shards_without_replica(reader: Any) -> list[str] | None:
    """Primaries (host:port) of the shards a cluster replica reader finds no replica for."""
    try:
        if reader._initialize:
            await reader.initialize()
        bare = {nodes[0].name for nodes in reader.nodes_manager.slots_cache.values() if len(nodes) < 2}
        return sorted(bare)
    except AttributeError:
        return None


# -- PostgreSQL behind a pooler ------------------------------------------------------------


def _dsn_params(dsn: str) -> dict[str, str]:
    try:
        return {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items() if v is not None}
    except psycopg.ProgrammingError:
        return {}


def _tls_text(params: dict[str, str]) -> str:
    mode = params.get("sslmode", "prefer (libpq default)")
    root = params.get("sslrootcert")
    return f"sslmode {mode}" + (f", sslrootcert {root}" if root else "")


async def postgres_checks(runtime: Runtime) -> list[Check]:
    out: list[Check] = []
    for service in sorted(runtime.settings.services):
        out.append(await _service_check(runtime, service))
    return out


async def _service_check(runtime: Runtime, service: str) -> Check:
    dsn = runtime.settings.services[service].postgres
    params = _dsn_params(dsn)
    name = f"postgres:{service}:connection"
    shown = f"{redact_dsn(dsn)} ({_tls_text(params)})"
    timeout_ms = runtime.settings.limits.statement_timeout_ms
    try:
        result = await runtime.connections.read(
            service,
            "SELECT current_setting('transaction_read_only') AS read_only, "
            "current_setting('statement_timeout') AS statement_timeout, inet_server_port() AS server_port, "
            "(SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()) AS ssl",
        )
    except MeshError as exc:
        fix = f"check [services.{service}] postgres"
        if params.get("options"):
            fix = ("the DSN sets startup options (options=...): a transaction pooler such as PgBouncer refuses "
                   "or drops them; remove them (mesh-mcp sets its statement timeout per transaction)")
        return Check(name=name, status="fail", detail=f"{shown}: {exc}", fix=fix)
    row = result.rows[0]
    problems = []
    if row["read_only"] != "on":
        problems.append(f"the read transaction is not READ ONLY (transaction_read_only = {row['read_only']})")
    if row["statement_timeout"] != f"{timeout_ms}ms" and row["statement_timeout"] != _pg_duration(timeout_ms):
        problems.append(f"the statement timeout is {row['statement_timeout']}, not {timeout_ms} ms")
    dsn_port = params.get("port", "5432")
    pooled = row["server_port"] is not None and str(row["server_port"]) != dsn_port
    where = (f"through a pooler or proxy (the DSN connects to port {dsn_port}, the server listens on "
             f"{row['server_port']}: PgBouncer?)" if pooled else "directly")
    ssl = "TLS in use" if row["ssl"] else "no TLS"
    if params.get("options"):
        problems.append(f"the DSN sets startup options ({params['options']!r}): session settings a transaction "
                        "pooler refuses or silently drops; mesh-mcp sets what it needs per transaction (SET LOCAL)")
    if problems:
        return Check(name=name, status="fail" if row["read_only"] != "on" else "warn",
                     detail=f"{shown}, {where}, {ssl}: " + "; ".join(problems),
                     fix="behind a transaction pooler only per-transaction settings hold: drop startup options, "
                     "connect to a database whose reads can run READ ONLY")
    held = "READ ONLY and the statement timeout hold inside the transaction; no server-side prepared statements"
    return Check(name=name, status="ok", detail=f"{shown}, {where}, {ssl}: {held}")


def _pg_duration(ms: int) -> str:
    """How PostgreSQL shows a statement_timeout of ``ms`` milliseconds (e.g. 5s, 1min)."""
    if ms % 60_000 == 0:
        return f"{ms // 60_000}min"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


async def checks(runtime: Runtime) -> list[Check]:
    return await postgres_checks(runtime)
