"""Workspace discovery, package and tsconfig resolution, per-file facts of unusual shapes."""

from __future__ import annotations

import json
from pathlib import Path

from server.config import Conventions
from tools.mesh_index.parser import extract
from tools.mesh_index.service import IndexService, extract_config
from tools.mesh_index.workspace import Layout, discover, read_package, read_tsconfig


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_discover_skips_build_output_and_node_modules(tmp_path):
    for rel in ("a/src/x.ts", "a/src/y.tsx", "a/dist/x.ts", "a/node_modules/p/index.ts", "a/src/m.sql",
                "a/config/default.config.json", "a/package.json", "a/tsconfig.json", "a/data/big.json"):
        write(tmp_path, rel, "{}")
    (tmp_path / "a/.git").mkdir()
    found = discover(tmp_path, Conventions().static.skip_dirs)
    assert [(f.rel, f.kind) for f in found.files] == [
        ("a/config/default.config.json", "json"), ("a/src/m.sql", "sql"), ("a/src/x.ts", "ts"), ("a/src/y.tsx", "tsx")]
    assert found.packages == ["a/package.json"] and found.tsconfigs == ["a/tsconfig.json"]
    assert found.git_roots == ["a"]


def test_package_entries_map_dist_to_src(tmp_path):
    write(tmp_path, "pkgs/msg/package.json", json.dumps(
        {"name": "@s/msg",
         "exports": {".": {"import": {"types": "./dist/index.d.ts"}}, "./jobs": "./dist/jobs/index.js"}}))
    write(tmp_path, "pkgs/plain/package.json", json.dumps({"name": "plain"}))
    files = ["pkgs/msg/src/index.ts", "pkgs/msg/src/jobs/index.ts", "pkgs/plain/src/index.ts", "app/src/a.ts",
             "app/src/b/index.ts", "app/src/c.ts"]
    pkgs = [read_package(tmp_path, "pkgs/msg/package.json"), read_package(tmp_path, "pkgs/plain/package.json")]
    layout = Layout(tmp_path, files, pkgs, [])
    assert layout.resolve("app/src/a.ts", "@s/msg") == "pkgs/msg/src/index.ts"
    assert layout.resolve("app/src/a.ts", "@s/msg/jobs") == "pkgs/msg/src/jobs/index.ts"
    assert layout.resolve("app/src/a.ts", "plain") == "pkgs/plain/src/index.ts"
    assert layout.resolve("app/src/a.ts", "./c.js") == "app/src/c.ts"
    assert layout.resolve("app/src/a.ts", "./b") == "app/src/b/index.ts"
    assert layout.resolve("app/src/a.ts", "../../outside.js") is None
    assert layout.resolve("app/src/a.ts", "typeorm") is None
    assert layout.repo_of("app/src/a.ts") == "app"
    assert layout.package_dir_of("pkgs/msg/src/jobs/index.ts") == "pkgs/msg"


def test_tsconfig_paths_and_base_url(tmp_path):
    write(tmp_path, "svc/tsconfig.base.json", '{ "compilerOptions": { "baseUrl": "./src", // base\n'
          ' "paths": { "@app/*": ["modules/*"], "@cfg": ["config/index.ts"], } } }')
    write(tmp_path, "svc/tsconfig.json", '{ "extends": "./tsconfig.base", "compilerOptions": { "strict": true } }')
    ts = read_tsconfig(tmp_path, "svc/tsconfig.json")
    assert ts is not None and ts.base == "svc/src"
    files = ["svc/src/modules/user/user.service.ts", "svc/src/config/index.ts", "svc/src/shared/util.ts",
             "svc/src/main.ts"]
    layout = Layout(tmp_path, files, [], [], [ts])
    assert layout.resolve("svc/src/main.ts", "@app/user/user.service.js") == "svc/src/modules/user/user.service.ts"
    assert layout.resolve("svc/src/main.ts", "@cfg") == "svc/src/config/index.ts"
    assert layout.resolve("svc/src/main.ts", "shared/util") == "svc/src/shared/util.ts"
    assert layout.resolve("other/x.ts", "@app/user/user.service") is None


