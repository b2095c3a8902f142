"""Approval tokens for remediation plans: minted by a human out of band, checked by the server.

A token is ``<claims>.<proof>``, both parts base64url without padding. ``claims`` is the
canonical JSON (sorted keys, no whitespace) of :class:`Claims`: mode, plan id,
``plan_sha256``, issue and expiry times, a random nonce and the approver id. ``proof`` is

- ``local`` mode: HMAC-SHA256 of ``DOMAIN + claims`` with a 32-byte secret kept in a file
  created 0600 on first use (``[approval] secret_file``, default
  ``~/.config/mesh-mcp/approval.key``). Zero setup; it stops accidents, not a determined
  agent running as the same OS user (that agent can read the secret).
- ``signature`` mode: an Ed25519 signature of ``DOMAIN + claims`` by an approver whose public
  key is listed in the trust file (:mod:`server.approval.trust`; never the workspace config nor
  ``MESH_*``). The private key sits in a passphrase-protected file (PKCS8,
  ``BestAvailableEncryption``) whose password is first stretched with scrypt, so nothing
  the server or an agent can read lets anyone mint a token without the passphrase
  (key files: :mod:`server.approval.keys`).

Verification is strict: canonical base64url and canonical JSON only (a token has exactly
one spelling), the mode must be the configured one, MACs and hashes are compared in
constant time, the plan id and ``plan_sha256`` must be those of the plan being applied,
and the token must not be expired. :func:`consume_nonce` makes a token single-use by
recording its nonce in ``<state_dir>/used_nonces`` under a portable lock (:mod:`server.filelocks`).

The server never returns a token, the secret or a passphrase in any tool output.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from server.approval.keys import approver_keys, check_private_file
from server.config import Settings
from server.errors import MeshError, RemediationRefused
from server.filelocks import exclusive
from server.state_files import open_state_file, read_state_bytes

TOKEN_VERSION = 1
DOMAIN = b"mesh-mcp approval token v1\n"
"""Prefix of every MAC'd or signed message (domain separation)."""

MAX_TOKEN_CHARS = 4096
DEFAULT_SECRET_PATH = Path("~/.config/mesh-mcp/approval.key")
NONCES_FILE_NAME = "used_nonces"
NONCES_PRUNE_LINES = 5000

_B64U_RE = re.compile(r"^[A-Za-z0-9_-]*$")

RefusalReason = Literal[
    "missing",
    "malformed",
    "wrong_mode",
    "no_secret",
    "bad_mac",
    "unknown_approver",
    "bad_signature",
    "other_plan",
    "plan_changed",
    "expired",
    "reused",
]


