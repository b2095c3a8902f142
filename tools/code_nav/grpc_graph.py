"""The gRPC side of the workspace: proto definitions, ``@GrpcMethod`` handlers, typed clients and their calls.

Handlers and clients come from the index's facts (``mdecos``, ``grpc_clients``, ``grpc_calls``: see
:mod:`tools.mesh_index.decl_facts`); proto files are read with :mod:`tools.code_nav.proto`. Method
names match case-insensitively (NestJS handlers and ts-proto clients write ``createEvent`` for the
proto's ``CreateEvent``); a service matches by its own name or ``package.Service``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.code_nav.consts import arg_value
from tools.code_nav.files import Walk, read_text, walk
from tools.code_nav.memo import per_build
from tools.code_nav.model import GrpcCall, GrpcHandler, ProtoRpc, Where
from tools.code_nav.proto import ProtoFile, parse_proto

if TYPE_CHECKING:
    from tools.mesh_index.service import IndexService

GRPC_DECORATORS = ("GrpcMethod", "GrpcStreamMethod", "GrpcStreamCall")
GENERATED_SUFFIX = "ControllerMethods"
MAX_PROTO_FILES = 2000
MAX_PROTO_BYTES = 1024 * 1024


def svc_key(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower()


@dataclass
class GrpcGraph:
    protos: dict[str, ProtoFile] = field(default_factory=dict)
    rpcs: list[ProtoRpc] = field(default_factory=list)
    handlers: list[GrpcHandler] = field(default_factory=list)
    calls: list[GrpcCall] = field(default_factory=list)
    truncated: bool = False

    def handlers_of(self, service: str, method: str) -> list[GrpcHandler]:
        return [h for h in self.handlers
                if svc_key(h.service) == svc_key(service) and h.method.lower() == method.lower()]

    def calls_of(self, service: str, method: str) -> list[GrpcCall]:
        return [c for c in self.calls if svc_key(c.service) == svc_key(service) and c.method.lower() == method.lower()]


def build_graph(service: IndexService, include_tests: bool) -> GrpcGraph:
    g = GrpcGraph()
    facts = service.all_facts()
    layout = service.layout()
    markers = tuple(service.conventions.test_path_markers)

    def test(rel: str) -> bool:
        return any(m in "/" + rel for m in markers)

    found = _proto_files(service)
    g.truncated = found.truncated
    for rel in found.files:
        proto = _parsed(service.workspace, rel)
        if proto is None:
            continue
        g.protos[rel] = proto
        for svc in proto.services.values():
            for rpc in svc.rpcs.values():
                g.rpcs.append(ProtoRpc(package=proto.package, service=svc.name, method=rpc.name, request=rpc.request,
                                       response=rpc.response, client_streaming=rpc.client_streaming,
                                       server_streaming=rpc.server_streaming,
                                       at=Where(repo=layout.repo_of(rel), file=rel, line=rpc.line,
                                                symbol=f"{svc.name}.{rpc.name}")))
    g.handlers, g.calls = per_build(service, f"grpc:{include_tests}",
                                    lambda: _code_side(facts, layout, test, include_tests))
    return g


def _code_side(facts: dict[str, Any], layout: Any, test: Any,
               include_tests: bool) -> tuple[list[GrpcHandler], list[GrpcCall]]:
    handlers: list[GrpcHandler] = []
    calls: list[GrpcCall] = []
    for rel, f in facts.items():
        is_test = test(rel)
        if is_test and not include_tests:
            continue
        for cls, mname, line, decos in f.get("mdecos", ()):
            for name, args in decos:
                if name not in GRPC_DECORATORS or not args:
                    continue
                service = arg_value(args[0], facts, layout, rel)
                method = arg_value(args[1], facts, layout, rel) if len(args) > 1 else mname
                if service is None or method is None:
                    continue  # a name that resolves to no string constant: not a handler we can place
                handlers.append(GrpcHandler(service=service, method=method, test_only=is_test,
                                            at=Where(repo=layout.repo_of(rel), file=rel, line=line,
                                                     symbol=f"{cls}.{mname}")))
        handlers.extend(_generated_handlers(f, rel, layout, is_test))
        clients = f.get("grpc_clients")
        if not clients:
            continue
        by_field: dict[str, str] = {}
        for c in clients:
            service = arg_value(c[1], facts, layout, rel)
            if c[0] and service is not None:
                by_field[c[0]] = service
        for fld, method, line, symbol in f.get("grpc_calls", ()):
            if fld in by_field:
                calls.append(GrpcCall(service=by_field[fld], method=method, client_field=fld, test_only=is_test,
                                      at=Where(repo=layout.repo_of(rel), file=rel, line=line, symbol=symbol)))
    return handlers, calls


def _generated_handlers(f: dict[str, Any], rel: str, layout: Any, is_test: bool) -> list[GrpcHandler]:
    """ts-proto's ``@XServiceControllerMethods()`` class decorator applies ``GrpcMethod('XService', m)`` to
    each rpc method of the class: every method of such a class is a candidate handler of ``XService``
    (matched to the proto's rpcs by name, case-insensitively, like the others)."""
    out: list[GrpcHandler] = []
    for cls, info in f.get("classes", {}).items():
        services = [name[:-len(GENERATED_SUFFIX)] for name, _args in info.get("decorators", ())
                    if name.endswith(GENERATED_SUFFIX) and len(name) > len(GENERATED_SUFFIX)]
        for service in services:
            for d in f.get("decls", ()):
                if d[1] == "method" and d[0].startswith(cls + ".") and d[0] != f"{cls}.constructor":
                    out.append(GrpcHandler(service=service, method=d[0].split(".", 1)[1], test_only=is_test,
                                           via="ControllerMethods",
                                           at=Where(repo=layout.repo_of(rel), file=rel, line=d[2], symbol=d[0])))
    return out


_WALKS: dict[str, tuple[float, Walk]] = {}
_PARSED: dict[tuple[str, str], tuple[tuple[int, int], ProtoFile]] = {}
WALK_TTL_S = 2.0


def _proto_files(service: IndexService) -> Walk:
    """The workspace's .proto files (the walk is reused for :data:`WALK_TTL_S`, like the index's stale check)."""
    key = str(service.workspace)
    now = time.monotonic()
    hit = _WALKS.get(key)
    if hit is not None and now - hit[0] < WALK_TTL_S:
        return hit[1]
    found = walk(service.workspace, (".proto",), service.conventions.skip_dirs, max_files=MAX_PROTO_FILES)
    _WALKS[key] = (now, found)
    return found


def _parsed(workspace: Path, rel: str) -> ProtoFile | None:
    """A parsed .proto file, parsed again only when its size or mtime changed."""
    try:
        st = os.stat(os.path.join(str(workspace), rel), follow_symlinks=False)
    except OSError:
        return None
    key, stamp = (str(workspace), rel), (st.st_size, st.st_mtime_ns)
    hit = _PARSED.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    text = read_text(workspace, rel, MAX_PROTO_BYTES)
    if text is None:
        return None
    proto = parse_proto(rel, text)
    if len(_PARSED) > 4 * MAX_PROTO_FILES:
        _PARSED.clear()
    _PARSED[key] = (stamp, proto)
    return proto


def select(g: GrpcGraph, target: str) -> list[tuple[str, str, ProtoRpc | None]]:
    """(service, method, definition) pairs ``target`` names: a method, a service, a proto package or a .proto file."""
    t = target.strip().lstrip("/")
    pairs: dict[tuple[str, str], ProtoRpc | None] = {}
    known: list[tuple[str, str, ProtoRpc | None]] = [(r.service, r.method, r) for r in g.rpcs]
    known += [(h.service, h.method, None) for h in g.handlers if h.via == "GrpcMethod"]
    known += [(c.service, c.method, None) for c in g.calls]

    def add(svc: str, method: str, rpc: ProtoRpc | None) -> None:
        key = (svc_key(svc), method.lower())
        if pairs.get(key) is None:
            pairs[key] = rpc
            names[key] = (rpc.service if rpc else svc.rsplit(".", 1)[-1], rpc.method if rpc else method)

    names: dict[tuple[str, str], tuple[str, str]] = {}
    if t.endswith(".proto"):
        for r in g.rpcs:
            if r.at.file == t or r.at.file.endswith("/" + t):
                add(r.service, r.method, r)
    else:
        low = t.lower().replace("/", ".")
        for svc, method, rpc in known:
            full = f"{rpc.package}.{svc}" if rpc and rpc.package else svc
            for name in {svc, full}:
                n = name.lower()
                if low in (n, f"{n}.{method.lower()}") or (low == method.lower()) or (
                        rpc is not None and rpc.package.lower() == low):
                    add(svc, method, rpc)
    by_key = {(svc_key(r.service), r.method.lower()): r for r in g.rpcs}
    return [(names[k][0], names[k][1], pairs[k] or by_key.get(k)) for k in sorted(pairs)]


def method_of(facts: dict[str, Any], symbol: str) -> tuple[str, list[Any]] | None:
    """(file, decl) of a ``Class.method`` symbol."""
    for rel, f in facts.items():
        for d in f.get("decls", ()):
            if d[0] == symbol and d[1] == "method":
                return rel, d
    return None