def test_alias_resolution_end_to_end(tmp_path):
    """A handler found through a tsconfig alias import is routed by the worker importing it that way."""
    write(tmp_path, "msg/package.json", '{"name": "@x/msg"}')
    write(tmp_path, "msg/src/index.ts", "export enum BillingJobType { CHARGE = 'billing.charge' }\n"
          "export enum BillingQueue { MAIN = 'billing' }\n")
    write(tmp_path, "worker/tsconfig.json", '{"compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["src/*"]}}}')
    write(tmp_path, "worker/src/handlers/charge.handler.ts",
          "import { BillingJobType } from '@x/msg';\n"
          "export class ChargeHandler { readonly jobType = BillingJobType.CHARGE; }\n")
    write(tmp_path, "worker/src/billing.worker.ts",
          "import { Processor } from '@nestjs/bullmq';\nimport { BillingQueue } from '@x/msg';\n"
          "import { ChargeHandler } from '@/handlers/charge.handler';\n"
          "@Processor(BillingQueue.MAIN)\nexport class BillingWorker { constructor(private h: ChargeHandler) {} }\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    r = svc.analyze_impact("billing.charge")
    assert {(c.kind, c.symbol) for c in r.consumers} == {("handler", "ChargeHandler"), ("worker", "BillingWorker")}


def test_facts_of_an_unusual_file_do_not_crash():
    cfg = extract_config(Conventions())
    src = b"""
    declare enum Legacy { A = 'a' }
    export default class { x = 1 }
    export * as ns from './ns.js';
    const { a, b } = something;
    enum Auto { X, Y }
    export const fn = async <T,>(x: T) => `${x}`;
    """
    facts = extract(src, "ts", cfg)
    assert facts["enums"]["Legacy"][1][0][:2] == ["A", ["s", "a"]]
    assert facts["enums"]["Auto"][1][0][1] == ["?", "auto"]
    assert ["ns", "*", "./ns.js"] in facts["reexports"]
    assert facts["functions"]["fn"][2] == ["t", [["p", "x"]]] or facts["functions"]["fn"][2][0] == "t"
    assert extract(b"<div>{x}</div>;", "tsx", cfg)["v"] >= 1
    assert extract(b"{ not json", "json", cfg).get("error") is True
    assert extract(b"", "ts", cfg).get("error") is None


def test_outcome_events_fall_back_to_the_conventions(tmp_path):
    """Without the audit trigger's SQL in the workspace, job outcomes come from [conventions] (heuristic)."""
    write(tmp_path, "msg/package.json", '{"name": "@x/msg"}')
    write(tmp_path, "msg/src/index.ts", "export enum BillingJobType { CHARGE = 'billing.charge' }\n")
    write(tmp_path, "ms-billing/src/charge.ts",
          "import { BillingJobType } from '@x/msg';\nimport { JobsOutboxEntity } from '@x/db';\n"
          "export const f = () =>\n"
          "  JobsOutboxEntity.createJob({ type: BillingJobType.CHARGE, emitter: 'ms-billing' });\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    r = svc.analyze_impact("billing.charge")
    outcomes = {(f.value, f.confidence, f.site.file) for f in r.followups}
    assert outcomes == {
        ("job.outbox.success", "heuristic", "(conventions)"),
        ("billing:job:outbox:success", "heuristic", "(conventions)"),
        ("job.outbox.failed", "heuristic", "(conventions)"),
        ("billing:job:outbox:failure", "heuristic", "(conventions)"),
        ("billing:job:outbox:failed", "heuristic", "(conventions)")}
    assert all("was not found" in f.site.detail["reason"] for f in r.followups)


def test_unresolved_reasons_name_the_missing_member(tmp_path):
    write(tmp_path, "msg/package.json", '{"name": "@x/msg"}')
    write(tmp_path, "msg/src/index.ts", "export enum BillingJobType { CHARGE = 'billing.charge' }\n")
    write(tmp_path, "svc/src/a.ts",
          "import { BillingJobType } from '@x/msg';\nimport { Other } from 'external-lib';\n"
          "import { JobsOutboxEntity } from '@x/db';\n"
          "export const a = () => JobsOutboxEntity.createJob({ type: BillingJobType.REFUND });\n"
          "export const b = () => JobsOutboxEntity.createJob({ type: Other.X });\n"
          "export const c = () => JobsOutboxEntity.createJob({ type: Missing.X });\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    reasons = {u.detail["raw"]: u.detail["reason"] for u in svc.analyze_impact("billing.charge").unresolved}
    assert reasons == {
        "BillingJobType.REFUND": "BillingJobType (msg/src/index.ts) has no member 'REFUND'",
        "Other.X": "'Other' is imported from 'external-lib', which is not in the workspace",
        "Missing.X": "'Missing' is neither declared nor imported in this file",
    }


def test_more_code_shapes(tmp_path):
    """Handlers listed in a const array, options in a const object, nested `as const` objects, queue.add."""
    write(tmp_path, "msg/package.json", '{"name": "@x/msg"}')
    write(tmp_path, "msg/src/index.ts",
          "export const Jobs = { billing: { CHARGE: 'billing.charge', REFUND: 'billing.refund' } } as const;\n"
          "export enum BillingJobType { CHARGE = 'billing.charge', REFUND = 'billing.refund' }\n"
          "export enum BillingQueue { MAIN = 'billing' }\nexport enum BillingEventType { PAID = 'billing.paid' }\n")
    write(tmp_path, "pp/package.json", '{"name": "@x/pp"}')
    write(tmp_path, "pp/src/index.ts", "export abstract class BatchPostProcessor {}\n")
    write(tmp_path, "svc/src/producer.ts",
          "import { Jobs } from '@x/msg';\nimport { JobsOutboxEntity } from '@x/db';\n"
          "export const charge = () => JobsOutboxEntity.createJob({ type: Jobs.billing.CHARGE });\n")
    write(tmp_path, "svc/src/direct.ts",
          "import { BillingJobType } from '@x/msg';\n"
          "export const refund = (queue: any) => queue.add(BillingJobType.REFUND, { id: 1 });\n")
    write(tmp_path, "worker/src/handlers.ts",
          "import { BillingJobType } from '@x/msg';\n"
          "export class ChargeHandler { readonly jobType = BillingJobType.CHARGE; }\n"
          "export class RefundHandler { readonly jobType = BillingJobType.REFUND; }\n"
          "export const HANDLERS = [ChargeHandler, RefundHandler];\n")
    write(tmp_path, "worker/src/billing.worker.ts",
          "import { Processor } from '@nestjs/bullmq';\nimport { BillingQueue } from '@x/msg';\n"
          "import { HANDLERS } from './handlers.js';\n"
          "@Processor(BillingQueue.MAIN)\nexport class BillingWorker { handlers = HANDLERS; }\n")
    write(tmp_path, "consumer/src/paid.ts",
          "import { BatchPostProcessor } from '@x/pp';\nimport { BillingEventType } from '@x/msg';\n"
          "export class PaidPostProcessor extends BatchPostProcessor {\n"
          "  shouldProcess(t: string) { return t === BillingEventType.PAID; }\n}\n")
    write(tmp_path, "consumer/src/main.ts",
          "import { PaidPostProcessor } from './paid.js';\n"
          "const OPTIONS = { streamName: 'stream:billing', groupName: 'paid' };\n"
          "export const start = (redis: any) => new PaidPostProcessor(redis, OPTIONS);\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    charge = svc.analyze_impact("billing.charge")
    assert {(p.kind, p.file) for p in charge.producers} == {("create_job", "svc/src/producer.ts")}
    assert {(c.kind, c.symbol) for c in charge.consumers} == {("handler", "ChargeHandler"), ("worker", "BillingWorker")}
    refund = svc.analyze_impact("BillingJobType.REFUND")
    assert [(p.kind, p.confidence) for p in refund.producers] == [("direct_queue", "heuristic")]
    assert {c.symbol for c in refund.consumers} == {"RefundHandler", "BillingWorker"}
    paid = svc.analyze_impact("billing.paid")
    assert [(c.symbol, c.detail["stream"], c.detail["group"]) for c in paid.consumers] == [
        ("PaidPostProcessor", "stream:billing", "paid")]
    assert paid.consumers[0].detail["binding"] == "new PaidPostProcessor(..., OPTIONS)"


def test_other_apis_with_the_same_method_names_are_not_producers(tmp_path):
    """A gRPC client's createEvent({ type }) of a domain "event", a UI withFallback: not messaging calls."""
    write(tmp_path, "msg/package.json", '{"name": "@x/msg"}')
    write(tmp_path, "msg/src/index.ts",
          "export enum BillingEventType { PAID = 'billing.paid' }\nexport enum BillingJobType { CHARGE = 'c' }\n")
    write(tmp_path, "contracts/src/index.ts", "export enum EventKind { CLEANUP = 'cleanup' }\n")
    write(tmp_path, "gateway/src/events.controller.ts",
          "import { EventKind } from '../../contracts/src/index.js';\nimport { BillingEventType } from '@x/msg';\n"
          "export class C {\n  a() { return this.client.createEvent({ title: 't', type: EventKind.CLEANUP }); }\n"
          "  b() { return this.client.createEvent({ type: BillingEventType.PAID }); }\n"
          "  c() { return this.withFallback(() => 1, 2); }\n  d() { return this.withFallback(value, 2); }\n}\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    assert svc.analyze_impact("cleanup").matches == []
    assert [p.symbol for p in svc.analyze_impact("billing.paid").producers] == ["C.b"]
    assert svc.linked().unresolved == {}


def test_a_package_name_declared_twice_resolves_to_the_real_package(tmp_path):
    for root, value in (("npm-packages/packages/msg", "real.job"), ("tools/fixtures/msg", "copy.job")):
        write(tmp_path, f"{root}/package.json", '{"name": "@x/msg"}')
        write(tmp_path, f"{root}/src/index.ts", f"export enum PayJobType {{ PAY = '{value}' }}\n")
    write(tmp_path, "svc/src/a.ts", "import { PayJobType } from '@x/msg';\nimport { JobsOutboxEntity } from '@x/db';\n"
          "export const a = () => JobsOutboxEntity.createJob({ type: PayJobType.PAY });\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    assert [p.file for p in svc.analyze_impact("real.job").producers] == ["svc/src/a.ts"]


def test_values_only_tests_mention_stay_out_of_the_catalogue(tmp_path):
    write(tmp_path, "msg/package.json", '{"name": "@x/msg"}')
    write(tmp_path, "msg/src/index.ts", "export enum PayJobType { PAY = 'pay.job' }\n")
    write(tmp_path, "svc/src/pay.spec.ts", "import { JobsOutboxEntity } from '@x/db';\n"
          "it('x', () => JobsOutboxEntity.createJob({ type: 'spec.only.job', target: 'spec-queue' }));\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    assert {(e.kind, e.value) for e in svc.catalogue().entries} == {("job", "pay.job")}
    r = svc.analyze_impact("spec.only.job", include_tests=True)  # still answered when asked
    assert [p.test_only for p in r.producers] == [True]


def test_post_processor_extending_an_aliased_external_base(tmp_path):
    write(tmp_path, "msg/package.json", '{"name": "@x/msg"}')
    write(tmp_path, "msg/src/index.ts", "export enum PayEventType { PAID = 'pay.paid' }\n")
    write(tmp_path, "pp/src/paid.ts",
          "import { BatchPostProcessor as Batch } from '@external/post-processors';\n"
          "import * as pp from '@external/post-processors';\nimport { PayEventType } from '@x/msg';\n"
          "export class Paid extends Batch {\n"
          "  readonly stream = 'stream:pay';\n  readonly eventTypes = [PayEventType.PAID];\n}\n"
          "export class Paid2 extends pp.SinglePostProcessor { readonly stream = 'stream:pay'; }\n")
    write(tmp_path, "svc/src/pay.ts",
          "import { PayEventType } from '@x/msg';\nimport { EventQueueEntity } from '@x/db';\n"
          "export const e = () =>\n"
          "  EventQueueEntity.createEvent({ type: PayEventType.PAID, targetServices: ['pay'] });\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    consumers = svc.analyze_impact("pay.paid").consumers
    # a post-processor without a filter consumes what is routed to its stream (heuristic)
    assert {(c.symbol, c.detail["filter"], c.confidence) for c in consumers} == {
        ("Paid", "types", "exact"), ("Paid2", "all", "heuristic")}
