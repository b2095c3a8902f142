"""Promise: an approval token approves one plan, once, for a while, and has exactly one spelling.

What ``server/approval/tokens.py`` guarantees, checked through its public functions on real files:

- the documented format: ``b64url(canonical claims) . b64url(proof)``, the proof an HMAC-SHA256
  (local mode, with the 0600 secret file) or an Ed25519 signature (signature mode) of
  ``DOMAIN + claims``; a tool outside mesh-mcp can check a token from this description alone;
- strict parsing: base64url without padding and with no second spelling, canonical JSON only;
  a change at any position of a token is refused (every position tried, not a sample);
- the checks run in the documented order and each refusal says what happened and what to do;
- a token is single use: its nonce is recorded in ``<state_dir>/used_nonces`` (0600) under a lock,
  also when two processes race; expired entries are pruned once the file reaches 5,000 lines;
- the local secret is made once (0600 in a 0700 folder, 64 hex), and a damaged one is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import multiprocessing
import os
import re
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from server.approval.keys import create_approver_key, load_approver_key
from server.approval.tokens import (
    DOMAIN,
    Claims,
    TokenRefused,
    b64u_decode,
    b64u_encode,
    canonical_json,
    consume_nonce,
    describe_mode,
    load_secret,
    mint_token,
    nonce_used,
    nonces_path,
    secret_path,
    verify_token,
)
from server.config import Settings, load_settings
from server.errors import MeshError, RemediationRefused

PLAN = "p-20261130-021033-0a1b2c3d"
OTHER = "p-20261130-021034-0a1b2c3e"
SHA = "ab" * 32
T0 = 1_900_000_000  # a fixed "now" (2030-03-17T17:46:40Z)
PLAN_EXPIRES = datetime.fromtimestamp(T0 + 86_400, UTC)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """Group and others could read new files: 0600 / 0700 must come from the code, not the umask."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _local(tmp_path: Path, **approval) -> Settings:
    approval.setdefault("secret_file", str(tmp_path / "cfg" / "deep" / "approval.key"))
    return load_settings(environ={}, overrides={"state_dir": str(tmp_path / "state"), "approval": approval})


def _signature(tmp_path: Path, **approval) -> tuple[Settings, object]:
    public = create_approver_key(tmp_path / "alice.key", "alice", "correct horse battery", scrypt_n=2**10)
    _, key = load_approver_key(tmp_path / "alice.key", "correct horse battery")
    approval = {"mode": "signature", "approvers": {"alice": public}, **approval}
    return load_settings(environ={}, overrides={"state_dir": str(tmp_path / "state"), "approval": approval}), key


def _mint(settings: Settings, *, now: float = T0, plan_id: str = PLAN, **kw):
    kw.setdefault("approver", "local:test")
    return mint_token(settings, plan_id=plan_id, plan_sha256=SHA, plan_expires_at=PLAN_EXPIRES, now=now, **kw)


def _refusal(settings: Settings, token: str | None, *, plan_id: str = PLAN, sha: str = SHA,
             now: float | None = T0 + 1) -> TokenRefused:
    with pytest.raises(TokenRefused) as info:
        verify_token(settings, token, plan_id=plan_id, plan_sha256=sha, now=now)
    return info.value


def _b64u(data: bytes) -> str:
    """The reference encoding, from the standard library: url-safe alphabet, padding removed."""
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


# -- the format -------------------------------------------------------------------------------


def test_a_local_token_is_the_documented_hmac_of_its_canonical_claims(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    token, claims = _mint(settings, now=T0 + 0.9)  # issued at whole seconds
    body_text, proof_text = token.split(".")
    body = base64.urlsafe_b64decode(body_text + "=" * (-len(body_text) % 4))
    data = json.loads(body)
    assert data == {"v": 1, "mode": "local", "plan_id": PLAN, "plan_sha256": SHA, "iat": T0, "exp": T0 + 600,
                    "nonce": claims.nonce, "approver": "local:test"}
    assert body == json.dumps(data, sort_keys=True, separators=(",", ":")).encode()  # the one spelling
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", claims.nonce)
    secret = bytes.fromhex(secret_path(settings).read_text(encoding="ascii").strip())
    expected = hmac.new(secret, b"mesh-mcp approval token v1\n" + body, hashlib.sha256).digest()
    assert proof_text == _b64u(expected)
    assert token == f"{_b64u(body)}.{_b64u(expected)}"
    assert verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA, now=T0 + 1) == claims


