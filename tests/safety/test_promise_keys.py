"""Promise: an approver key file is the documented format, private, and useless without its passphrase.

What ``server/approval/keys.py`` guarantees, checked on real files:

- a key file is three header lines (``mesh-mcp approver key v1``, ``approver: <id>``,
  ``kdf: scrypt n=.. r=.. p=.. salt=<base64url>``) and a standard encrypted PKCS8 PEM whose
  password is the hex of ``scrypt(passphrase, salt, n, r, p, dklen=32)``: rebuilt here with
  ``hashlib`` and ``cryptography`` alone, so a key file stays readable by any later version;
- it is created 0600 in a 0700 folder, never overwritten; ids, passphrases and scrypt costs are
  checked; a damaged, foreign or out-of-range file is refused with a sentence naming it;
- private files (secret, keys) are refused when not regular, not ours, or readable by others;
- public keys are base64 of the 32 raw bytes or a PEM, and a bad ``[approval] approvers`` entry
  is a configuration error naming the approver.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from server.approval.keys import (
    approver_keys,
    check_private_file,
    create_approver_key,
    fingerprint,
    key_file_approver,
    load_approver_key,
    parse_public_key,
    public_key_text,
    scrypt_cost_problem,
)
from server.config import load_settings
from server.errors import InvalidArgument, MeshError

PASS = "correct horse battery"
KEY_TEXT = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="  # a valid public key
N = 2**10  # the smallest cost the files accept: fast tests (the CLI's default is 2**17)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _raw(public) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _key_file(path: Path, approver: str, passphrase: str, *, n: int = N, r: int = 8, p: int = 1,
              key=None, salt: bytes = b"0123456789abcdef", header: str | None = None) -> Ed25519PrivateKey:
    """A key file written from the documented format alone (not by the code under test)."""
    key = key or Ed25519PrivateKey.generate()
    password = hashlib.scrypt(passphrase.encode(), salt=salt, n=n, r=r, p=p, maxmem=2**30, dklen=32).hex().encode()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(password)).decode("ascii")
    head = header if header is not None else (
        f"mesh-mcp approver key v1\napprover: {approver}\nkdf: scrypt n={n} r={r} p={p} salt={_b64u(salt)}\n")
    path.write_text(head + pem, encoding="ascii")
    os.chmod(path, 0o600)
    return key


# -- the key file ---------------------------------------------------------------------------


def test_a_new_key_file_is_the_documented_format(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "deep" / "alice.key"
    public = create_approver_key(path, "alice", PASS, scrypt_n=N)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    magic, approver, kdf, pem = path.read_text(encoding="ascii").split("\n", 3)
    assert (magic, approver) == ("mesh-mcp approver key v1", "approver: alice")
    assert kdf.startswith(f"kdf: scrypt n={N} r=8 p=1 salt=")
    salt_text = kdf.removeprefix(f"kdf: scrypt n={N} r=8 p=1 salt=")
    salt = base64.urlsafe_b64decode(salt_text + "=" * (-len(salt_text) % 4))
    assert len(salt) == 16 and _b64u(salt) == salt_text
    assert pem.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----\n")
    with pytest.raises((TypeError, ValueError)):  # the PEM is encrypted: no password, no key
        serialization.load_pem_private_key(pem.encode(), password=None)
    password = hashlib.scrypt(PASS.encode(), salt=salt, n=N, r=8, p=1, dklen=32).hex().encode()
    key = serialization.load_pem_private_key(pem.encode(), password=password)
    assert isinstance(key, Ed25519PrivateKey)
    assert public == base64.b64encode(_raw(key.public_key())).decode()
    who, loaded = load_approver_key(path, PASS)
    assert who == "alice" and _raw(loaded.public_key()) == _raw(key.public_key())
    assert key_file_approver(path) == "alice"


def test_each_key_file_has_its_own_key_and_salt(tmp_path: Path) -> None:
    first = create_approver_key(tmp_path / "a.key", "alice", PASS, scrypt_n=N)
    second = create_approver_key(tmp_path / "b.key", "alice", PASS, scrypt_n=N)
    assert first != second
    kdf = [(tmp_path / name).read_text(encoding="ascii").splitlines()[2] for name in ("a.key", "b.key")]
    assert kdf[0] != kdf[1]


@pytest.mark.parametrize("salt", [b"0123456789abcdef", b"0123456789", b"0123456789abcdefg"], ids=len)
def test_a_key_file_written_from_the_format_loads(tmp_path: Path, salt: bytes) -> None:
    """Compatibility: a v1 file made by any writer of the format (here: the test itself) is read,
    whatever the length of its salt (base64url without padding: 14, 22 and 23 characters here)."""
    key = _key_file(tmp_path / "bob.key", "bob@ops", PASS, salt=salt)
    who, loaded = load_approver_key(tmp_path / "bob.key", PASS)
    assert who == "bob@ops" and _raw(loaded.public_key()) == _raw(key.public_key())


@pytest.mark.parametrize(("n", "r", "p"), [(2**10, 1, 1), (2**11, 32, 1), (2**10, 8, 16)])
def test_scrypt_costs_inside_the_limits_are_read(tmp_path: Path, n: int, r: int, p: int) -> None:
    key = _key_file(tmp_path / "k", "bob", PASS, n=n, r=r, p=p)
    assert _raw(load_approver_key(tmp_path / "k", PASS)[1].public_key()) == _raw(key.public_key())


@pytest.mark.parametrize(("n", "r", "p", "why"), [
    (2**9, 8, 1, "n = 512: a power of two >= 1024"),
    (1536, 8, 1, "n = 1536: a power of two >= 1024"),
    (2**10, 0, 1, "r = 0, p = 1: r from 1 to 32, p from 1 to 16"),
    (2**10, 33, 1, "r = 33, p = 1: r from 1 to 32, p from 1 to 16"),
    (2**10, 8, 0, "r = 8, p = 0: r from 1 to 32, p from 1 to 16"),
    (2**10, 8, 17, "r = 8, p = 17: r from 1 to 32, p from 1 to 16"),
    # both crashed scrypt (a ValueError, no sentence) before they were checked here
    (2**16, 1, 1, "n = 65536 with r = 1: scrypt needs n < 2^16"),
    (2**21, 8, 1, "n = 2097152 with r = 8 needs 2048 MiB, more than the 1024 MiB allowed"),
    (2**23, 8, 1, "n = 8388608 with r = 8 needs 8192 MiB, more than the 1024 MiB allowed"),
])
def test_scrypt_costs_outside_the_limits_are_refused_before_stretching(tmp_path: Path, n: int, r: int,
                                                                       p: int, why: str) -> None:
    path = tmp_path / "k"
    _key_file(path, "bob", PASS, header=f"mesh-mcp approver key v1\napprover: bob\nkdf: scrypt n={n} r={r} p={p} "
                                        "salt=MDEyMzQ1Njc4OWFiY2RlZg\n")
    with pytest.raises(MeshError) as info:
        load_approver_key(path, PASS)
    assert str(info.value) == f"{path}: kdf parameters out of range ({why})"


@pytest.mark.parametrize(("n", "r", "p", "runs"), [
    (2**15, 1, 1, True), (2**16, 1, 1, False),  # scrypt's own n < 2^(16 r)
    (2**31, 2, 1, False), (2**32, 2, 1, False),
    (2**20, 8, 1, True), (2**21, 8, 1, False), (2**22, 2, 1, True), (2**22, 4, 1, False),  # 1 GiB, exactly
    (2**10, 1, 1, True), (2**10, 32, 16, True), (2**10, 32, 17, False), (2**10, 1, 0, False),
])
def test_the_scrypt_cost_limits_hold_to_the_exact_value(n: int, r: int, p: int, runs: bool) -> None:
    """At exactly 1 GiB (128 * r * n) a cost is accepted, one step above it is not. A key file at the limit
    is not stretched here (a whole GiB and seconds): the check that decides is called at the limit itself."""
    assert (scrypt_cost_problem(n, r, p) is None) is runs


def test_the_wrong_passphrase_is_refused(tmp_path: Path) -> None:
    create_approver_key(tmp_path / "a.key", "alice", PASS, scrypt_n=N)
    for wrong in ("correct horse batterY", PASS + " ", ""):
        with pytest.raises(MeshError) as info:
            load_approver_key(tmp_path / "a.key", wrong)
        assert str(info.value) == "wrong passphrase (or damaged key file)"


def test_a_non_ascii_passphrase_is_stretched_as_utf8(tmp_path: Path) -> None:
    key = _key_file(tmp_path / "k", "zoe", "mot de passe très long")
    assert _raw(load_approver_key(tmp_path / "k", "mot de passe très long")[1].public_key()) == _raw(key.public_key())
    create_approver_key(tmp_path / "made.key", "zoe", "mot de passe très long", scrypt_n=N)
    assert load_approver_key(tmp_path / "made.key", "mot de passe très long")[0] == "zoe"


@pytest.mark.parametrize(("header", "message"), [
    ("mesh-mcp approver key v2\napprover: bob\nkdf: scrypt n=1024 r=8 p=1 salt=MDEy\n",
     "{path} is not a mesh-mcp approver key (made by `mesh-mcp approver init`)"),
    ("mesh-mcp approver key v1\napprover bob\nkdf: scrypt n=1024 r=8 p=1 salt=MDEy\n",
     "{path} is not a mesh-mcp approver key (made by `mesh-mcp approver init`)"),
    ("mesh-mcp approver key v1\napprover: bob\nkdf: bcrypt n=1024 r=8 p=1 salt=MDEy\n", "{path}: unreadable kdf line"),
    ("mesh-mcp approver key v1\napprover: bob\nkdf: scrypt n=1024 r=8 p=1 salt=MD+y\n", "{path}: unreadable kdf line"),
])
def test_a_file_that_is_not_a_key_file_is_refused_by_name(tmp_path: Path, header: str, message: str) -> None:
    path = tmp_path / "k"
    _key_file(path, "bob", PASS, header=header)
    with pytest.raises(MeshError) as info:
        load_approver_key(path, PASS)
    assert str(info.value) == message.format(path=path)


def test_a_file_cut_before_its_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text("mesh-mcp approver key v1\napprover: bob\nkdf: scrypt n=1024 r=8 p=1 salt=MDEy", encoding="ascii")
    os.chmod(path, 0o600)
    with pytest.raises(MeshError, match=r"is not a mesh-mcp approver key \(made by"):
        load_approver_key(path, PASS)


def test_a_key_file_holding_another_kind_of_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k"
    _key_file(path, "bob", PASS, key=generate_private_key(SECP256R1()))
    with pytest.raises(MeshError) as info:
        load_approver_key(path, PASS)
    assert str(info.value) == f"{path} does not hold an Ed25519 key"


def test_missing_or_binary_key_files_are_refused_by_name(tmp_path: Path) -> None:
    missing = tmp_path / "none.key"
    with pytest.raises(MeshError) as info:
        load_approver_key(missing, PASS)
    assert str(info.value) == f"approver key {missing} not found: create one with `mesh-mcp approver init`"
    with pytest.raises(MeshError) as info:
        key_file_approver(missing)
    assert str(info.value) == (f"approver key {missing} not found: pass --key FILE (and --approver ID), or create "
                               "one with `mesh-mcp approver init`")
    for content in (b"\xff\xfe mesh-mcp approver key v1\n", "mesh-mcp approver key v1\napprover: bób\n".encode()):
        binary = tmp_path / "binary.key"  # not ASCII (the second one is valid UTF-8): not a key file
        binary.write_bytes(content)
        os.chmod(binary, 0o600)
        for read in (lambda b=binary: load_approver_key(b, PASS), lambda b=binary: key_file_approver(b)):
            with pytest.raises(MeshError) as info:
                read()
            assert str(info.value) == f"{binary} is not a mesh-mcp approver key"


def test_a_key_file_readable_by_others_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.key"
    create_approver_key(path, "alice", PASS, scrypt_n=N)
    os.chmod(path, 0o640)
    with pytest.raises(MeshError) as info:
        load_approver_key(path, PASS)
    assert str(info.value) == f"approver key {path} is readable by other users (mode 0o640): chmod 600 it"


def test_the_approver_of_a_key_file_is_read_without_its_passphrase(tmp_path: Path) -> None:
    path = tmp_path / "k"
    _key_file(path, "ignored", PASS, header="mesh-mcp approver key v1\napprover: carol  \nkdf: broken\n")
    assert key_file_approver(path) == "carol"
    for header in ("mesh-mcp approver key v1 \napprover: carol\n", "mesh-mcp approver key v1X\napprover: carol\n",
                   "mesh-mcp approver key v1\nowner: carol\n"):
        path.write_text(header, encoding="ascii")
        with pytest.raises(MeshError) as info:
            key_file_approver(path)
        assert str(info.value) == f"{path} is not a mesh-mcp approver key (made by `mesh-mcp approver init`)"
    os.chmod(path, 0o644)
    with pytest.raises(MeshError, match=r"^approver key .* is readable by other users \(mode 0o644\)"):
        key_file_approver(path)


def test_a_key_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "a.key"
    create_approver_key(path, "alice", PASS, scrypt_n=N)
    before = path.read_bytes()
    with pytest.raises(InvalidArgument) as info:
        create_approver_key(path, "alice", PASS, scrypt_n=N)
    assert str(info.value) == f"{path} already exists: choose another --out or remove it first"
    assert path.read_bytes() == before
    create_approver_key(tmp_path / "b.key", "bob", PASS, scrypt_n=N)  # the folder exists: another key is fine


@pytest.mark.parametrize("approver", ["a", "A.b_c@d-9", "x" * 64, "REX"])
def test_approver_ids_that_are_accepted(tmp_path: Path, approver: str) -> None:
    create_approver_key(tmp_path / "k", approver, PASS, scrypt_n=N)
    assert load_approver_key(tmp_path / "k", PASS)[0] == approver == key_file_approver(tmp_path / "k")


@pytest.mark.parametrize("approver", ["", "x" * 65, "bob smith", "bob\n", "bob:1", "bób", "bob/x"])
def test_approver_ids_that_are_refused(tmp_path: Path, approver: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        create_approver_key(tmp_path / "k", approver, PASS, scrypt_n=N)
    assert str(info.value) == "approver id: 1-64 characters among letters, digits and . _ @ -"
    assert not (tmp_path / "k").exists()


def test_the_passphrase_has_at_least_12_characters(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as info:
        create_approver_key(tmp_path / "k", "bob", "x" * 11, scrypt_n=N)
    assert str(info.value) == "the passphrase must have at least 12 characters"
    create_approver_key(tmp_path / "k", "bob", "x" * 12, scrypt_n=N)


@pytest.mark.parametrize("n", [0, 512, 1023, 1536, 3 * 2**10])
def test_the_scrypt_cost_is_a_power_of_two_of_at_least_1024(tmp_path: Path, n: int) -> None:
    with pytest.raises(InvalidArgument) as info:
        create_approver_key(tmp_path / "k", "bob", PASS, scrypt_n=n)
    assert str(info.value) == f"scrypt cost: n = {n}: a power of two >= 1024"


def test_a_scrypt_cost_over_the_memory_limit_is_refused_before_any_key_is_made(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as info:
        create_approver_key(tmp_path / "k", "bob", PASS, scrypt_n=2**21)
    assert str(info.value) == "scrypt cost: n = 2097152 with r = 8 needs 2048 MiB, more than the 1024 MiB allowed"
    assert not (tmp_path / "k").exists()


def test_the_default_scrypt_cost_is_2_to_the_17_and_such_a_key_loads(tmp_path: Path) -> None:
    """128 MiB of scrypt memory: above OpenSSL's default 32 MiB ceiling, which the stretching raises."""
    public = create_approver_key(tmp_path / "k", "bob", PASS)
    assert (tmp_path / "k").read_text(encoding="ascii").splitlines()[2].startswith("kdf: scrypt n=131072 r=8 p=1 ")
    assert public_key_text(load_approver_key(tmp_path / "k", PASS)[1].public_key()) == public


