"""Bearer-token authentication of streamable HTTP mode, through the MCP SDK's resource-server auth.

The token comes from ``MESH_HTTP_TOKEN`` or, failing that, from the file named by
``[http] token_file``. It is compared in constant time, never logged, never stored in the
settings (so ``server_info`` cannot show it). A request without it, or with another one, gets
``401`` with a ``WWW-Authenticate: Bearer`` header from the SDK's ``RequireAuthMiddleware``.

Binding to an address other than loopback without a token is refused: any host that can reach
the port could otherwise call every tool (and ``apply_remediation`` when it is enabled).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings

from server.config import Settings
from server.errors import InvalidArgument

TOKEN_ENV = "MESH_HTTP_TOKEN"
MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused: a guessable token is no authentication."""

CLIENT_ID = "mesh-http-client"


class StaticTokenVerifier:
    """A ``TokenVerifier`` accepting exactly one bearer token (constant-time comparison)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access granted to ``token``: all of it when it is the configured token, else none."""
        if hmac.compare_digest(token.encode("utf-8"), self._token):
            return AccessToken(token=token, client_id=CLIENT_ID, scopes=[])
        return None

    def __repr__(self) -> str:  # never show the token
        return "StaticTokenVerifier(<redacted>)"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this machine."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_token_file(path: Path) -> None:
    """Refuse a token file other users can read (POSIX); on Windows its folder's ACL protects it."""
    if sys.platform == "win32":
        return
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidArgument(
            f"[http] token_file {path} is readable by other users (mode {stat.filemode(mode)}): "
            f"run chmod 600 {path}"
        )


def load_http_token(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """The bearer token HTTP clients must send, or ``None`` when none is configured.

    Raises ``InvalidArgument`` for an empty or short token, an unreadable token file, or one
    that other users may read.
    """
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_ENV)
    origin = TOKEN_ENV
    if token is None and settings.http.token_file:
        path = Path(settings.http.token_file).expanduser()
        origin = f"[http] token_file {path}"
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            reason = exc.strerror or exc
            raise InvalidArgument(f"{origin} cannot be read ({reason}): create it or fix the path") from None
        _check_token_file(path)
    if token is None:
        return None
    token = token.strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise InvalidArgument(
            f"{origin} holds a token of {len(token)} characters; use at least {MIN_TOKEN_CHARS} random ones "
            "(e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token


def http_auth(host: str, port: int, token: str) -> tuple[AuthSettings, StaticTokenVerifier]:
    """The SDK's auth settings (resource server only, no OAuth endpoints) and the token's verifier."""
    base = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    settings = AuthSettings(issuer_url=base, resource_server_url=None)
    return settings, StaticTokenVerifier(token)


def transport_security(settings: Settings, host: str) -> TransportSecuritySettings | None:
    """Host/Origin checks: the SDK's loopback defaults, or ``[http] allowed_hosts/origins`` when bound wider."""
    if host in ("127.0.0.1", "localhost", "::1"):
        return None  # the SDK enables its DNS-rebinding protection for these itself
    if is_loopback(host):
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{host}:*"],
            allowed_origins=[f"http://{host}:*"],
        )
    if not settings.http.allowed_hosts and not settings.http.allowed_origins:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(settings.http.allowed_hosts),
        allowed_origins=list(settings.http.allowed_origins),
    )


def require_token_for(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token."""
    if token is None and not is_loopback(host):
        raise InvalidArgument(
            f"refusing to serve HTTP on {host} without a bearer token: any host that reaches the port could call "
            f"every tool. Set {TOKEN_ENV} (or [http] token_file), or bind 127.0.0.1"
        )
