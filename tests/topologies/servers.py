"""Production-shaped servers started on loopback for the topology tests, stopped after.

- :func:`start_cluster`: three ``redis-server --cluster-enabled yes`` primaries joined by
  ``redis-cli --cluster create ... --cluster-yes`` (every slot covered; no replica, or
  ``replicas=1``: one replica per primary, for the replica-read tests);
- :func:`start_sentinel`: one primary, one replica (``--replicaof``) and one
  ``redis-server --sentinel`` watching them under a service name;
- :func:`start_tls_redis`: a Redis that listens on TLS only (``--port 0 --tls-port``),
  with a CA and a server certificate generated here by ``openssl``;
- :func:`start_pgbouncer`: PgBouncer in ``pool_mode = transaction`` in front of the
  test PostgreSQL.

Each takes free ephemeral ports picked at run time (cluster bus ports too, through
``--cluster-port``), lives in its own temporary directory and is stopped by ``stop()``.
The machine's ``redis-server`` (7.x, built with TLS) is used; a missing binary skips
the test with the reason outside CI and fails it in CI (``CI=true``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from server.embedded import free_port, port_answers


def need(binary: str, package: str) -> str:
    """Path of ``binary``; skip (or fail in CI) when it is missing."""
    path = shutil.which(binary) or (f"/usr/sbin/{binary}" if Path(f"/usr/sbin/{binary}").exists() else None)
    if path is None:
        message = f"{binary} is not installed (Debian package {package}; .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _wait(predicate: object, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up within {timeout} s")


@dataclass
class Processes:
    workdir: tempfile.TemporaryDirectory[str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Path(self.workdir.name)

    def spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        log = open(self.path / f"{log_name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=self.path)
        log.close()
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
                proc.wait(5)
        self.workdir.cleanup()


def _redis_args(binary: str, port: int, workdir: Path, name: str, *extra: str) -> list[str]:
    node_dir = workdir / name
    node_dir.mkdir(exist_ok=True)
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(node_dir), "--daemonize", "no", *extra]


@dataclass
class Cluster:
    processes: Processes
    ports: list[int]
    replica_ports: list[int] = field(default_factory=list)
    """Ports of the replicas (``start_cluster(replicas=1)``: one per primary); ``ports`` are the primaries."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def client(self) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.ports[0])

    def node_clients(self) -> list[redis.Redis]:
        return [redis.Redis(host="127.0.0.1", port=p) for p in self.ports]

    def stop(self) -> None:
        self.processes.stop()


def start_cluster(primaries: int = 3, replicas: int = 0) -> Cluster:
    """``primaries`` primaries covering every slot, each with ``replicas`` replicas."""
    server = need("redis-server", "redis-server")
    cli = need("redis-cli", "redis-tools")
    procs = Processes(tempfile.TemporaryDirectory(prefix="mesh-test-cluster-"))
    ports = []
    try:
        for n in range(primaries * (1 + replicas)):
            port = free_port()
            ports.append(port)
            procs.spawn(_redis_args(server, port, procs.path, f"node{n}", "--cluster-enabled", "yes",
                                    "--cluster-port", str(free_port()),
                                    "--cluster-config-file", str(procs.path / f"node{n}" / "nodes.conf"),
                                    "--cluster-node-timeout", "5000", "--repl-ping-replica-period", "1"), f"node{n}")
        for port in ports:
            _wait(lambda p=port: port_answers("127.0.0.1", p, 0.2), f"cluster node on {port}")
        subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports), "--cluster-yes",
                        "--cluster-replicas", str(replicas)], check=True, capture_output=True, timeout=60)

        def roles() -> dict[int, str]:
            return {p: redis.Redis(port=p).info("replication")["role"] for p in ports}

        def ready() -> bool:
            if not all(redis.Redis(port=p).cluster("info")["cluster_state"] == "ok" for p in ports):
                return False
            linked = [redis.Redis(port=p).info("replication").get("master_link_status") == "up"
                      for p, role in roles().items() if role == "slave"]
            # CLUSTER SLOTS leaves out a replica until its replication offset moved: the clients learn the
            # shards from it, so wait until every node lists every replica
            listed = [sum(len(shard) - 3 for shard in redis.Redis(port=p).execute_command("CLUSTER", "SLOTS"))
                      for p in ports]
            return len(linked) == primaries * replicas and all(linked) and set(listed) == {primaries * replicas}

        _wait(ready, "the Redis Cluster", 30)
        by_role = roles()
        return Cluster(procs, [p for p in ports if by_role[p] == "master"],
                       [p for p in ports if by_role[p] == "slave"])
    except BaseException:
        procs.stop()
        raise


