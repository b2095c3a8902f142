"""Approver keys of the ``signature`` approval mode: key files and listed public keys.

An approver key file (``mesh-mcp approver init``) is a short text header followed by a
standard encrypted PKCS8 PEM of an Ed25519 private key::

    mesh-mcp approver key v1
    approver: alice
    kdf: scrypt n=131072 r=8 p=1 salt=<base64url>
    -----BEGIN ENCRYPTED PRIVATE KEY-----
    ...

The PEM is encrypted with ``BestAvailableEncryption`` (PBKDF2 + AES-256), whose password
is the passphrase first stretched with scrypt (about 0.4 s and 128 MiB per guess at the
default cost): PKCS8's own PBKDF2 runs only 2048 iterations, too few against an agent that
can read the file and guess offline. The file is created 0600 and never overwritten.

Public keys are listed in ``[approval] approvers`` as base64 of the 32 raw bytes (or PEM).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from server.errors import InvalidArgument, MeshError
from server.filelocks import IS_POSIX, PRIVATE_FILES_NOTE  # noqa: F401 (documented above)

if TYPE_CHECKING:
    from server.config import Settings

APPROVER_ID_RE = re.compile(r"\A[A-Za-z0-9._@-]{1,64}\Z")  # \Z: "$" would also match before a final newline
MIN_PASSPHRASE_CHARS = 12
KEY_FILE_MAGIC = "mesh-mcp approver key v1"
DEFAULT_SCRYPT_N = 2**17
"""scrypt cost of the key file's passphrase stretching: about 0.4 s and 128 MiB per guess."""
MAX_SCRYPT_MEMORY = 2**30
"""the most memory a key file's scrypt may need (``128 * r * n`` bytes): 1 GiB, eight times the default"""


def scrypt_cost_problem(n: int, r: int, p: int) -> str | None:
    """Why scrypt cannot (or should not) run with these costs; None when it can.

    ``n`` a power of two from 1024, ``1 <= r <= 32``, ``1 <= p <= 16``; scrypt itself needs
    ``n < 2**(16 r)``, and ``128 * r * n`` bytes of memory, at most :data:`MAX_SCRYPT_MEMORY`.
    """
    if n < 2**10 or n & (n - 1):
        return f"n = {n}: a power of two >= 1024"
    if not 1 <= r <= 32 or not 1 <= p <= 16:
        return f"r = {r}, p = {p}: r from 1 to 32, p from 1 to 16"
    if n >= 2 ** (16 * r):
        return f"n = {n} with r = {r}: scrypt needs n < 2^{16 * r}"
    if 128 * r * n > MAX_SCRYPT_MEMORY:
        return (f"n = {n} with r = {r} needs {128 * r * n // 2**20} MiB, more than the "
                f"{MAX_SCRYPT_MEMORY // 2**20} MiB allowed")
    return None


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def check_private_file(path: Path, what: str) -> None:
    """Refuse a file that is not regular, not ours, or readable by group/others.

    Owner and mode are POSIX notions: on Windows only "regular file" is checked, and the
    file is protected by the ACL of the user's profile folder (:data:`PRIVATE_FILES_NOTE`).
    """
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise MeshError(f"{what} {path} is not a regular file")
    if not IS_POSIX:
        return  # PRIVATE_FILES_NOTE
    if info.st_uid != os.geteuid():
        raise MeshError(f"{what} {path} belongs to another user (uid {info.st_uid}): refusing to use it")
    if info.st_mode & 0o077:
        raise MeshError(f"{what} {path} is readable by other users (mode {oct(info.st_mode & 0o777)}): chmod 600 it")


def public_key_text(key: Ed25519PublicKey) -> str:
    """The raw 32-byte public key, base64 (the form written in ``[approval] approvers``)."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def fingerprint(key: Ed25519PublicKey) -> str:
    """``SHA256:<first 16 hex>`` of the raw public key, to tell keys apart on screen."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "SHA256:" + hashlib.sha256(raw).hexdigest()[:16]


