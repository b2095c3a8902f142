"""File-level fact extractors on real TypeScript parsed by tree-sitter (no index involved)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from server.config import StaticConventions
from tools.verify import facts, facts_producers, modules
from tools.verify.tsparse import ParsedFile, parse_file

CONV = StaticConventions()


@pytest.fixture
def ts(tmp_path: Path):
    counter = iter(range(1000))

    def parse(source: str) -> ParsedFile:
        path = tmp_path / f"f{next(counter)}.ts"
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        parsed = parse_file(path)
        assert parsed is not None
        return parsed

    return parse


def handler(ts, body: str, params: str = "job: JobOf<X>") -> facts.HandlerFacts:
    source = f"""
    export class H {{
      readonly jobType = JobMessagingType.X;
      async handle({params}) {{
    {textwrap.indent(textwrap.dedent(body), "    ")}
      }}
    }}
    """
    return facts.handler_facts(ts(source), "H", CONV)


def kinds(f: facts.HandlerFacts) -> list[str]:
    return [r.kind for r in f.returns]


def test_original_payload_returned_directly(ts) -> None:
    f = handler(ts, "return { originalPayload: job.data.payload };")
    assert f.found and kinds(f) == ["original_payload"] and f.envelope_reads == []


@pytest.mark.parametrize(
    "body",
    [
        "const payload = job.data.payload;\nreturn { originalPayload: payload };",
        "const { payload } = job.data;\nreturn { originalPayload: payload as IPayload };",
        "const { data } = job;\nreturn { originalPayload: data.payload };",
        "const originalPayload = job.data.payload;\nreturn { originalPayload };",
        "return { originalPayload: job?.data?.payload, extra: 1 };",
    ],
)
def test_original_payload_through_aliases(ts, body: str) -> None:
    assert kinds(handler(ts, body)) == ["original_payload"]


def test_destructured_parameter_is_an_envelope(ts) -> None:
    f = handler(ts, "return { originalPayload: data.payload };", params="{ data }: JobOf<X>")
    assert kinds(f) == ["original_payload"]


def test_returning_nothing_is_reported_with_lines(ts) -> None:
    f = handler(ts, "if (!job.data.payload.id) {\n  return;\n}\nthis.work();")
    assert kinds(f) == ["nothing", "nothing"]
    assert f.returns[0].line == 6 and f.returns[1].text.startswith("(end of handle")


def test_wrong_value_and_missing_key(ts) -> None:
    assert kinds(handler(ts, "return { originalPayload: job.data };")) == ["wrong_value"]
    assert kinds(handler(ts, "return { ok: true };")) == ["missing_key"]


def test_opaque_returns_are_not_judged(ts) -> None:
    assert kinds(handler(ts, "return this.delegate.handle(job);")) == ["opaque"]
    assert kinds(handler(ts, "return { ...base };")) == ["opaque"]


def test_returns_inside_callbacks_do_not_count(ts) -> None:
    f = handler(ts, "const xs = [1].map((x) => { return x; });\nreturn { originalPayload: job.data.payload };")
    assert kinds(f) == ["original_payload"]


def test_try_at_the_end_is_not_a_fall_through(ts) -> None:
    f = handler(ts, "try {\n  return { originalPayload: job.data.payload };\n} catch (e) {\n  throw e;\n}")
    assert kinds(f) == ["original_payload"]


RETURN = "return { originalPayload: job.data.payload };"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # a path that falls off the end of handle returns nothing
        (f"if (job.data.payload.ok) {{\n  {RETURN}\n}}", ["original_payload", "nothing"]),
        (f"try {{\n  {RETURN}\n}} catch (e) {{\n  this.log(e);\n}}", ["original_payload", "nothing"]),
        (f"if (a) {{\n  {RETURN}\n}} else if (b) {{\n  {RETURN}\n}}", ["original_payload"] * 2 + ["nothing"]),
        # every path leaves by a return or a throw
        (f"if (a) {{\n  {RETURN}\n}} else {{\n  throw new E();\n}}", ["original_payload"]),
        (f"try {{\n  {RETURN}\n}} finally {{\n  this.done();\n}}", ["original_payload"]),
        # a switch at the end is not read: opaque, so the check says unknown rather than pass
        (f"switch (job.data.payload.kind) {{\n  case 'a':\n    {RETURN}\n}}", ["original_payload", "opaque"]),
        ("throw new E();", []),
    ],
)
def test_every_way_out_of_handle_is_judged(ts, body: str, expected: list[str]) -> None:
    assert kinds(handler(ts, body)) == expected


def test_handing_the_job_on_is_recorded(ts) -> None:
    f = handler(ts, f"await this.helper.run(job);\nthis.log(job.id);\nawait this.audit({{ job }});\n{RETURN}")
    assert [(r.line, r.text) for r in f.envelope_passed] == [(5, "(job)"), (7, "{ job }")]
    assert f.envelope_reads == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("const sku = job.data.sku;\nreturn { originalPayload: job.data.payload };", "sku"),
        ("const { sku, payload } = job.data;\nreturn { originalPayload: payload };", "sku"),
        ("const d = job.data;\nuse(d.orderId);\nreturn { originalPayload: d.payload };", "orderId"),
        ("use(job.data['userId']);\nreturn { originalPayload: job.data.payload };", "userId"),
    ],
)
def test_envelope_field_reads(ts, body: str, field: str) -> None:
    f = handler(ts, body)
    assert [r.field for r in f.envelope_reads] == [field]


def test_envelope_fields_and_payload_reads_are_fine(ts) -> None:
    body = "\n".join(
        [
            "const tp = job.data.traceparent;",
            "const id = job.data.payload.id;",
            "return { originalPayload: job.data.payload };",
        ]
    )
    f = handler(ts, body)
    assert f.envelope_reads == []


def test_envelope_handed_on_is_recorded(ts) -> None:
    f = handler(ts, "await this.service.run(job.data);\nreturn { originalPayload: job.data.payload };")
    assert f.envelope_reads == [] and [r.line for r in f.envelope_passed] == [5]
    f = handler(ts, "const d = job.data;\nthis.use(d);\nreturn { originalPayload: d.payload };")
    assert [r.line for r in f.envelope_passed] == [6]
    # destructuring, property reads and the returned value are not hand-overs
    body = "const { payload } = job.data;\nconst x = (job.data as Env).payload;\nreturn { originalPayload: job.data };"
    f = handler(ts, body)
    assert f.envelope_passed == []


def test_handle_as_an_arrow_field(ts) -> None:
    pf = ts(
        """
        export class A { handle = async (job: J) => ({ originalPayload: job.data.payload }); }
        export class B { handle = async (job: J) => { const x = job.data.x; }; }
        """
    )
    a = facts.handler_facts(pf, "A", CONV)
    assert a.found and [r.kind for r in a.returns] == ["original_payload"]
    b = facts.handler_facts(pf, "B", CONV)
    assert [r.kind for r in b.returns] == ["nothing"] and [r.field for r in b.envelope_reads] == ["x"]


def test_handler_without_handle_method(ts) -> None:
    f = facts.handler_facts(ts("export class H extends Base { readonly jobType = X.Y; }"), "H", CONV)
    assert f.class_line == 1 and not f.found
    assert not facts.handler_facts(ts("export class Other {}"), "H", CONV).found


def test_bare_throws_in_worker(ts) -> None:
    pf = ts(
        """
        export class W extends BaseWorker {
          protected async processJob(job) {
            if (!job) throw new InternalServerError('x', 'Y');
            switch (job.name) {
              default:
                throw new Error(`Unhandled ${job.name}`);
            }
          }
          other() { throw Error('again'); }
        }
        export class Elsewhere { f() { throw new Error('not in W'); } }
        """
    )
    throws = facts.bare_throws(pf, "W", CONV)
    assert throws is not None and [t.line for t in throws] == [7, 10]
    assert facts.bare_throws(pf, "Missing", CONV) is None


def test_module_providers_flattened(ts) -> None:
    pf = ts(
        """
        import { Module } from '@nestjs/common';
        import { A as Alpha } from './a.js';
        import { EXTERNAL } from './external.js';
        const LOCAL = [Alpha, B];
        const MORE = [...LOCAL, C];
        @Module({
          providers: [W, ...MORE, { provide: D, useClass: E }, { provide: 'TOKEN', useValue: 1 }, ...EXTERNAL, make()],
        })
        export class AppModule {}
        """
    )
    [module] = modules.module_providers(pf, CONV)
    assert module.name == "AppModule" and module.line == 7
    assert set(module.providers) == {"W", "A", "B", "C", "D", "E"}
    assert [text for text, _ in module.unresolved] == ["...EXTERNAL", "make()"]


def test_module_providers_from_a_named_array(ts) -> None:
    pf = ts(
        """
        const providers = [X, Y];
        @Module({ imports: [], providers })
        export class FeatureModule {}
        """
    )
    [module] = modules.module_providers(pf, CONV)
    assert set(module.providers) == {"X", "Y"}


def test_direct_queue_calls(ts) -> None:
    pf = ts(
        """
        import { Queue as BullQueue } from 'bullmq';
        export class S {
          private readonly local = new BullQueue(ShopQueue.SHOP);
          constructor(@InjectQueue(ShopQueue.RETURNS) private readonly q: Queue, private readonly repo: Repo) {}
          async a() {
            await this.q.add(JobMessagingType.A, { payload: {} });
            await this.local.addBulk([{ name: JobMessagingType.B, data: {} }]);
            await this.repo.add(JobMessagingType.C);
            const other = new BullQueue('raw-queue');
            await other.add('literal.name', {});
          }
        }
        """
    )
    calls = facts_producers.direct_queue_calls(pf, CONV)
    assert facts_producers.collection_receivers(pf) == set()
    assert [(c.name_expr, c.queue_expr, c.symbol) for c in calls] == [
        ("JobMessagingType.A", "ShopQueue.RETURNS", "S.a"),
        ("JobMessagingType.B", "ShopQueue.SHOP", "S.a"),
        ("'literal.name'", "'raw-queue'", "S.a"),
    ]


def test_transaction_context(ts) -> None:
    pf = ts(
        """
        export class S {
          async inTx() {
            await this.ds.transaction(async (m) => {
              const e = EventQueueEntity.createEvent({ type: T.A });
            });
          }
          async explicit() {
            await qr.startTransaction();
            const e = EventQueueEntity.createEvent({ type: T.A });
            await qr.commitTransaction();
          }
          async late() {
            await qr.startTransaction();
            await qr.commitTransaction();
            const e = EventQueueEntity.createEvent({ type: T.A });
          }
          async viaParam(manager: EntityManager) {
            const e = EventQueueEntity.createEvent({ type: T.A });
          }
          async bare() {
            const e = EventQueueEntity.createEvent({
              type: T.A,
            });
          }
        }
        """
    )
    tx = facts_producers.transaction_context
    status = {line: tx(pf, line, ["createEvent"], CONV).status for line in (5, 10, 16, 19, 23)}
    assert status == {
        5: "in_transaction",
        10: "in_transaction",
        16: "after_commit",
        19: "caller_supplied",
        23: "unknown",
    }
    # the line of the `type:` property inside a multi-line call finds the call too
    assert facts_producers.transaction_context(pf, 24, ["createEvent"], CONV).status == "unknown"
    assert facts_producers.transaction_context(pf, 2, ["createEvent"], CONV).note.startswith("no call")


def test_registry_entries_rewrite_import_aliases(ts) -> None:
    pf = ts(
        """
        import { JobMessagingType as J } from './merged.js';
        export interface JobRegistry {
          [J.SHIP]: IShip;
          ['raw.value']: IRaw;
        }
        export interface Other { [J.NOT]: X; }
        """
    )
    entries = facts.registry_entries(pf, CONV)
    assert [(e.key, e.key_is_string, e.line, e.payload_type) for e in entries] == [
        ("JobMessagingType.SHIP", False, 4, "IShip"),
        ("raw.value", True, 5, "IRaw"),
    ]


def test_collection_receivers(ts) -> None:
    pf = ts(
        """
        export class S {
          private readonly seen = new Set<string>();
          private readonly byType: Map<string, number> = new Map();
          private readonly q = new Queue(ShopQueue.SHOP);
          run(bus: Bus) {
            const names = [];
            const other = bus;
          }
        }
        """
    )
    assert facts_producers.collection_receivers(pf) == {"this.seen", "this.byType", "names"}
