"""``[redis]`` settings: topology (standalone, cluster, sentinel), TLS, and several instances.

``[redis]`` itself is the *default* instance. ``[redis.instances.<name>]`` tables take the
same keys plus ``streams`` / ``queues``: glob patterns (``fnmatch``) of the stream keys and
BullMQ queue names that live on that instance. A stream or queue goes to the first named
instance (in file order) with a matching pattern, else to the default instance.

Modes:

- ``standalone``: one server at ``url``;
- ``cluster``: ``url`` is any node of a Redis Cluster (database 0); redis-py's
  ``RedisCluster`` finds the others, discovery SCANs every primary;
- ``sentinel``: ``sentinels`` are asked for the primary of ``service_name``; ``url``
  then only carries the scheme (``rediss://`` for TLS), the password and the database,
  its host is not used. Reads go to a replica only with ``read_from_replicas = true``
  (replicas lag the primary: a tool result says so).

TLS: a ``rediss://`` URL plus ``ssl_ca_certs`` / ``ssl_certfile`` / ``ssl_keyfile`` /
``ssl_cert_reqs`` (the same for the sentinels when ``sentinel_tls = true``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_INSTANCE = "default"
_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RedisConnectionSettings(_Strict):
    """How to reach one Redis deployment (the keys every instance shares)."""

    url: str = Field(default="redis://127.0.0.1:6379/0", description="redis:// or rediss:// or unix:// URL")
    mode: Literal["standalone", "cluster", "sentinel"] = Field(
        default="standalone", description="standalone, cluster (url = any node) or sentinel (see sentinels)"
    )
    sentinels: list[str] = Field(default_factory=list, description="sentinel mode: host:port of each sentinel")
    service_name: str | None = Field(default=None, description="sentinel mode: the monitored primary's name")
    sentinel_password: str | None = Field(
        default=None, description="sentinel mode: password of the sentinels themselves (if they require one)"
    )
    sentinel_tls: bool = Field(default=False, description="sentinel mode: the sentinels also speak TLS")
    read_from_replicas: bool = Field(
        default=False,
        description="cluster/sentinel: send reads to replicas (they lag the primary; results say so)",
    )
    ssl_ca_certs: str | None = Field(default=None, description="TLS: CA bundle that signed the server certificate")
    ssl_certfile: str | None = Field(default=None, description="TLS: client certificate (mutual TLS)")
    ssl_keyfile: str | None = Field(default=None, description="TLS: private key of ssl_certfile")
    ssl_cert_reqs: Literal["required", "optional", "none"] = Field(
        default="required", description="TLS: verification of the server certificate"
    )

    @field_validator("url")
    @classmethod
    def _url_shape(cls, value: str) -> str:
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @field_validator("sentinels")
    @classmethod
    def _sentinel_shape(cls, value: list[str]) -> list[str]:
        for item in value:
            host, sep, port = item.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"sentinel {item!r} is not host:port")
        return value

    @model_validator(mode="after")
    def _mode_needs(self) -> RedisConnectionSettings:
        if self.mode == "sentinel" and (not self.sentinels or not self.service_name):
            raise ValueError("mode = \"sentinel\" needs sentinels = [\"host:port\", ...] and service_name")
        if self.mode != "sentinel" and (self.sentinels or self.service_name):
            raise ValueError(f"sentinels / service_name are only used with mode = \"sentinel\" (mode is {self.mode})")
        if self.mode == "cluster" and self.url.startswith("unix://"):
            raise ValueError("mode = \"cluster\" needs a redis:// or rediss:// url of one node")
        if self.mode == "cluster" and self.url.rstrip("/").rsplit("/", 1)[-1] not in ("0", "") and \
                self.url.count("/") > 2:
            raise ValueError("a Redis Cluster has only database 0: drop the /N of the url")
        if self.read_from_replicas and self.mode == "standalone":
            raise ValueError("read_from_replicas needs mode = \"cluster\" or \"sentinel\"")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("ssl_keyfile needs ssl_certfile")
        return self

    @property
    def tls(self) -> bool:
        return self.url.startswith("rediss://")


class RedisInstanceSettings(RedisConnectionSettings):
    """``[redis.instances.<name>]``: another Redis, and which streams / queues live there."""

    streams: list[str] = Field(default_factory=list, description="globs of the stream keys on this instance")
    queues: list[str] = Field(default_factory=list, description="globs of the BullMQ queue names on this instance")


class RedisSettings(RedisConnectionSettings):
    """``[redis]``: the default instance, plus named ones under ``[redis.instances.<name>]``."""

    instances: dict[str, RedisInstanceSettings] = Field(
        default_factory=dict, description="other Redis instances by name (same keys plus streams / queues)"
    )

    @field_validator("instances")
    @classmethod
    def _names(cls, value: dict[str, RedisInstanceSettings]) -> dict[str, RedisInstanceSettings]:
        for name in value:
            if name == DEFAULT_INSTANCE or not _INSTANCE_NAME.match(name):
                raise ValueError(f"instance name {name!r}: use letters, digits, - or _ (and not 'default')")
        return value

    def instance(self, name: str) -> RedisConnectionSettings:
        return self if name == DEFAULT_INSTANCE else self.instances[name]

    def instance_names(self) -> list[str]:
        return [DEFAULT_INSTANCE, *self.instances]