# -- public keys ------------------------------------------------------------------------------


def test_public_keys_as_base64_or_pem(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate().public_key()
    text = public_key_text(key)
    assert text == base64.b64encode(_raw(key)).decode() and len(text) == 44
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    for form in (text, f"  {text}\n", pem, f"\n{pem}  "):
        assert _raw(parse_public_key(form)) == _raw(key)
    assert fingerprint(key) == "SHA256:" + hashlib.sha256(_raw(key)).hexdigest()[:16]


@pytest.mark.parametrize(("text", "message"), [
    ("not base64!", "^not base64$"),
    (KEY_TEXT[:10] + "!" + KEY_TEXT[10:], "^not base64$"),  # a stray character is refused, not dropped
    (KEY_TEXT[:10] + " " + KEY_TEXT[10:], "^not base64$"),
    (base64.b64encode(b"\x01" * 31).decode(), "^an Ed25519 public key is 32 bytes, this one is 31$"),
    (base64.b64encode(b"\x01" * 33).decode(), "^an Ed25519 public key is 32 bytes, this one is 33$"),
    (X25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
     "^not an Ed25519 public key$"),
])
def test_a_public_key_that_is_not_ed25519_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_public_key(text)


def test_a_bad_approvers_entry_names_the_approver(tmp_path: Path) -> None:
    good = public_key_text(Ed25519PrivateKey.generate().public_key())
    settings = load_settings(environ={}, overrides={
        "state_dir": str(tmp_path / "state"), "approval": {"mode": "signature", "approvers": {"alice": good}}})
    assert list(approver_keys(settings)) == ["alice"]
    bad = settings.model_copy(update={"approval": settings.approval.model_copy(
        update={"approvers": {"alice": good, "bob": "AAAA"}})})
    with pytest.raises(MeshError) as info:
        approver_keys(bad)
    assert str(info.value) == ("[approval] approvers.bob: an Ed25519 public key is 32 bytes, this one is 3; paste the "
                               "line printed by `mesh-mcp approver init`")


# -- private files ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700])
def test_a_private_file_may_have_any_owner_bits(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    os.chmod(path, mode)
    check_private_file(path, "approval secret")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o610, 0o601, 0o620, 0o602])
def test_a_file_other_users_can_reach_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    os.chmod(path, mode)
    with pytest.raises(MeshError) as info:
        check_private_file(path, "approval secret")
    assert str(info.value) == f"approval secret {path} is readable by other users (mode {oct(mode)}): chmod 600 it"


def test_a_folder_is_not_a_private_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir(mode=0o700)
    with pytest.raises(MeshError) as info:
        check_private_file(tmp_path / "d", "approver key")
    assert str(info.value) == f"approver key {tmp_path / 'd'} is not a regular file"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    os.chmod(path, 0o600)
    os.chown(path, 54321, -1)
    with pytest.raises(MeshError) as info:
        check_private_file(path, "approver key")
    assert str(info.value) == f"approver key {path} belongs to another user (uid 54321): refusing to use it"
