"""The index on hostile workspaces: it never crashes, and a partial answer says it is partial."""

from __future__ import annotations

import os
from pathlib import Path

from server.config import Conventions
from tools.mesh_index.service import IndexService
from tools.mesh_index.workspace import MAX_FILE_BYTES

TYPES = ("export enum ShopJobType { CHARGE = 'shop.charge', REFUND = 'shop.refund' }\n"
         "export enum ShopQueue { MAIN = 'shop-queue' }\n")


def write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def index(root: Path) -> IndexService:
    svc = IndexService(root, Conventions(), use_cache=False)
    svc.refresh()
    return svc


def producer_lines(svc: IndexService, target: str) -> set[tuple[str, int, str | None]]:
    return {(s.file, s.line, s.value) for s in svc.analyze_impact(target, include_tests=True).producers}


def test_single_repository_workspace(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, "src/messaging/types.ts", TYPES)
    write(tmp_path, "src/shop/svc.ts",
          "import { ShopJobType, ShopQueue } from '../messaging/types.js';\n"
          "export const run = () =>\n"
          "  JobsOutboxEntity.createJob({ type: ShopJobType.CHARGE, target: ShopQueue.MAIN, emitter: 'ms-shop' });\n")
    r = index(tmp_path).analyze_impact("CHARGE")
    assert [(s.repo, s.file, s.line, s.detail["queue"]) for s in r.producers] == [
        (tmp_path.name, "src/shop/svc.ts", 3, "shop-queue")]


def test_crlf_tsx_multiline_decorators_and_default_exports(tmp_path: Path) -> None:
    write(tmp_path, "msg/src/types.ts", TYPES)
    write(tmp_path, "svc/src/charge.ts", "\r\n".join([
        "import { ShopJobType, ShopQueue } from '../../msg/src/types.js';",
        "",
        "export default class ChargeService {",
        "  charge() {",
        "    return JobsOutboxEntity.createJob({",
        "      type: ShopJobType.CHARGE,",
        "      target: ShopQueue.MAIN,",
        "    });",
        "  }",
        "}",
        ""]))
    write(tmp_path, "svc/src/RefundButton.tsx",
          "import { ShopJobType, ShopQueue } from '../../msg/src/types.js';\n"
          "export default function RefundButton<T,>({ id }: { id: T }) {\n"
          "  const onClick = () => JobsOutboxEntity.createJob({ type: ShopJobType.REFUND, target: ShopQueue.MAIN });\n"
          "  return <button onClick={onClick}>{String(id)}</button>;\n"
          "}\n")
    write(tmp_path, "worker/src/charge.handler.ts",
          "import { ShopJobType } from '../../msg/src/types.js';\n"
          "export default class ChargeHandler {\n  readonly jobType = ShopJobType.CHARGE;\n}\n")
    write(tmp_path, "worker/src/shop.worker.ts",
          "import { Processor } from '@nestjs/bullmq';\n"
          "import { ShopQueue } from '../../msg/src/types.js';\n"
          "import ChargeHandler from './charge.handler.js';\n"
          "@Injectable()\n"
          "@Processor(\n  ShopQueue.MAIN,\n  {\n    concurrency: 4,\n  },\n)\n"
          "export default class ShopWorker extends BaseWorker {\n"
          "  constructor(private readonly charge: ChargeHandler) { super(); }\n}\n")
    svc = index(tmp_path)
    assert svc.info().parse_errors == 0
    assert producer_lines(svc, "CHARGE") == {("svc/src/charge.ts", 5, "shop.charge")}
    assert producer_lines(svc, "REFUND") == {("svc/src/RefundButton.tsx", 3, "shop.refund")}
    consumers = svc.analyze_impact("CHARGE").consumers
    assert {(c.kind, c.file, c.line, c.detail.get("queue", "")) for c in consumers} == {
        ("handler", "worker/src/charge.handler.ts", 2, ""),
        ("worker", "worker/src/shop.worker.ts", 11, "shop-queue"),
    }


