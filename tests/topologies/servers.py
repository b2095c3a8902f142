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
``--cluster-port``) and keeps one only once the server on it is provably its own (its
``INFO server`` ``process_id``, PgBouncer's own log line), picking another when a parallel
run took it first (:func:`start_owned`); each lives in its own temporary directory and is
stopped by ``stop()``.
The machine's ``redis-server`` (7.x, built with TLS) is used; a missing binary skips
the test with the reason outside CI and fails it in CI (``CI=true``), unless .ci/run
could not install it (see :func:`need`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from server.demo.embedded import free_port, port_answers


def need(binary: str, package: str) -> str:
    """Path of ``binary``. Missing: a skip with the reason outside CI, and in CI (``CI=true``) too when
    .ci/run tried to install it and apt could not (it names it in ``MESH_TEST_UNINSTALLABLE``);
    otherwise a failure, since .ci/run should have installed it."""
    path = shutil.which(binary) or (f"/usr/sbin/{binary}" if Path(f"/usr/sbin/{binary}").exists() else None)
    if path is None:
        if binary in os.environ.get("MESH_TEST_UNINSTALLABLE", "").split():
            pytest.skip(f"{binary} is not installed and .ci/run could not install it "
                        f"(apt-get install {package} failed on this machine)")
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


def _plain_client(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=2)


def start_owned(procs: Processes, log_name: str, make_args: Callable[[int], list[str]],
                client_for: Callable[[int], redis.Redis] = _plain_client, attempts: int = 5
                ) -> tuple[int, subprocess.Popen[bytes]]:
    """Start a Redis server (or sentinel) on a free port picked now and make sure the port is *ours*.

    Several test runs share the machine: another one may bind the port between ``free_port()``
    and our server's bind (ours then exits), and a port that answers may be someone else's server.
    The server is ours only when its ``INFO server`` ``process_id`` is our process's pid; otherwise
    another port is picked, ``attempts`` times at most.
    """
    for _ in range(attempts):
        port = free_port()
        proc = procs.spawn(make_args(port), log_name)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with client_for(port) as client:
                    if int(client.info("server")["process_id"]) == proc.pid:
                        return port, proc
            except (redis.RedisError, OSError):
                pass
            time.sleep(0.1)
        if proc.poll() is None:  # pragma: no cover - alive but never answered as itself
            proc.terminate()
            proc.wait(5)
        procs.procs.remove(proc)
    log = (procs.path / f"{log_name}.log").read_text(errors="replace")[-500:]
    raise RuntimeError(f"{log_name}: no free port could be kept in {attempts} attempts; last log: {log}")


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
            def args(port: int, n: int = n) -> list[str]:
                nodes_conf = procs.path / f"node{n}" / "nodes.conf"
                nodes_conf.unlink(missing_ok=True)  # a retry starts a fresh node
                return _redis_args(server, port, procs.path, f"node{n}", "--cluster-enabled", "yes",
                                   "--cluster-port", str(free_port()), "--cluster-config-file", str(nodes_conf),
                                   "--cluster-node-timeout", "5000", "--repl-ping-replica-period", "1")

            ports.append(start_owned(procs, f"node{n}", args)[0])
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
        primary, _ = start_owned(procs, "primary", lambda port: _redis_args(server, port, procs.path, "primary"))
        replica, _ = start_owned(procs, "replica", lambda port: _redis_args(
            server, port, procs.path, "replica", "--replicaof", "127.0.0.1", str(primary)))
        conf = procs.path / "sentinel.conf"

        def sentinel_args(port: int) -> list[str]:
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {procs.path}\n"
                f"sentinel monitor mesh-primary 127.0.0.1 {primary} 1\n"
                "sentinel down-after-milliseconds mesh-primary 60000\n",
                encoding="utf-8",
            )
            return [server, str(conf), "--sentinel"]

        sentinel, _ = start_owned(procs, "sentinel", sentinel_args)

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

        def args(port: int) -> list[str]:
            return _redis_args(server, 0, procs.path, "tls", "--tls-port", str(port), "--tls-cert-file", str(cert),
                               "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca),
                               "--tls-auth-clients", "optional")

        port, _ = start_owned(procs, "tls", args, lambda p: TlsRedis(procs, p, ca, cert, key).client())
        return TlsRedis(procs, port, ca, cert, key)
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
        (procs.path / "users.txt").write_text('"postgres" ""\n', encoding="utf-8")
        log = procs.path / "pgbouncer.log"
        if os.geteuid() == 0:
            os.chmod(procs.path, 0o777)
        for _ in range(5):  # another run may take the port first: ours then exits, pick another
            port = free_port()
            log.unlink(missing_ok=True)
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
                f"logfile = {log}\n",
                encoding="utf-8",
            )
            args = [binary, str(procs.path / "pgbouncer.ini")]
            if os.geteuid() == 0 and _user_exists("postgres"):
                args += ["-u", "postgres"]
            proc = procs.spawn(args, "pgbouncer-stdout")
            deadline = time.monotonic() + 20
            # ours when it is alive, its own log says it listens on the port, and the port answers
            while time.monotonic() < deadline and proc.poll() is None:
                said = log.exists() and f"listening on 127.0.0.1:{port}" in log.read_text(errors="replace")
                if said and port_answers("127.0.0.1", port, 0.2):
                    return PgBouncer(procs, port)
                time.sleep(0.1)
            if proc.poll() is None:  # pragma: no cover
                proc.terminate()
                proc.wait(5)
            procs.procs.remove(proc)
        raise RuntimeError("PgBouncer: no free port could be kept in 5 attempts")
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