@dataclass
class Sentinel:
    processes: Processes
    primary_port: int
    replica_port: int
    sentinel_port: int
    service_name: str = "mesh-primary"

    def primary(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.primary_port)

    def replica(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.replica_port)

    def stop(self) -> None:
        self.processes.stop()


def start_sentinel() -> Sentinel:
    server = need("redis-server", "redis-server")
    procs = Processes(tempfile.TemporaryDirectory(prefix="mesh-test-sentinel-"))
    try:
        primary, replica, sentinel = free_port(), free_port(), free_port()
        procs.spawn(_redis_args(server, primary, procs.path, "primary"), "primary")
        procs.spawn(_redis_args(server, replica, procs.path, "replica", "--replicaof", "127.0.0.1", str(primary)),
                    "replica")
        conf = procs.path / "sentinel.conf"
        conf.write_text(
            f"port {sentinel}\nbind 127.0.0.1\ndir {procs.path}\n"
            f"sentinel monitor mesh-primary 127.0.0.1 {primary} 1\n"
            "sentinel down-after-milliseconds mesh-primary 60000\n",
            encoding="utf-8",
        )
        procs.spawn([server, str(conf), "--sentinel"], "sentinel")

        def replicating() -> bool:
            return redis.Redis(port=replica).info("replication").get("master_link_status") == "up"

        _wait(replicating, "the Sentinel replica")

        def sentinel_knows() -> bool:
            return bool(redis.Redis(port=sentinel).sentinel_master("mesh-primary").get("num-slaves"))

        _wait(sentinel_knows, "the Sentinel", 30)
        return Sentinel(procs, primary, replica, sentinel)
    except BaseException:
        procs.stop()
        raise


@dataclass
class TlsRedis:
    processes: Processes
    port: int
    ca: Path
    cert: Path
    key: Path

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, ssl=True, ssl_ca_certs=str(self.ca),
                           ssl_certfile=str(self.cert), ssl_keyfile=str(self.key))

    def stop(self) -> None:
        self.processes.stop()


def _openssl(openssl: str, cwd: Path, *args: str) -> None:
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(workdir: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate for 127.0.0.1 signed by it (also usable as client cert)."""
    openssl = need("openssl", "openssl")
    _openssl(openssl, workdir, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=mesh-test-ca", "-keyout", "ca.key", "-out", "ca.crt")
    _openssl(openssl, workdir, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "server.key", "-out", "server.csr")
    (workdir / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
    _openssl(openssl, workdir, "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt")
    return workdir / "ca.crt", workdir / "server.crt", workdir / "server.key"


def start_tls_redis() -> TlsRedis:
    server = need("redis-server", "redis-server")
    procs = Processes(tempfile.TemporaryDirectory(prefix="mesh-test-tls-"))
    try:
        ca, cert, key = make_certificates(procs.path)
        port = free_port()
        args = _redis_args(server, 0, procs.path, "tls", "--tls-port", str(port), "--tls-cert-file", str(cert),
                           "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "optional")
        proc = procs.spawn(args, "tls")
        tls = TlsRedis(procs, port, ca, cert, key)

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError((procs.path / "tls.log").read_text(errors="replace")[-500:])
            return bool(tls.client().ping())

        _wait(answers, "the TLS Redis")
        return tls
    except BaseException:
        procs.stop()
        raise


@dataclass
class PgBouncer:
    processes: Processes
    port: int

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        self.processes.stop()


def start_pgbouncer(pg_host: str, pg_port: int) -> PgBouncer:
    """PgBouncer in transaction mode: every database name maps to the same name on ``pg_host``."""
    binary = need("pgbouncer", "pgbouncer")
    procs = Processes(tempfile.TemporaryDirectory(prefix="mesh-test-pgbouncer-"))
    try:
        port = free_port()
        (procs.path / "users.txt").write_text('"postgres" ""\n', encoding="utf-8")
        (procs.path / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={pg_host} port={pg_port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {port}\n"
            f"unix_socket_dir = {procs.path}\n"
            "auth_type = trust\n"
            f"auth_file = {procs.path / 'users.txt'}\n"
            "pool_mode = transaction\n"
            "max_client_conn = 100\ndefault_pool_size = 5\n"
            "ignore_startup_parameters = extra_float_digits,application_name\n"
            f"logfile = {procs.path / 'pgbouncer.log'}\n",
            encoding="utf-8",
        )
        args = [binary, str(procs.path / "pgbouncer.ini")]
        if os.geteuid() == 0:
            args += ["-u", "postgres"] if _user_exists("postgres") else []
            os.chmod(procs.path, 0o777)
        procs.spawn(args, "pgbouncer-stdout")
        _wait(lambda: port_answers("127.0.0.1", port, 0.2), "PgBouncer")
        return PgBouncer(procs, port)
    except BaseException:
        procs.stop()
        raise


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
