"""Approval tokens: minting, strict verification, single use, both modes; the audit log chain."""

from __future__ import annotations

import json
import os
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from server.approval.audit import AuditLog
from server.approval.keys import create_approver_key, load_approver_key, public_key_text
from server.approval.tokens import (
    Claims,
    TokenRefused,
    b64u_decode,
    b64u_encode,
    canonical_json,
    consume_nonce,
    load_secret,
    mint_token,
    verify_token,
)
from server.config import Settings, load_settings
from server.errors import InvalidArgument, MeshError

PLAN = "p-20261130-021033-0a1b2c3d"
OTHER = "p-20261130-021034-0a1b2c3e"
SHA = "ab" * 32
FAST_N = 2**10  # scrypt cost for tests only; the CLI default is 2**17


def local_settings(tmp_path: Path, **approval) -> Settings:
    approval.setdefault("secret_file", str(tmp_path / "cfg" / "approval.key"))
    return load_settings(environ={}, overrides={"state_dir": str(tmp_path / "state"), "approval": approval})


def plan_expiry(hours: int = 1) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


def mint(settings: Settings, **kw) -> tuple[str, Claims]:
    args = {"plan_id": PLAN, "plan_sha256": SHA, "plan_expires_at": plan_expiry(), "approver": "local:test"}
    args.update(kw)
    return mint_token(settings, **args)


def refused(settings: Settings, token: str, plan_id: str = PLAN, sha: str = SHA, now: float | None = None) -> str:
    with pytest.raises(TokenRefused) as info:
        verify_token(settings, token, plan_id=plan_id, plan_sha256=sha, now=now)
    return info.value.reason


def test_local_token_roundtrip_and_secret_file_is_private(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    token, claims = mint(settings)
    assert verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA) == claims
    secret = tmp_path / "cfg" / "approval.key"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    assert secret.read_text().strip() not in token  # the secret never travels in the token
    assert claims.exp - claims.iat == settings.approval.token_ttl_s


