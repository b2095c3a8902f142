"""Promise: an approval token is refused *at* its expiry instant, and plans expire the same way.

Boundaries are tested at the limit and one unit (one second, and one millisecond) each
side, through the public functions the server calls (``mint_token``, ``verify_token``,
``consume_nonce``, ``store.is_expired``).
"""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from server.approval.tokens import (
    TokenRefused,
    consume_nonce,
    describe_mode,
    mint_token,
    nonce_used,
    nonces_path,
    verify_token,
)
from server.config import Settings, load_settings
from server.errors import RemediationRefused
from tools.remediation import store

PLAN = "p-20261130-021033-0a1b2c3d"
SHA = "ab" * 32
T0 = 1_900_000_000  # a fixed "now" (2030-03-17), so every boundary is exact


def _settings(tmp_path: Path, ttl: int = 600) -> Settings:
    return load_settings(environ={}, overrides={
        "state_dir": str(tmp_path / "state"),
        "approval": {"secret_file": str(tmp_path / "cfg" / "approval.key"), "token_ttl_s": ttl},
    })


def _mint(settings: Settings, *, now: float = T0, plan_expires_in: float = 86_400):
    return mint_token(settings, plan_id=PLAN, plan_sha256=SHA, approver="local:test", now=now,
                      plan_expires_at=datetime.fromtimestamp(T0 + plan_expires_in, UTC))


def _verify(settings: Settings, token: str, now: float):
    return verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA, now=now)


@pytest.mark.parametrize("delta", [-1, -0.001])
def test_a_token_is_accepted_just_before_its_expiry(tmp_path: Path, delta: float) -> None:
    settings = _settings(tmp_path)
    token, claims = _mint(settings)
    assert claims.exp == T0 + 600
    assert _verify(settings, token, now=claims.exp + delta).nonce == claims.nonce


@pytest.mark.parametrize("delta", [0, 0.001, 1])
def test_a_token_is_refused_at_and_after_its_expiry(tmp_path: Path, delta: float) -> None:
    settings = _settings(tmp_path)
    token, claims = _mint(settings)
    with pytest.raises(TokenRefused) as info:
        _verify(settings, token, now=claims.exp + delta)
    assert info.value.reason == "expired"


def test_the_token_lifetime_is_the_configured_ttl(tmp_path: Path) -> None:
    settings = _settings(tmp_path, ttl=90)
    token, claims = _mint(settings)
    assert (claims.iat, claims.exp) == (T0, T0 + 90)
    _verify(settings, token, now=T0 + 89)
    with pytest.raises(TokenRefused):
        _verify(settings, token, now=T0 + 90)


@pytest.mark.parametrize("plan_left", [1, 30, 599])
def test_a_token_never_outlives_its_plan(tmp_path: Path, plan_left: int) -> None:
    settings = _settings(tmp_path, ttl=600)
    token, claims = _mint(settings, plan_expires_in=plan_left)
    assert claims.exp == T0 + plan_left
    _verify(settings, token, now=T0 + plan_left - 1)
    with pytest.raises(TokenRefused):
        _verify(settings, token, now=T0 + plan_left)


@pytest.mark.parametrize("plan_left", [0, -1])
def test_no_token_for_a_plan_at_or_past_its_expiry(tmp_path: Path, plan_left: int) -> None:
    with pytest.raises(RemediationRefused, match="expired"):
        _mint(_settings(tmp_path), plan_expires_in=plan_left)


@pytest.mark.parametrize(("offset", "expired"), [(-1, False), (-0.001, False), (0, True), (0.001, True), (1, True)])
def test_a_plan_expires_at_its_expiry_instant(offset: float, expired: bool) -> None:
    expires = datetime.fromtimestamp(T0, UTC)
    plan = type("P", (), {"expires_at": expires.isoformat()})()
    assert store.is_expired(plan, now=expires + timedelta(seconds=offset)) is expired  # type: ignore[arg-type]


def test_pruning_the_nonce_file_never_forgets_a_token_still_valid(tmp_path: Path) -> None:
    """Once the file is large, entries of expired tokens are pruned; tokens valid one second more are kept."""
    settings = _settings(tmp_path)
    _, at_limit = _mint(settings, now=T0 - 600)  # exp == T0: refused at T0 anyway, may go
    _, valid = _mint(settings, now=T0 - 599)  # exp == T0 + 1: still valid at T0, must stay
    _, later = _mint(settings, now=T0 - 100)  # exp == T0 + 500
    for claims in (at_limit, valid, later):
        consume_nonce(settings, claims, now=claims.iat)
    path = nonces_path(settings)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with path.open("a", encoding="ascii") as fh:  # documented format: one "<nonce> <exp>" line per used token
        fh.write("".join(f"n{i:021d} {T0 - 10}\n" for i in range(6000)))
    _, fresh = _mint(settings)
    consume_nonce(settings, fresh, now=T0)  # the file is past its pruning size: this prunes
    text = path.read_text(encoding="ascii")
    assert text.splitlines() == [f"{valid.nonce} {valid.exp}", f"{later.nonce} {later.exp}",
                                 f"{fresh.nonce} {fresh.exp}"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for claims in (valid, later, fresh):
        assert nonce_used(settings, claims.nonce)
        with pytest.raises(TokenRefused, match=r"already used: tokens are single-use\. Have plan p-\S+ "
                                               r"\(or a fresh one\) approved again$") as info:
            consume_nonce(settings, claims, now=T0)
        assert info.value.reason == "reused"
    assert not nonce_used(settings, at_limit.nonce)


def test_nonce_used_on_a_fresh_state(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    _, claims = _mint(settings)
    assert nonce_used(settings, claims.nonce) is False
    consume_nonce(settings, claims, now=T0)
    assert nonce_used(settings, claims.nonce) is True
    assert nonce_used(settings, "x" * 22) is False


def test_the_approval_mode_is_described_honestly(tmp_path: Path) -> None:
    local = _settings(tmp_path)
    assert describe_mode(local) == (
        "local mode: tokens are HMACs with a secret file readable by this OS user. This stops accidents, "
        "not a determined agent running as the same user; use [approval] mode = \"signature\" for a real gate.")
    from server.approval.keys import create_approver_key

    public = create_approver_key(tmp_path / "alice.key", "alice", "correct horse battery", scrypt_n=2**10)
    signature = load_settings(environ={}, overrides={
        "state_dir": str(tmp_path / "state"), "approval": {"mode": "signature", "approvers": {"alice": public}}})
    described = describe_mode(signature)
    assert described.startswith("signature mode: tokens are Ed25519 signatures by one of 1 approver key(s)")
    assert "a passphrase the agent never sees" in described
    assert "as long as the agent cannot change the trust file or the server's code" in described