class TokenRefused(RemediationRefused):
    """The approval token cannot be accepted; ``reason`` says why (stable code)."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class Claims(BaseModel):
    """What a token asserts. Signed/MAC'd as canonical JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    v: int = Field(description="token format version")
    mode: Literal["local", "signature"]
    plan_id: str = Field(min_length=1, max_length=128)
    plan_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    iat: int = Field(description="issued at, unix seconds")
    exp: int = Field(description="expires at, unix seconds")
    nonce: str = Field(pattern=r"^[A-Za-z0-9_-]{22}$")
    approver: str = Field(min_length=1, max_length=80)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the one spelling that is hashed, MAC'd or signed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def b64u_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64u_decode(text: str) -> bytes:
    """Strict base64url without padding: raises ValueError unless ``text`` is the canonical encoding."""
    if not _B64U_RE.match(text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None
    if b64u_encode(data) != text:  # unused low bits set: a second spelling of the same bytes
        raise ValueError("not canonical base64url")
    return data


# -- local mode: the HMAC secret --------------------------------------------------------


def secret_path(settings: Settings) -> Path:
    """``[approval] secret_file`` or ``~/.config/mesh-mcp/approval.key``."""
    raw = settings.approval.secret_file
    return Path(raw).expanduser() if raw else DEFAULT_SECRET_PATH.expanduser()


def load_secret(settings: Settings, *, create: bool) -> bytes:
    """The local-mode HMAC secret; with ``create`` it is made (0600, 32 random bytes) when missing.

    The server verifies with ``create=False``: no secret file means no token was ever minted.
    """
    path = secret_path(settings)
    if not path.exists():
        if not create:
            raise TokenRefused(
                "no_secret",
                f"no approval secret at {path}: no token was ever minted here. "
                "A human must run `mesh-mcp approve PLAN_ID` at a terminal.",
            )
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # created concurrently: read it below
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
    check_private_file(path, "approval secret")
    text = path.read_text(encoding="ascii", errors="replace").strip()
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise MeshError(f"approval secret {path} is malformed (expected 64 hex characters): delete it to start over")
    return bytes.fromhex(text)


def _mac(secret: bytes, claims_bytes: bytes) -> bytes:
    return hmac.new(secret, DOMAIN + claims_bytes, hashlib.sha256).digest()


# -- minting and verifying ----------------------------------------------------------------


def mint_token(
    settings: Settings,
    *,
    plan_id: str,
    plan_sha256: str,
    plan_expires_at: datetime,
    approver: str,
    private_key: Ed25519PrivateKey | None = None,
    now: float | None = None,
) -> tuple[str, Claims]:
    """A token for one plan. ``local`` mode MACs with the secret (created if missing);
    ``signature`` mode needs ``private_key``. Expiry: ``[approval] token_ttl_s``, never
    beyond the plan's own expiry."""
    issued = int(now if now is not None else datetime.now().timestamp())
    expires = min(issued + settings.approval.token_ttl_s, int(plan_expires_at.timestamp()))
    if expires <= issued:
        raise RemediationRefused(f"plan {plan_id} has expired: propose it again")
    claims = Claims(
        v=TOKEN_VERSION,
        mode=settings.approval.mode,
        plan_id=plan_id,
        plan_sha256=plan_sha256,
        iat=issued,
        exp=expires,
        nonce=b64u_encode(secrets.token_bytes(16)),
        approver=approver,
    )
    body = canonical_json(claims.model_dump())
    if claims.mode == "local":
        proof = _mac(load_secret(settings, create=True), body)
    else:
        if private_key is None:
            raise MeshError("signature mode: an approver private key is needed to mint a token")
        proof = private_key.sign(DOMAIN + body)
    return f"{b64u_encode(body)}.{b64u_encode(proof)}", claims


def _parse(token: str) -> tuple[bytes, Claims, bytes]:
    malformed = TokenRefused(
        "malformed",
        "the approval token is malformed (altered or cut when pasted?): copy it again exactly as "
        "`mesh-mcp approve` printed it",
    )
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise malformed
    body_text, proof_text = token.split(".")
    try:
        body = b64u_decode(body_text)
        proof = b64u_decode(proof_text)
        data = json.loads(body.decode("utf-8"))
        claims = Claims.model_validate(data)
    except (ValueError, UnicodeDecodeError, ValidationError):
        raise malformed from None
    if canonical_json(claims.model_dump()) != body:
        raise malformed
    return body, claims, proof


def verify_token(
    settings: Settings,
    token: str | None,
    *,
    plan_id: str,
    plan_sha256: str,
    now: float | None = None,
) -> Claims:
    """The verified claims of ``token`` for this plan, or :class:`TokenRefused`.

    Checks, in order: present, well-formed, configured mode, MAC or signature (by a listed
    approver), plan id, plan hash, expiry. Does not consume the nonce (see :func:`consume_nonce`).
    """
    token = (token or "").strip()
    if not token:
        raise TokenRefused(
            "missing",
            f"no approval token: a human must run `mesh-mcp approve {plan_id}` at a terminal, check the plan "
            "and pass the printed token as approval_token",
        )
    body, claims, proof = _parse(token)
    mode = settings.approval.mode
    if claims.mode != mode:
        raise TokenRefused(
            "wrong_mode",
            f"this token was minted in {claims.mode} mode but the server requires {mode} mode "
            f"([approval] mode): mint a new one with `mesh-mcp approve {plan_id}`",
        )
    if mode == "local":
        expected = _mac(load_secret(settings, create=False), body)
        if len(proof) != len(expected) or not hmac.compare_digest(proof, expected):
            raise TokenRefused("bad_mac", "the approval token's MAC does not verify: it was altered or not minted here")
    else:
        key = approver_keys(settings).get(claims.approver)
        if key is None:
            raise TokenRefused(
                "unknown_approver",
                f"approver {claims.approver!r} is not listed in the trust file: only a listed approver "
                "can approve (its owner adds their public key there, then the server is restarted)",
            )
        try:
            key.verify(proof, DOMAIN + body)
        except InvalidSignature:
            raise TokenRefused(
                "bad_signature",
                f"the signature does not verify with approver {claims.approver!r}'s public key: the token was "
                "altered or signed with another key",
            ) from None
    if not hmac.compare_digest(claims.plan_id.encode(), plan_id.encode()):
        raise TokenRefused(
            "other_plan",
            f"this token approves plan {claims.plan_id}, not plan {plan_id}: each plan needs its own approval",
        )
    if not hmac.compare_digest(claims.plan_sha256.encode(), plan_sha256.encode()):
        raise TokenRefused(
            "plan_changed",
            f"plan {plan_id} changed after it was approved (its sha256 differs from the approved one): "
            "propose it again and have the new plan approved",
        )
    current = now if now is not None else datetime.now().timestamp()
    if current >= claims.exp:
        raise TokenRefused(
            "expired",
            f"the approval token expired at {datetime.fromtimestamp(claims.exp, UTC).isoformat(timespec='seconds')}: "
            f"have it re-approved with `mesh-mcp approve {plan_id}`",
        )
    return claims


# -- single use ------------------------------------------------------------------------


def nonces_path(settings: Settings) -> Path:
    return settings.resolved_state_dir / NONCES_FILE_NAME


@contextlib.contextmanager
def _nonce_lock(settings: Settings) -> Iterator[Path]:
    """The exclusive portable lock of ``used_nonces`` (sidecar ``used_nonces.lock``)."""
    path = nonces_path(settings)
    with exclusive(path, "used-nonces file"):
        yield path


def nonce_used(settings: Settings, nonce: str) -> bool:
    path = nonces_path(settings)
    if not os.path.lexists(path):
        return False
    with _nonce_lock(settings):
        return any(line.split(" ", 1)[0] == nonce for line in _nonce_lines(path))


def _nonce_lines(path: Path) -> list[str]:
    """The lines of ``used_nonces`` (none when missing); a symlink or FIFO there is refused, never waited on."""
    return read_state_bytes(path).decode("ascii").splitlines()


def _expired_entry(line: str, now: int) -> bool:
    """Whether a ``<nonce> <exp>`` line names a token expired before ``now`` (an unreadable line is kept)."""
    parts = line.split(" ")
    return len(parts) == 2 and parts[1].isdigit() and int(parts[1]) <= now


def consume_nonce(settings: Settings, claims: Claims, *, now: float | None = None) -> None:
    """Record the token's nonce; :class:`TokenRefused` (``reused``) when it was recorded before.

    Check and record happen under one exclusive lock, so two concurrent applies of the same
    token cannot both pass. Entries of expired tokens are pruned once the file is large
    (an expired token is refused anyway).
    """
    current = int(now if now is not None else datetime.now().timestamp())
    with _nonce_lock(settings) as path:
        lines = _nonce_lines(path)
        if any(line.split(" ", 1)[0] == claims.nonce for line in lines):
            raise TokenRefused(
                "reused",
                f"this approval token was already used: tokens are single-use. Have plan {claims.plan_id} "
                "(or a fresh one) approved again",
            )
        if len(lines) >= NONCES_PRUNE_LINES:
            keep = [ln for ln in lines if not _expired_entry(ln, current)]
            tmp = path.with_suffix(".tmp")
            fd = open_state_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "wb") as fh:
                fh.write("".join(f"{ln}\n" for ln in keep).encode("ascii"))
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        fd = open_state_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{claims.nonce} {claims.exp}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)


def describe_mode(settings: Settings) -> str:
    """One honest sentence on what the configured approval mode protects against."""
    if settings.approval.mode == "signature":
        count = len(settings.approval.approvers)
        if settings.approval.trust_file:
            where = settings.approval.trust_file
        else:
            from server.approval.trust import default_trust_path
            where = f"{default_trust_path()} (the default place)"
        text = (
            f"signature mode: tokens are Ed25519 signatures by one of {count} approver key(s) listed in the trust "
            f"file {where}, made with a passphrase the agent never sees; this gate holds as "
            "long as the agent cannot change the trust file or the server's code."
        )
        if settings.approval.allow_unprotected_approvers:
            text += (" WARNING: the server was started with --allow-unprotected-approvers: it applies plans even "
                     "when the trust file could be changed by the server's OS user.")
        return text
    return (
        "local mode: tokens are HMACs with a secret file readable by this OS user. This stops accidents, "
        "not a determined agent running as the same user; use [approval] mode = \"signature\" for a real gate."
    )