def test_syntax_errors_and_binary_garbage_are_flagged_not_fatal(tmp_path: Path) -> None:
    write(tmp_path, "msg/src/types.ts", TYPES)
    write(tmp_path, "svc/src/broken.ts",
          "import { ShopJobType } from '../../msg/src/types.js';\n"
          "export class Broken {\n"
          "<<<<<<< HEAD\n  a() { return 1; }\n=======\n  a() { return 2; }\n>>>>>>> other\n"
          "  charge() { return JobsOutboxEntity.createJob({ type: ShopJobType.CHARGE }); }\n}\n")
    write(tmp_path, "svc/src/garbage.ts", bytes(range(256)) * 8)
    write(tmp_path, "svc/src/deep.ts", "export const D = " + "[" * 5000 + "]" * 5000 + ";\n")
    write(tmp_path, "svc/config/app.config.json", b"{ not json \xff")
    svc = index(tmp_path)
    info = svc.info()
    assert {"svc/src/broken.ts", "svc/src/garbage.ts", "svc/config/app.config.json"} <= set(info.parse_error_files)
    r = svc.analyze_impact("CHARGE")
    assert any("syntax errors" in n for n in r.notes)
    # tree-sitter recovers: the producer after the conflict markers is still found
    assert {(s.file, s.line) for s in r.producers} == {("svc/src/broken.ts", 8)}


