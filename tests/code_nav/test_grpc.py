"""analyze_grpc: proto definitions, @GrpcMethod handlers (either case), clients, outbox writes, breaking changes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from server.config import Conventions
from server.errors import InvalidArgument
from tests.code_nav.conftest import build_nav_workspace
from tools.code_nav.grpc import analyze_grpc
from tools.code_nav.proto import parse_proto

EVENT_PROTO = "npm-packages/packages/contracts-nest/proto/event/v1/event.proto"


def test_service_handlers_clients_and_writes(nav_service):
    r = analyze_grpc(nav_service, "EventService")
    assert [(x.rpc.service, x.rpc.method, x.rpc.at.line) for x in r.rpcs] == [
        ("EventService", "CreateEvent", 7), ("EventService", "DeleteEvent", 8)]
    create = r.rpcs[0]
    assert create.rpc.package == "event.v1" and (create.rpc.request, create.rpc.response) == (
        "CreateEventRequest", "EventReply")
    assert [(h.at.file, h.at.line, h.at.symbol) for h in create.handlers] == [
        ("ms-event/src/modules/event/controllers/commands/event.command.controller.ts", 18,
         "EventCommandController.createEvent")]
    assert [(c.at.file, c.at.line, c.at.symbol) for c in create.clients] == [
        ("api-gateway/src/events/events.gateway.service.ts", 17, "EventsGatewayService.create")]
    writes = {(w.kind, w.value, tuple(w.via)) for w in create.writes}
    assert ("fallback", "events.fallback_create_event", ()) in writes
    assert ("create_job", "events.geocode_event", ("EventService.create",)) in writes
    assert ("create_event", "event.created", ("EventService.create", "EventRepository.insert")) in writes


def test_camel_case_method_test_handlers_and_comments(nav_service):
    r = analyze_grpc(nav_service, "NotificationService.SendDigest")
    (rep,) = r.rpcs
    # @GrpcMethod(NOTIFICATION_SERVICE_NAME, ...) and getService<...>(NOTIFICATION_SERVICE_NAME): constants resolved
    # through a subpath import, an `export *` barrel and the package name
    # ts-proto's @NotificationServiceControllerMethods() class decorator: its rpc-named methods only
    assert [(h.service, h.method, h.at.symbol) for h in rep.handlers] == [
        ("NotificationService", "SendDigest", "DigestAdminController.SendDigest"),
        ("NotificationService", "sendDigest", "NotificationController.sendDigest")]
    assert [(c.method, c.at.line) for c in rep.clients] == [("sendDigest", 15)]  # the commented call is not one
    with_tests = analyze_grpc(nav_service, "sendDigest", include_tests=True).rpcs[0]
    assert {h.at.symbol for h in with_tests.handlers} == {"NotificationController.sendDigest",
                                                          "DigestAdminController.SendDigest",
                                                          "NotificationTestController.sendDigestForTests"}
    assert [x.rpc.method for x in analyze_grpc(nav_service, "/notification.v1.NotificationService/SendDigest").rpcs] \
        == ["SendDigest"]
    assert len(analyze_grpc(nav_service, "event.v1").rpcs) == 2  # a proto package
    assert len(analyze_grpc(nav_service, EVENT_PROTO).rpcs) == 2  # a .proto file
    unknown = analyze_grpc(nav_service, "NoSuchService")
    assert unknown.rpcs == [] and "names no gRPC" in unknown.notes[0] and "EventService" in unknown.notes[0]
    for bad in ("--output=/tmp/x", "HEAD..main", "a b"):
        with pytest.raises(InvalidArgument, match="base"):
            analyze_grpc(nav_service, "EventService", base=bad)


def test_proto_parser_reserved_nested_and_maps():
    p = parse_proto("x.proto", """syntax = "proto3"; package a.b; // c
    service S { rpc M (stream Req) returns (stream Res) { option (x) = { y: 1 }; } }
    message Req { map<string, int32> tags = 1; reserved 2, 5 to 7; reserved "old";
      oneof k { int32 a = 8; string b = 9; } message In { bool z = 1; } /* } */ }
    enum E { E_UNKNOWN = 0; reserved 3; }""")
    assert p.package == "a.b" and p.services["S"].rpcs["M"].client_streaming
    req = p.messages["Req"]
    assert {n: f.type for n, f in req.fields.items()} == {1: "map<string,int32>", 8: "int32", 9: "string"}
    assert req.is_reserved(6) and not req.is_reserved(4) and "old" in req.reserved_names
    assert "Req.In" in p.messages and p.enums["E"].is_reserved(3)


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
                   cwd=root, check=True, capture_output=True, env=env)


def test_breaking_changes_against_base_and_planted_fsmonitor_runs_nothing(tmp_path: Path):
    from tools.mesh_index.service import IndexService

    ws = build_nav_workspace(tmp_path / "ws")
    repo = ws / "npm-packages"
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    proto = ws / EVENT_PROTO
    text = proto.read_text()
    text = text.replace("  int64 starts_at = 3;\n", "  string summary = 3;\n")  # number 3 reused
    text = text.replace("  string title = 2;\n", "  bytes title = 2;\n")  # type changed (same wire type)
    text = text.replace("  string user_role = 3;\n", "")  # removed without reserved
    text = text.replace("  EVENT_STATUS_PUBLISHED = 2;\n", "")  # enum value removed
    text = text.replace("  rpc DeleteEvent (DeleteEventRequest) returns (EventReply);\n", "")
    proto.write_text(text)
    marker = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(hook))
    subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True,
                   env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"})
    assert marker.exists(), "the planted fsmonitor must be live for this test to prove anything"
    marker.unlink()
    service = IndexService(ws, Conventions(), cache_dir=tmp_path / "state")
    try:
        service.refresh()
        r = analyze_grpc(service, "EventService", base="HEAD")
        whole = analyze_grpc(service, "event.v1", base="main")
    finally:
        service.close()
    assert not marker.exists(), "reading the base revision ran the repository's core.fsmonitor"
    from tools.code_nav import git_blobs

    git_blobs._git(git_blobs.open_repository(ws, "npm-packages"), "status", "--short")  # the guard itself
    assert not marker.exists(), "the git wrapper let the repository's core.fsmonitor run"
    kinds = {(b.kind, b.message.split(":")[0]) for b in r.breaking}
    assert ("number_reused", "CreateEventRequest") in kinds
    assert any(b.kind == "field_type_changed" and "same wire encoding" in b.message for b in r.breaking)
    assert any(b.kind == "field_removed" and "user_role = 3" in b.message for b in r.breaking)
    assert any(b.kind == "enum_value_removed" and "EVENT_STATUS_PUBLISHED" in b.message for b in r.breaking)
    assert any(b.kind == "rpc_removed" and "DeleteEvent" in b.message for b in r.breaking)
    assert not any("reserved 4" in b.message for b in r.breaking)
    assert {b.kind for b in whole.breaking} == {b.kind for b in r.breaking}


def test_base_runs_no_program_from_any_planted_git_setting(tmp_path: Path):
    """Every setting of the hostile-workspace suite (fsmonitor, hooks, ssh, pager, filter and diff drivers,
    gpg) planted at once, with .gitattributes naming the drivers and an uncommitted change."""
    from tests.safety.test_hostile_workspace import GIT_SETTINGS
    from tools.mesh_index.service import IndexService

    ws = build_nav_workspace(tmp_path / "ws")
    repo = ws / "npm-packages"
    (repo / ".gitattributes").write_text("* filter=x diff=x\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    proto = ws / EVENT_PROTO
    proto.write_text(proto.read_text().replace("  string user_role = 3;\n", ""))
    marker = tmp_path / "ran"
    with (repo / ".git" / "config").open("a") as fh:
        for setting in GIT_SETTINGS.values():
            fh.write(setting.format(m=marker).replace("hooksPath = hooks", "hooksPath = .git/hooks"))
    for hook in ("post-checkout", "pre-commit", "post-index-change", "reference-transaction", "fsmonitor-watchman"):
        (repo / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (repo / ".git" / "hooks" / hook).chmod(0o755)
    service = IndexService(ws, Conventions(), cache_dir=tmp_path / "state")
    try:
        service.refresh()
        r = analyze_grpc(service, "EventService", base="HEAD")
    finally:
        service.close()
    assert any(b.kind == "field_removed" for b in r.breaking)  # the base was read
    assert not marker.exists(), "a git setting of the workspace ran a program"
