"""The queue tests share the stream tests' Redis fixtures (Redis 7 and 6.2, scratch databases, a cluster)."""

from tests.streams.conftest import (
    backend,
    cluster_backend,
    machine,
    machine_or_cluster,
    redis62,
    redis_cluster,
    settings_for,
)

__all__ = ["backend", "cluster_backend", "machine", "machine_or_cluster", "redis62", "redis_cluster",
           "settings_for"]