def test_huge_generated_file_is_skipped_and_said_so(tmp_path: Path) -> None:
    write(tmp_path, "msg/src/types.ts", TYPES)
    big = "export const ROWS = [\n" + "".join(f"  'row-{i:07d}',\n" for i in range(MAX_FILE_BYTES // 14)) + "];\n"
    write(tmp_path, "msg/src/generated/rows.generated.ts", big)
    svc = index(tmp_path)
    info = svc.info()
    assert info.skipped_files == ["msg/src/generated/rows.generated.ts"]
    assert info.files == 1
    r = svc.analyze_impact("CHARGE")
    assert any("size cap" in n and "rows.generated.ts" in n for n in r.notes)
    assert r.matches[0].value == "shop.charge"


def test_symlink_loops_and_links_out_of_the_workspace_are_not_followed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "msg/src/types.ts", TYPES)
    os.symlink("..", ws / "msg" / "src" / "up")
    os.symlink(ws / "msg", ws / "msg" / "again")
    os.symlink(tmp_path, ws / "outside")
    write(tmp_path, "elsewhere/src/x.ts", "export enum OtherJobType { X = 'other.x' }\n")
    svc = index(ws)
    assert svc.info().files == 1
    assert svc.analyze_impact("other.x").matches == []


def test_package_json_without_name_or_unreadable(tmp_path: Path) -> None:
    write(tmp_path, "msg/package.json", '{ "version": "1.0.0", "main": "dist/index.js" }')
    write(tmp_path, "msg/src/index.ts", TYPES)
    write(tmp_path, "broken/package.json", "{ this is not json")
    write(tmp_path, "svc/package.json", '{ "name": 42 }')
    write(tmp_path, "svc/src/charge.ts",
          "import { ShopJobType } from '@shop/msg';\n"
          "export const c = () => JobsOutboxEntity.createJob({ type: ShopJobType.CHARGE });\n")
    svc = index(tmp_path)
    r = svc.analyze_impact("CHARGE")
    assert r.producers == []  # '@shop/msg' names no package of the workspace: not resolved, and said so
    assert [(s.file, s.line) for s in r.unresolved] == [("svc/src/charge.ts", 2)]
    assert "@shop/msg" in r.unresolved[0].detail["reason"]
    assert any("not proof of absence" in n for n in r.notes)


def test_handlers_injected_as_a_list_through_a_di_token(tmp_path: Path) -> None:
    write(tmp_path, "msg/src/types.ts", TYPES)
    for name, member in (("Charge", "CHARGE"), ("Refund", "REFUND")):
        write(tmp_path, f"worker/src/{name.lower()}.handler.ts",
              "import { ShopJobType } from '../../msg/src/types.js';\n"
              f"export class {name}Handler {{\n  readonly jobType = ShopJobType.{member};\n}}\n")
    write(tmp_path, "worker/src/tokens.ts", "export const SHOP_HANDLERS = Symbol('SHOP_HANDLERS');\n")
    write(tmp_path, "worker/src/shop.worker.ts",
          "import { ShopQueue } from '../../msg/src/types.js';\n"
          "import { SHOP_HANDLERS } from './tokens.js';\n"
          "@Processor(ShopQueue.MAIN)\n"
          "export class ShopWorker extends BaseWorker {\n"
          "  constructor(@Inject(SHOP_HANDLERS) private readonly handlers: IJobHandler[]) { super(); }\n}\n")
    write(tmp_path, "worker/src/app.module.ts",
          "import { ChargeHandler } from './charge.handler.js';\n"
          "import { RefundHandler } from './refund.handler.js';\n"
          "import { SHOP_HANDLERS } from './tokens.js';\n"
          "@Module({ providers: [ChargeHandler, RefundHandler, {\n"
          "  provide: SHOP_HANDLERS,\n  useFactory: (...handlers: IJobHandler[]) => handlers,\n"
          "  inject: [ChargeHandler, RefundHandler],\n}] })\nexport class AppModule {}\n")
    svc = index(tmp_path)
    for target in ("CHARGE", "REFUND"):
        consumers = svc.analyze_impact(target).consumers
        assert {(c.kind, c.detail.get("worker_class")) for c in consumers} == {
            ("handler", "ShopWorker"), ("worker", "ShopWorker")}, target
    assert not any("not routed" in r for e in svc.catalogue(with_checks=False).entries for r in e.reasons)


def test_filters_looking_the_type_up_in_a_table_or_a_helper(tmp_path: Path) -> None:
    write(tmp_path, "msg/src/t.ts",
          "export enum EventEventMessagingType { EVENT_CREATED = 'event.created', EVENT_DELETED = 'event.deleted' }\n"
          "export enum WsEventType { EVENT_CREATED = 'ws.event.created' }\n"
          "export enum Streams { FEED = 'feed' }\n"
          "export const EVENT_TO_WS_EVENT_MAPPING = {\n"
          "  [EventEventMessagingType.EVENT_CREATED]: WsEventType.EVENT_CREATED,\n};\n")
    shapes = {
        "A": "return Object.keys(EVENT_TO_WS_EVENT_MAPPING).includes(type);",
        "B": "return type in EVENT_TO_WS_EVENT_MAPPING;",
        "C": "return EVENT_TO_WS_EVENT_MAPPING[type as EventEventMessagingType] !== undefined;",
        "D": ("return this.isSupported(type);\n  }\n"
              "  private isSupported(t: string) {\n    return t.startsWith('event.');"),
        "E": "return this.registry.supports(type);",  # not readable statically
    }
    body = "import { EVENT_TO_WS_EVENT_MAPPING, Streams, EventEventMessagingType } from '../../msg/src/t.js';\n"
    for name, filt in shapes.items():
        body += (f"export class {name} extends SinglePostProcessor {{\n"
                 f"  constructor(r) {{ super(r, {{ streamName: Streams.FEED, groupName: '{name.lower()}' }}); }}\n"
                 f"  shouldProcess(type: string) {{\n    {filt}\n  }}\n}}\n")
    body += ("export const created = () => EventQueueEntity.createEvent({\n"
             "  type: EventEventMessagingType.EVENT_CREATED, targetServices: [Streams.FEED] });\n"
             "export const deleted = () => EventQueueEntity.createEvent({\n"
             "  type: EventEventMessagingType.EVENT_DELETED, targetServices: [Streams.FEED] });\n")
    write(tmp_path, "ws/src/pps.ts", body)
    svc = index(tmp_path)
    got = {t: {(c.symbol, c.detail["filter"], c.confidence) for c in svc.analyze_impact(t).consumers}
           for t in ("event.created", "event.deleted")}
    assert got["event.created"] == {("A", "types", "exact"), ("B", "types", "exact"), ("C", "types", "exact"),
                                    ("D", "patterns", "heuristic"), ("E", "unknown", "heuristic")}
    # a filter the index cannot read may accept what reaches its stream: a heuristic consumer, never a false orphan
    assert got["event.deleted"] == {("D", "patterns", "heuristic"), ("E", "unknown", "heuristic")}


def test_deep_import_of_a_packages_built_output_reads_its_source(tmp_path: Path) -> None:
    write(tmp_path, "msg/package.json", '{ "name": "@shop/msg", "main": "dist/index.js" }')
    write(tmp_path, "msg/src/jobs/types.ts", TYPES)
    write(tmp_path, "svc/src/charge.ts",
          "import { ShopJobType } from '@shop/msg/dist/jobs/types.js';\n"
          "export const c = () => JobsOutboxEntity.createJob({ type: ShopJobType.CHARGE });\n")
    assert producer_lines(index(tmp_path), "CHARGE") == {("svc/src/charge.ts", 2, "shop.charge")}


def test_post_processors_started_through_a_namespace_import_or_not_at_all(tmp_path: Path) -> None:
    write(tmp_path, "msg/src/t.ts", "export enum UserEventType { CREATED = 'user.created' }\n"
                                    "export enum Streams { USERS = 'users' }\n")
    pp = ("import {{ Streams, UserEventType }} from '../../../msg/src/t.js';\n"
          "export class {0} extends SinglePostProcessor {{\n"
          "  constructor(r) {{ super(r, {{ streamName: Streams.USERS, groupName: '{0}' }}); }}\n"
          "  shouldProcess(type: string) {{ return type === UserEventType.CREATED; }}\n}}\n")
    for name in ("Mailer", "Ranking", "Legacy"):
        write(tmp_path, f"runner/src/pps/{name.lower()}.ts", pp.format(name))
    write(tmp_path, "runner/package.json", '{ "name": "runner" }')
    write(tmp_path, "runner/src/pps/index.ts", "export * from './mailer.js';\nexport * from './ranking.js';\n")
    write(tmp_path, "runner/src/main.ts",
          "import * as pps from './pps/index.js';\nfor (const P of Object.values(pps)) new P(redis).start();\n")
    write(tmp_path, "runner/src/pps/legacy.spec.ts", "import { Legacy } from './legacy.js';\nnew Legacy(redis);\n")
    write(tmp_path, "svc/src/user.ts",
          "import { Streams, UserEventType } from '../../msg/src/t.js';\n"
          "export const e = () => EventQueueEntity.createEvent({ type: UserEventType.CREATED, "
          "targetServices: [Streams.USERS] });\n")
    svc = index(tmp_path)
    consumers = svc.analyze_impact("user.created").consumers
    assert {(c.symbol, c.confidence, c.detail.get("started")) for c in consumers} == {
        ("Mailer", "exact", None), ("Ranking", "exact", None), ("Legacy", "heuristic", "no")}
    assert svc.analyze_impact("stream:users").routes[0].consumers == 2


def test_a_collaborator_writes_only_through_the_methods_the_handler_calls(tmp_path: Path) -> None:
    write(tmp_path, "msg/src/types.ts", TYPES + "export enum ShopEventType { CHARGED = 'shop.charged' }\n")
    write(tmp_path, "worker/src/shop.repository.ts",
          "import { ShopEventType } from '../../msg/src/types.js';\n"
          "export class ShopRepository {\n"
          "  async find(id: string) { return id; }\n"
          "  async markCharged(id: string) {\n"
          "    return EventQueueEntity.createEvent({ type: ShopEventType.CHARGED, targetServices: ['shop'] });\n"
          "  }\n}\n")
    for name, member, call in (("Charge", "CHARGE", "markCharged"), ("Refund", "REFUND", "find")):
        write(tmp_path, f"worker/src/{name.lower()}.handler.ts",
              "import { ShopJobType } from '../../msg/src/types.js';\n"
              "import { ShopRepository } from './shop.repository.js';\n"
              f"export class {name}Handler {{\n  readonly jobType = ShopJobType.{member};\n"
              "  constructor(private readonly repo: ShopRepository) {}\n"
              f"  async handle(job) {{ await this.repo.{call}(job.id); }}\n}}\n")
    svc = index(tmp_path)
    def handler_hops(target: str) -> set[tuple[str, str]]:
        return {(f.value, f.via) for f in svc.analyze_impact(target).followups if f.via.startswith("handler")}

    assert handler_hops("CHARGE") == {("shop.charged", "handler ChargeHandler via ShopRepository")}
    assert handler_hops("REFUND") == set()  # it only reads through the repository