def test_secret_readable_by_others_is_refused(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    load_secret(settings, create=True)
    os.chmod(tmp_path / "cfg" / "approval.key", 0o644)
    with pytest.raises(MeshError, match="chmod 600"):
        load_secret(settings, create=False)


def test_no_secret_means_no_token_was_minted_here(tmp_path: Path) -> None:
    minted_elsewhere, _ = mint(local_settings(tmp_path / "a"))
    assert refused(local_settings(tmp_path / "b"), minted_elsewhere) == "no_secret"


def test_each_refusal_reason(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    token, claims = mint(settings)
    assert refused(settings, "") == "missing"
    assert refused(settings, "not-a-token") == "malformed"
    assert refused(settings, token, plan_id=OTHER) == "other_plan"
    assert refused(settings, token, sha="cd" * 32) == "plan_changed"
    assert refused(settings, token, now=claims.exp + 1) == "expired"
    # claims rewritten to another plan, MAC kept: the MAC no longer verifies
    body = json.loads(b64u_decode(token.split(".")[0]))
    body["plan_id"] = OTHER
    forged = b64u_encode(canonical_json(body)) + "." + token.split(".")[1]
    assert refused(settings, forged, plan_id=OTHER) == "bad_mac"
    # the same claims spelled with spaces: refused as non-canonical before any MAC check
    spaced = b64u_encode(json.dumps(json.loads(b64u_decode(token.split(".")[0]))).encode())
    assert refused(settings, spaced + "." + token.split(".")[1]) == "malformed"


def test_token_expiry_never_exceeds_the_plan(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    _, claims = mint(settings, plan_expires_at=datetime.now(UTC) + timedelta(seconds=45))
    assert claims.exp - claims.iat <= 45
    with pytest.raises(MeshError, match="expired"):
        mint(settings, plan_expires_at=datetime.now(UTC) - timedelta(seconds=1))


def test_tokens_are_single_use(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    token, claims = mint(settings)
    consume_nonce(settings, verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA))
    with pytest.raises(TokenRefused) as info:
        consume_nonce(settings, claims)
    assert info.value.reason == "reused"
    _, other_claims = mint(settings)
    consume_nonce(settings, other_claims)  # another token of the same plan is a different nonce


def test_nonce_file_prunes_expired_entries(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    path = settings.resolved_state_dir / "used_nonces"
    path.parent.mkdir(parents=True)
    past = int(time.time()) - 10
    path.write_text("".join(f"n{i:021d} {past}\n" for i in range(4999)) + "garbled line\n")
    _, claims = mint(settings)
    consume_nonce(settings, claims)
    lines = path.read_text().splitlines()
    assert lines == ["garbled line", f"{claims.nonce} {claims.exp}"]  # an unreadable line is kept, not a crash


def signature_settings(tmp_path: Path, approvers: dict[str, str]) -> Settings:
    return load_settings(environ={}, overrides={
        "state_dir": str(tmp_path / "state"), "approval": {"mode": "signature", "approvers": approvers}})


def test_signature_mode(tmp_path: Path) -> None:
    alice_pub = create_approver_key(tmp_path / "alice.key", "alice", "correct horse battery", scrypt_n=FAST_N)
    mallory_pub = create_approver_key(tmp_path / "mallory.key", "mallory", "mallory's own pass", scrypt_n=FAST_N)
    settings = signature_settings(tmp_path, {"alice": alice_pub})
    assert stat.S_IMODE((tmp_path / "alice.key").stat().st_mode) == 0o600
    with pytest.raises(MeshError, match="wrong passphrase"):
        load_approver_key(tmp_path / "alice.key", "wrong passphrase!")
    who, alice = load_approver_key(tmp_path / "alice.key", "correct horse battery")
    assert who == "alice" and public_key_text(alice.public_key()) == alice_pub

    token, _ = mint(settings, approver="alice", private_key=alice)
    assert verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA).approver == "alice"

    _, mallory = load_approver_key(tmp_path / "mallory.key", "mallory's own pass")
    unlisted, _ = mint(settings, approver="mallory", private_key=mallory)
    assert refused(settings, unlisted) == "unknown_approver"
    impersonation, _ = mint(settings, approver="alice", private_key=mallory)
    assert refused(settings, impersonation) == "bad_signature"
    # a local-mode token (HMAC with the readable secret) is no signature: downgrade refused
    local_token, _ = mint(local_settings(tmp_path))
    assert refused(settings, local_token) == "wrong_mode"
    assert mallory_pub != alice_pub


def test_approver_key_rules(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="at least 12"):
        create_approver_key(tmp_path / "k", "bob", "short", scrypt_n=FAST_N)
    with pytest.raises(InvalidArgument, match="approver id"):
        create_approver_key(tmp_path / "k", "bob smith", "long enough passphrase", scrypt_n=FAST_N)
    create_approver_key(tmp_path / "k", "bob", "long enough passphrase", scrypt_n=FAST_N)
    with pytest.raises(InvalidArgument, match="already exists"):
        create_approver_key(tmp_path / "k", "bob", "long enough passphrase", scrypt_n=FAST_N)


# -- property-based ------------------------------------------------------------------------

_state: dict[str, object] = {}


def _fixture_token(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str]:
    if "token" not in _state:
        base = tmp_path_factory.mktemp("prop")
        settings = local_settings(base)
        _state["settings"], _state["token"] = settings, mint(settings)[0]
        alice_pub = create_approver_key(base / "alice.key", "alice", "correct horse battery", scrypt_n=FAST_N)
        sig_settings = signature_settings(base, {"alice": alice_pub})
        _, key = load_approver_key(base / "alice.key", "correct horse battery")
        _state["sig_settings"], _state["sig_token"] = sig_settings, mint(sig_settings, approver="alice",
                                                                       private_key=key)[0]
    return _state["settings"], _state["token"]  # type: ignore[return-value]


@pytest.fixture
def tokens(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Settings, str]]:
    _fixture_token(tmp_path_factory)
    return [(_state["settings"], _state["token"]), (_state["sig_settings"], _state["sig_token"])]  # type: ignore[list-item]


PROP = hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROP
@given(data=st.data())
def test_any_single_character_change_is_refused(tokens, data) -> None:
    for settings, token in tokens:
        verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA)  # the original verifies
        index = data.draw(st.integers(0, len(token) - 1))
        original = token[index]
        replacement = data.draw(st.characters(codec="utf-8").filter(lambda c, o=original: c != o))
        changed = token[:index] + replacement + token[index + 1 :]
        with pytest.raises(TokenRefused):
            verify_token(settings, changed, plan_id=PLAN, plan_sha256=SHA)


@PROP
@given(data=st.data())
def test_any_byte_flip_in_the_decoded_parts_is_refused(tokens, data) -> None:
    for settings, token in tokens:
        part = data.draw(st.integers(0, 1))
        raw = bytearray(b64u_decode(token.split(".")[part]))
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] ^= data.draw(st.integers(1, 255))
        pieces = token.split(".")
        pieces[part] = b64u_encode(bytes(raw))
        with pytest.raises(TokenRefused):
            verify_token(settings, ".".join(pieces), plan_id=PLAN, plan_sha256=SHA)


@PROP
@given(data=st.data())
def test_truncation_or_insertion_is_refused(tokens, data) -> None:
    for settings, token in tokens:
        cut = data.draw(st.integers(0, len(token) - 1))
        with pytest.raises(TokenRefused):
            verify_token(settings, token[:cut], plan_id=PLAN, plan_sha256=SHA)
        extra = data.draw(st.text(min_size=1, max_size=3).filter(lambda t: t.strip() != ""))
        at = data.draw(st.integers(1, len(token) - 1))
        with pytest.raises(TokenRefused):
            verify_token(settings, token[:at] + extra + token[at:], plan_id=PLAN, plan_sha256=SHA)


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.one_of(st.text(max_size=600), st.from_regex(r"[A-Za-z0-9_-]{0,300}\.[A-Za-z0-9_-]{0,100}")))
def test_arbitrary_input_is_refused_cleanly(tokens, garbage) -> None:
    for settings, _ in tokens:
        with pytest.raises(TokenRefused):  # never another exception, never accepted
            verify_token(settings, garbage, plan_id=PLAN, plan_sha256=SHA)


# -- audit log ----------------------------------------------------------------------------


def test_audit_log_is_chained_and_refuses_secrets(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    for i in range(3):
        log.record("step", plan_id=PLAN, step=i, result="done")
    assert log.verify_chain() == (True, "3 records")
    with pytest.raises(ValueError, match="secrets"):
        log.record("approved", plan_id=PLAN, token="x")
    lines = (tmp_path / "audit.log").read_text().splitlines()
    lines[1] = lines[1].replace('"done"', '"failed"')
    (tmp_path / "audit.log").write_text("\n".join(lines) + "\n")
    ok, where = log.verify_chain()
    assert not ok and "line 3" in where