def test_a_signature_token_is_an_ed25519_signature_of_the_same_message(tmp_path: Path) -> None:
    settings, key = _signature(tmp_path)
    token, claims = _mint(settings, approver="alice", private_key=key)
    body_text, proof_text = token.split(".")
    body = b64u_decode(body_text)
    assert json.loads(body)["mode"] == "signature" and claims.mode == "signature"
    key.public_key().verify(b64u_decode(proof_text), DOMAIN + body)  # raises if it is not that signature
    assert verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA, now=T0 + 1).approver == "alice"
    with pytest.raises(MeshError, match=r"^signature mode: an approver private key is needed to mint a token$"):
        _mint(settings, approver="alice")


def test_every_token_has_its_own_nonce(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    nonces = {_mint(settings)[1].nonce for _ in range(20)}
    assert len(nonces) == 20


def test_canonical_json_sorts_keys_drops_blanks_and_keeps_utf8() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"a":["é",null],"b":1}'.encode()


@pytest.mark.parametrize("data", [bytes(range(250, 250 - size, -1)) for size in range(7)]  # - and _ appear
                         + [b"\x00\x00\x17"], ids=lambda d: d.hex() or "empty")  # the last: "AAAX"
def test_base64url_round_trips_without_padding(data: bytes) -> None:
    text = b64u_encode(data)
    assert text == _b64u(data) and "=" not in text
    assert b64u_decode(text) == data


@pytest.mark.parametrize("text", ["ab+c", "ab/c", "abc=", "ab c", "a", "abcde", "é"])
def test_base64url_outside_its_alphabet_or_length_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"^not base64url$"):
        b64u_decode(text)


@pytest.mark.parametrize("text", ["AB", "AAB", "Ab", "AAAAAB"])
def test_a_second_spelling_of_the_same_bytes_is_refused(text: str) -> None:
    """Unused low bits set ("AB" decodes to the byte of "AA"): one byte string, one spelling."""
    with pytest.raises(ValueError, match=r"^not canonical base64url$"):
        b64u_decode(text)


# -- strict parsing ---------------------------------------------------------------------------

MALFORMED = ("the approval token is malformed (altered or cut when pasted?): copy it again exactly as "
             "`mesh-mcp approve` printed it")


def test_any_change_at_any_position_is_refused(tmp_path: Path) -> None:
    """Exhaustive over positions: each character replaced, deleted, doubled; a cut at every length."""
    local = _local(tmp_path / "l")
    signature, key = _signature(tmp_path / "s")
    for settings, token in ((local, _mint(local)[0]), (signature, _mint(signature, approver="alice",
                                                                        private_key=key)[0])):
        variants = set()
        for i, ch in enumerate(token):
            for other in ("A", "B", "-", "_", ".", "="):
                if other != ch:
                    variants.add(token[:i] + other + token[i + 1:])
            variants.add(token[:i] + token[i + 1:])
            variants.add(token[:i] + ch + token[i:])
            variants.add(token[:i])
        variants.discard(token)
        for variant in variants:
            refusal = _refusal(settings, variant)
            assert refusal.reason in ("missing", "malformed", "bad_mac", "bad_signature", "unknown_approver"), variant