def parse_public_key(text: str) -> Ed25519PublicKey:
    """An Ed25519 public key from base64 of the 32 raw bytes, or a PEM SubjectPublicKeyInfo."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_public_key(text.encode("ascii"))
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("not an Ed25519 public key")
        return key
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not base64") from None
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, this one is {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def approver_keys(settings: Settings) -> dict[str, Ed25519PublicKey]:
    """``[approval] approvers`` parsed; a bad entry is a configuration error naming it."""
    keys: dict[str, Ed25519PublicKey] = {}
    for approver, text in settings.approval.approvers.items():
        try:
            keys[approver] = parse_public_key(text)
        except ValueError as exc:
            raise MeshError(
                f"[approval] approvers.{approver}: {exc}; paste the line printed by `mesh-mcp approver init`"
            ) from None
    return keys


def key_file_approver(path: Path) -> str:
    """The approver id in the header of key file ``path`` (no passphrase needed); MeshError if unusable."""
    try:
        check_private_file(path, "approver key")
        with open(path, encoding="ascii") as fh:
            magic, approver = fh.readline().rstrip("\n"), fh.readline().rstrip("\n")
    except FileNotFoundError:
        raise MeshError(f"approver key {path} not found: pass --key FILE (and --approver ID), or create one with "
                        "`mesh-mcp approver init`") from None
    except UnicodeDecodeError:
        raise MeshError(f"{path} is not a mesh-mcp approver key") from None
    if magic != KEY_FILE_MAGIC or not approver.startswith("approver: "):
        raise MeshError(f"{path} is not a mesh-mcp approver key (made by `mesh-mcp approver init`)")
    return approver.removeprefix("approver: ").strip()


def _stretch(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    derived = hashlib.scrypt(
        passphrase.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=256 * 1024 * 1024 + 128 * r * n, dklen=32
    )
    return derived.hex().encode("ascii")


def create_approver_key(path: Path, approver: str, passphrase: str, *, scrypt_n: int = DEFAULT_SCRYPT_N) -> str:
    """Write a new passphrase-protected Ed25519 key to ``path`` (0600, never overwritten).

    Returns the public key text for ``[approval] approvers``. The file is a short header
    (approver id, scrypt parameters and salt) followed by a standard encrypted PKCS8 PEM
    whose password is the scrypt-stretched passphrase.
    """
    if not APPROVER_ID_RE.match(approver):
        raise InvalidArgument("approver id: 1-64 characters among letters, digits and . _ @ -")
    if len(passphrase) < MIN_PASSPHRASE_CHARS:
        raise InvalidArgument(f"the passphrase must have at least {MIN_PASSPHRASE_CHARS} characters")
    r, p = 8, 1
    if problem := scrypt_cost_problem(scrypt_n, r, p):
        raise InvalidArgument(f"scrypt cost: {problem}")
    key = Ed25519PrivateKey.generate()
    salt = secrets.token_bytes(16)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(_stretch(passphrase, salt, scrypt_n, r, p)),
    ).decode("ascii")
    header = (
        f"{KEY_FILE_MAGIC}\napprover: {approver}\n"
        f"kdf: scrypt n={scrypt_n} r={r} p={p} salt={_b64u(salt)}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InvalidArgument(f"{path} already exists: choose another --out or remove it first") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(header + pem)
        fh.flush()
        os.fsync(fh.fileno())
    return public_key_text(key.public_key())


_KDF_RE = re.compile(r"^kdf: scrypt n=(\d+) r=(\d+) p=(\d+) salt=([A-Za-z0-9_-]+)$")


def load_approver_key(path: Path, passphrase: str) -> tuple[str, Ed25519PrivateKey]:
    """``(approver id, private key)`` from a key file written by :func:`create_approver_key`."""
    try:
        check_private_file(path, "approver key")
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise MeshError(f"approver key {path} not found: create one with `mesh-mcp approver init`") from None
    except UnicodeDecodeError:
        raise MeshError(f"{path} is not a mesh-mcp approver key") from None
    lines = text.split("\n", 3)
    if len(lines) < 4 or lines[0] != KEY_FILE_MAGIC or not lines[1].startswith("approver: "):
        raise MeshError(f"{path} is not a mesh-mcp approver key (made by `mesh-mcp approver init`)")
    match = _KDF_RE.match(lines[2])
    if match is None:
        raise MeshError(f"{path}: unreadable kdf line")
    n, r, p = (int(match.group(i)) for i in (1, 2, 3))
    if problem := scrypt_cost_problem(n, r, p):
        raise MeshError(f"{path}: kdf parameters out of range ({problem})")
    password = _stretch(passphrase, _unb64u(match.group(4)), n, r, p)
    try:
        key = serialization.load_pem_private_key(lines[3].encode("ascii"), password=password)
    except (ValueError, TypeError):
        raise MeshError("wrong passphrase (or damaged key file)") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise MeshError(f"{path} does not hold an Ed25519 key")
    return lines[1].removeprefix("approver: ").strip(), key