def test_a_well_formed_token_with_blanks_around_it_is_accepted(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    token, claims = _mint(settings)
    assert verify_token(settings, f"  {token}\n", plan_id=PLAN, plan_sha256=SHA, now=T0 + 1) == claims


@pytest.mark.parametrize("shape", [
    "no dot at all", "a.b.c", ".", "x" * 5000, "abc.d", "eyJ9.AA",
])
def test_malformed_shapes_are_refused_with_one_sentence(tmp_path: Path, shape: str) -> None:
    refusal = _refusal(_local(tmp_path), shape)
    assert (refusal.reason, str(refusal)) == ("malformed", MALFORMED)


def _with_claims(token: str, rewrite) -> str:
    body, proof = token.split(".")
    return f"{b64u_encode(rewrite(b64u_decode(body)))}.{proof}"


@pytest.mark.parametrize("rewrite", [
    lambda body: json.dumps(json.loads(body)).encode(),  # blanks after , and :
    lambda body: json.dumps({k: json.loads(body)[k] for k in Claims.model_fields},  # keys in claim order
                            separators=(",", ":")).encode(),
    lambda body: body.replace(b'"v":1', b'"v":1.0'),  # another spelling of 1 (and not strictly an int)
    lambda body: body.replace(b'"iat":', b'"extra":1,"iat":'),  # an unknown claim
    lambda body: b"\xff" + body,  # not UTF-8
    lambda body: b"[]",
], ids=["blanks", "key-order", "float", "extra-claim", "not-utf8", "not-an-object"])
def test_claims_that_are_not_the_canonical_json_object_are_malformed(tmp_path: Path, rewrite) -> None:
    settings = _local(tmp_path)
    token, _ = _mint(settings)
    assert _refusal(settings, _with_claims(token, rewrite)).reason == "malformed"


# -- the checks, in order, and what each refusal says ----------------------------------------------


def test_no_token_says_who_must_approve(tmp_path: Path) -> None:
    for missing in (None, "", "  \n"):
        refusal = _refusal(_local(tmp_path), missing)
        assert refusal.reason == "missing"
        assert str(refusal) == (f"no approval token: a human must run `mesh-mcp approve {PLAN}` at a terminal, "
                                "check the plan and pass the printed token as approval_token")


def test_a_token_of_the_other_mode_is_refused_before_its_proof(tmp_path: Path) -> None:
    local = _local(tmp_path / "l")
    signature, key = _signature(tmp_path / "s")
    local_token, _ = _mint(local)
    refusal = _refusal(signature, local_token)
    assert refusal.reason == "wrong_mode"
    assert str(refusal) == ("this token was minted in local mode but the server requires signature mode "
                            f"([approval] mode): mint a new one with `mesh-mcp approve {PLAN}`")
    signed, _ = _mint(signature, approver="alice", private_key=key)
    assert str(_refusal(local, signed)).startswith("this token was minted in signature mode but the server "
                                                   "requires local mode")


def test_a_mac_of_other_claims_or_another_secret_is_refused(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    token, _ = _mint(settings)
    forged = _with_claims(token, lambda body: body.replace(PLAN.encode(), OTHER.encode()))  # same length MAC
    refusal = _refusal(settings, forged, plan_id=OTHER)
    assert (refusal.reason, str(refusal)) == (
        "bad_mac", "the approval token's MAC does not verify: it was altered or not minted here")
    short = token.split(".")[0] + "." + b64u_encode(b64u_decode(token.split(".")[1])[:16])
    assert _refusal(settings, short).reason == "bad_mac"
    elsewhere, _ = _mint(_local(tmp_path / "elsewhere"))  # a valid token, another secret
    assert _refusal(settings, elsewhere).reason == "bad_mac"


def test_no_secret_file_means_no_token_was_minted_here(tmp_path: Path) -> None:
    token, _ = _mint(_local(tmp_path / "a"))
    here = _local(tmp_path / "b")
    refusal = _refusal(here, token)
    assert refusal.reason == "no_secret"
    assert str(refusal) == (f"no approval secret at {secret_path(here)}: no token was ever minted here. "
                            "A human must run `mesh-mcp approve PLAN_ID` at a terminal.")
    assert not secret_path(here).exists()  # verifying never creates a secret


def test_signatures_by_an_unlisted_approver_or_another_key_are_refused(tmp_path: Path) -> None:
    settings, _ = _signature(tmp_path)
    create_approver_key(tmp_path / "mallory.key", "mallory", "mallory's own pass", scrypt_n=2**10)
    _, mallory = load_approver_key(tmp_path / "mallory.key", "mallory's own pass")
    unlisted, _ = _mint(settings, approver="mallory", private_key=mallory)
    refusal = _refusal(settings, unlisted)
    assert (refusal.reason, str(refusal)) == (
        "unknown_approver", "approver 'mallory' is not listed in the trust file: only a listed approver can "
        "approve (its owner adds their public key there, then the server is restarted)")
    impersonation, _ = _mint(settings, approver="alice", private_key=mallory)
    refusal = _refusal(settings, impersonation)
    assert (refusal.reason, str(refusal)) == (
        "bad_signature", "the signature does not verify with approver 'alice''s public key: the token was "
        "altered or signed with another key")
    assert refusal.__cause__ is None and refusal.__suppress_context__


def test_a_token_approves_one_plan_at_one_hash(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    token, _ = _mint(settings)
    refusal = _refusal(settings, token, plan_id=OTHER)
    assert (refusal.reason, str(refusal)) == (
        "other_plan", f"this token approves plan {PLAN}, not plan {OTHER}: each plan needs its own approval")
    refusal = _refusal(settings, token, sha="cd" * 32)
    assert (refusal.reason, str(refusal)) == (
        "plan_changed", f"plan {PLAN} changed after it was approved (its sha256 differs from the approved one): "
        "propose it again and have the new plan approved")
    # a plan id that is a prefix, or longer: still another plan
    for near in (PLAN[:-1], PLAN + "0"):
        assert _refusal(settings, token, plan_id=near).reason == "other_plan"
    # the whole plan hash is bound: a plan whose sha256 differs in any one hex digit is another plan
    for position in range(len(SHA)):
        near_sha = SHA[:position] + ("0" if SHA[position] != "0" else "1") + SHA[position + 1:]
        assert _refusal(settings, token, sha=near_sha).reason == "plan_changed", position


def test_an_expired_token_names_its_expiry(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    token, claims = _mint(settings)
    refusal = _refusal(settings, token, now=claims.exp)
    assert (refusal.reason, str(refusal)) == (
        "expired", f"the approval token expired at 2030-03-17T17:56:40+00:00: have it re-approved with "
        f"`mesh-mcp approve {PLAN}`")


def test_without_a_time_the_current_clock_decides(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    fresh, _ = _mint(settings, now=time.time())
    assert verify_token(settings, fresh, plan_id=PLAN, plan_sha256=SHA).plan_id == PLAN
    stale, _ = mint_token(settings, plan_id=PLAN, plan_sha256=SHA, plan_expires_at=datetime.now(UTC).replace(
        year=datetime.now(UTC).year + 1), approver="local:test", now=time.time() - 601)
    assert _refusal(settings, stale, now=None).reason == "expired"


def test_the_checks_run_in_the_documented_order(tmp_path: Path) -> None:
    """mode, proof, plan id, plan hash, expiry: the first that fails is the one reported."""
    local = _local(tmp_path / "l")
    signature, _ = _signature(tmp_path / "s")
    token, claims = _mint(local)
    forged = _with_claims(token, lambda body: body.replace(PLAN.encode(), OTHER.encode()))
    late = claims.exp + 1
    assert _refusal(signature, forged, sha="cd" * 32, now=late).reason == "wrong_mode"
    assert _refusal(local, forged, sha="cd" * 32, now=late).reason == "bad_mac"
    assert _refusal(local, token, plan_id=OTHER, sha="cd" * 32, now=late).reason == "other_plan"
    assert _refusal(local, token, sha="cd" * 32, now=late).reason == "plan_changed"


# -- minting -----------------------------------------------------------------------------------


def test_the_lifetime_is_the_ttl_cut_at_the_plans_expiry(tmp_path: Path) -> None:
    settings = _local(tmp_path, token_ttl_s=90)
    assert (_mint(settings)[1].iat, _mint(settings)[1].exp) == (T0, T0 + 90)
    cut = mint_token(settings, plan_id=PLAN, plan_sha256=SHA, approver="local:test", now=T0,
                     plan_expires_at=datetime.fromtimestamp(T0 + 30.7, UTC))[1]
    assert (cut.iat, cut.exp) == (T0, T0 + 30)
    before = int(time.time())
    now_claims = mint_token(settings, plan_id=PLAN, plan_sha256=SHA, approver="local:test",
                            plan_expires_at=datetime.fromtimestamp(before + 3600, UTC))[1]
    assert before <= now_claims.iat <= time.time() and now_claims.exp == now_claims.iat + 90


def test_no_token_for_an_expired_plan(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    with pytest.raises(RemediationRefused) as info:
        mint_token(settings, plan_id=PLAN, plan_sha256=SHA, approver="local:test", now=T0,
                   plan_expires_at=datetime.fromtimestamp(T0, UTC))
    assert str(info.value) == f"plan {PLAN} has expired: propose it again"
    assert not isinstance(info.value, TokenRefused)


# -- the local secret ---------------------------------------------------------------------------


def test_the_secret_is_made_once_private_and_reused(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    secret = load_secret(settings, create=True)
    path = secret_path(settings)
    assert path == tmp_path / "cfg" / "deep" / "approval.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert re.fullmatch(r"[0-9a-f]{64}\n", path.read_text(encoding="ascii"))
    assert len(secret) == 32 and secret == bytes.fromhex(path.read_text(encoding="ascii"))
    assert load_secret(settings, create=True) == secret == load_secret(settings, create=False)
    assert load_secret(_local(tmp_path / "other"), create=True) != secret


def test_the_secret_is_made_in_an_existing_folder_too(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    secret_path(settings).parent.mkdir(parents=True, mode=0o700)  # e.g. ~/.config/mesh-mcp holds other files
    assert len(load_secret(settings, create=True)) == 32


def test_a_secret_readable_by_others_is_refused_by_name(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    load_secret(settings, create=True)
    os.chmod(secret_path(settings), 0o640)
    with pytest.raises(MeshError) as info:
        load_secret(settings, create=False)
    assert str(info.value) == (f"approval secret {secret_path(settings)} is readable by other users (mode 0o640): "
                               "chmod 600 it")


def test_the_secret_file_defaults_to_the_users_config_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    default = load_settings(environ={}, overrides={"state_dir": str(tmp_path / "state")})
    assert secret_path(default) == tmp_path / "home" / ".config" / "mesh-mcp" / "approval.key"
    tilde = _local(tmp_path, secret_file="~/keys/approval.key")
    assert secret_path(tilde) == tmp_path / "home" / "keys" / "approval.key"


@pytest.mark.parametrize("content", [
    b"not hex at all\n", b"AB" * 32 + b"\n", b"ab" * 31 + b"\n", b"\xff" * 64,
    b"ab" * 32 + "\u00a0".encode(),  # a non-ASCII blank after the hex: damage, not a blank line
])
def test_a_damaged_secret_is_refused_with_how_to_start_over(tmp_path: Path, content: bytes) -> None:
    settings = _local(tmp_path)
    path = secret_path(settings)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    os.chmod(path, 0o600)
    for create in (False, True):
        with pytest.raises(MeshError) as info:
            load_secret(settings, create=create)
        assert str(info.value) == (f"approval secret {path} is malformed (expected 64 hex characters): delete it "
                                   "to start over")
    assert path.read_bytes() == content  # never replaced


def test_a_secret_with_blanks_around_it_is_read(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    path = secret_path(settings)
    path.parent.mkdir(parents=True)
    path.write_text(f"  {'0f' * 32}\r\n\n", encoding="ascii")
    os.chmod(path, 0o600)
    assert load_secret(settings, create=False) == bytes.fromhex("0f" * 32)


# -- single use ---------------------------------------------------------------------------------


def test_the_used_nonces_file_is_private_and_one_line_per_token(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    path = nonces_path(settings)
    assert path == tmp_path / "state" / "used_nonces"
    assert nonce_used(settings, "x" * 22) is False and not path.exists()  # asking creates nothing
    first = _mint(settings)[1]
    second = _mint(settings)[1]
    consume_nonce(settings, first, now=T0)
    consume_nonce(settings, second, now=T0)
    assert path.read_text(encoding="ascii") == f"{first.nonce} {first.exp}\n{second.nonce} {second.exp}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert nonce_used(settings, first.nonce) and nonce_used(settings, second.nonce)
    assert not nonce_used(settings, first.nonce[:-1]) and not nonce_used(settings, str(first.exp))
    with pytest.raises(TokenRefused) as info:
        consume_nonce(settings, first, now=T0)
    assert (info.value.reason, str(info.value)) == (
        "reused", f"this approval token was already used: tokens are single-use. Have plan {PLAN} (or a fresh "
        "one) approved again")
    assert path.read_text(encoding="ascii").count("\n") == 2  # a refused reuse records nothing


def _fill(path: Path, count: int, exp: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"n{i:021d} {exp}\n" for i in range(count)), encoding="ascii")
    os.chmod(path, 0o600)


@pytest.mark.parametrize(("lines", "pruned"), [(4999, False), (5000, True)])
def test_pruning_starts_at_5000_lines(tmp_path: Path, lines: int, pruned: bool) -> None:
    settings = _local(tmp_path)
    path = nonces_path(settings)
    _fill(path, lines, T0 - 10)
    claims = _mint(settings)[1]
    consume_nonce(settings, claims, now=T0)
    kept = path.read_text(encoding="ascii").splitlines()
    assert kept[-1] == f"{claims.nonce} {claims.exp}"
    assert len(kept) == (1 if pruned else lines + 1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["used_nonces", "used_nonces.lock"]  # no temp file


def test_pruning_keeps_unreadable_lines_and_tokens_not_yet_expired(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    path = nonces_path(settings)
    _fill(path, 4994, T0 - 1)
    odd = ["garbled", "n1 n2 123", f"n3 {T0 - 5} extra", "n4 -5", f"n7\t{T0 - 5}", f"n8  {T0 - 5}",
           f"n5 {T0 + 1}", f"n6 {T0}"]
    with path.open("a", encoding="ascii") as fh:
        fh.write("".join(f"{line}\n" for line in odd))
    claims = _mint(settings)[1]
    consume_nonce(settings, claims, now=T0 + 0.9)  # whole seconds: n6 expired at T0, n5 one second later
    assert path.read_text(encoding="ascii").splitlines() == [*odd[:7], f"{claims.nonce} {claims.exp}"]


def test_pruning_without_a_time_uses_the_clock(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    path = nonces_path(settings)
    now = int(time.time())
    _fill(path, 4999, now - 60)
    with path.open("a", encoding="ascii") as fh:
        fh.write(f"valid {now + 3600}\n")
    _, claims = mint_token(settings, plan_id=PLAN, plan_sha256=SHA, approver="local:test",
                           plan_expires_at=datetime.fromtimestamp(now + 7200, UTC))
    consume_nonce(settings, claims)
    assert path.read_text(encoding="ascii").splitlines() == [f"valid {now + 3600}", f"{claims.nonce} {claims.exp}"]


def _consume_in_a_process(settings: Settings, token: str, start: float, results) -> None:
    while time.time() < start:  # every process consumes at the same instant
        pass
    try:
        claims = verify_token(settings, token, plan_id=PLAN, plan_sha256=SHA, now=T0 + 1)
        consume_nonce(settings, claims, now=T0 + 1)
    except TokenRefused as exc:
        results.put(exc.reason)
    else:
        results.put("consumed")


def test_processes_racing_with_one_token_only_one_uses_it(tmp_path: Path) -> None:
    settings = _local(tmp_path)
    token, claims = _mint(settings)
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    start = time.time() + 1.0
    procs = [ctx.Process(target=_consume_in_a_process, args=(settings, token, start, results)) for _ in range(6)]
    for proc in procs:
        proc.start()
    outcomes = sorted(results.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
    assert outcomes == ["consumed", *["reused"] * 5]
    assert nonces_path(settings).read_text(encoding="ascii") == f"{claims.nonce} {claims.exp}\n"


# -- what the mode protects against --------------------------------------------------------------


def test_signature_mode_is_described_with_its_approvers_trust_file_and_warning(tmp_path: Path) -> None:
    settings, _ = _signature(tmp_path)
    assert describe_mode(settings) == (
        "signature mode: tokens are Ed25519 signatures by one of 1 approver key(s) listed in the trust file "
        f"{settings.approval.trust_file}, made with a passphrase the agent never sees; this gate holds as long as "
        "the agent cannot change the trust file or the server's code.")
    in_code = settings.model_copy(update={"approval": settings.approval.model_copy(update={"trust_file": None})})
    from server.approval.trust import default_trust_path
    assert (f"listed in the trust file {default_trust_path()} (the default place), made with"  # Settings built in code
            in describe_mode(in_code))
    unprotected, _ = _signature(tmp_path / "u", allow_unprotected_approvers=True)
    assert describe_mode(unprotected).endswith(
        "or the server's code. WARNING: the server was started with --allow-unprotected-approvers: it applies "
        "plans even when the trust file could be changed by the server's OS user.")


def test_the_claims_model_is_strict() -> None:
    good = {"v": 1, "mode": "local", "plan_id": PLAN, "plan_sha256": SHA, "iat": T0, "exp": T0 + 1,
            "nonce": "A" * 22, "approver": "local:test"}
    assert Claims.model_validate(good).plan_id == PLAN
    for bad in ({"iat": "1900000000"}, {"nonce": "A" * 21}, {"plan_sha256": "AB" * 32}, {"mode": "none"}):
        with pytest.raises(ValueError):
            Claims.model_validate({**good, **bad})
