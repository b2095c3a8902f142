"""Generate a synthetic TypeScript workspace of N files in the target system's shapes.

Layout (per domain ``d<i>``, about 100 files, scaled to reach N):

- ``npm-packages/packages/messaging``: a job enum, a queue enum, an event enum, a websocket
  enum and a mapping table per domain; ``JobMessagingType`` merges every job enum by spread;
- ``ms-d<i>``: a fallback command controller and its base, services calling ``createJob`` /
  ``createEvent``, TypeORM migrations with triggers, and ordinary files (DTOs, entities,
  services, specs) that import the messaging package and hold ordinary code;
- ``workers-runners/worker-d<i>``: one handler per job and a ``@Processor`` worker routing them;
- ``post-processors-runner/post-processor-d<i>``: post-processors, DI options providers, a module.

Usage: ``python bench/gen_workspace.py OUT_DIR --files 20000``. Deterministic for a given N.
"""

# ruff: noqa: E501 - the templates below are TypeScript source, kept as written in the target code base
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

JOBS_PER_DOMAIN = 5
EVENTS_PER_DOMAIN = 5


def _w(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _cap(d: str) -> str:
    return d[0].upper() + d[1:]


def filler(d: str, i: int, rng: random.Random) -> str:
    """An ordinary service/DTO file: imports, a class with a few methods, no messaging site."""
    methods = []
    for m in range(rng.randint(3, 7)):
        methods.append(f"""
  async method{m}(id: string, input: {_cap(d)}Input{i}): Promise<{_cap(d)}Output{i} | null> {{
    const found = await this.repository.findOne({{ where: {{ id, tenant: input.tenant }} }});
    if (!found) {{
      this.logger.warn(`nothing for ${{id}}`, {{ id, step: {m} }});
      return null;
    }}
    const items = input.items.filter((x) => x.enabled && x.weight > {m}).map((x) => ({{ ...x, seen: true }}));
    for (const item of items) {{
      await this.repository.save({{ ...found, updatedAt: new Date(), total: found.total + item.weight }});
    }}
    return {{ id, count: items.length, label: `${{found.name}}-{m}` }};
  }}""")
    return f"""import {{ Injectable, Logger }} from '@nestjs/common';
import type {{ Repository }} from 'typeorm';
import {{ {_cap(d)}Entity{i % 7} }} from '../entities/{d}-entity-{i % 7}.js';

export interface {_cap(d)}Input{i} {{
  tenant: string;
  items: {{ enabled: boolean; weight: number; name: string }}[];
}}

export interface {_cap(d)}Output{i} {{
  id: string;
  count: number;
  label: string;
}}

@Injectable()
export class {_cap(d)}Service{i} {{
  private readonly logger = new Logger('{_cap(d)}Service{i}');

  constructor(private readonly repository: Repository<{_cap(d)}Entity{i % 7}>) {{}}
{''.join(methods)}
}}
"""


def messaging(root: Path, domains: list[str]) -> int:
    base = "npm-packages/packages/messaging"
    _w(root, f"{base}/package.json", json.dumps({"name": "@bench/messaging", "main": "./dist/index.js",
                                                "types": "./dist/index.d.ts"}))
    _w(root, "npm-packages/packages/shared/package.json", json.dumps({"name": "@bench/shared"}))
    streams = "\n".join(f"  {d.upper()}_EVENTS = '{d}:events'," for d in domains)
    _w(root, "npm-packages/packages/shared/src/index.ts", f"export enum Streams {{\n{streams}\n}}\n")
    count = 3
    for d in domains:
        c = _cap(d)
        jobs = "\n".join(f"  {d.upper()}_JOB_{j} = '{d}.job_{j}'," for j in range(JOBS_PER_DOMAIN))
        fallback = f"  FALLBACK_UPDATE_{d.upper()} = '{d}.fallback_update',"
        _w(root, f"{base}/src/jobs/{d}/payloads.ts", f"export enum {c}JobType {{\n{jobs}\n{fallback}\n}}\n")
        _w(root, f"{base}/src/jobs/{d}/queue.ts",
           f"export enum {c}Queue {{\n  MAIN = '{d}-queue',\n  FALLBACK = 'fallback-{d}-queue',\n}}\n")
        events = "\n".join(f"  {d.upper()}_EVENT_{e} = '{d}.event_{e}'," for e in range(EVENTS_PER_DOMAIN))
        _w(root, f"{base}/src/events/{d}/payloads.ts", f"export enum {c}EventMessagingType {{\n{events}\n}}\n")
        ws = "\n".join(f"  {d.upper()}_EVENT_{e} = 'ws.{d}.event_{e}'," for e in range(2))
        _w(root, f"{base}/src/websockets/{d}/types.ts", f"export enum {c}WebsocketMessagingType {{\n{ws}\n}}\n")
        mapping = "\n".join(f"  [{c}EventMessagingType.{d.upper()}_EVENT_{e}]: {c}WebsocketMessagingType.{d.upper()}_EVENT_{e},"
                           for e in range(2))
        _w(root, f"{base}/src/websockets/{d}/mapping.ts",
           f"import {{ {c}EventMessagingType }} from '../../events/{d}/payloads.js';\n"
           f"import {{ {c}WebsocketMessagingType }} from './types.js';\n\n"
           f"export const {d.upper()}_EVENT_TO_WS_EVENT_MAPPING = {{\n{mapping}\n}} as const;\n")
        count += 5
    imports = "\n".join(f"import {{ {_cap(d)}JobType }} from './{d}/payloads.js';" for d in domains)
    spreads = "\n".join(f"  ...{_cap(d)}JobType," for d in domains)
    exports = "\n".join(f"export * from './{d}/payloads.js';\nexport * from './{d}/queue.js';" for d in domains)
    _w(root, f"{base}/src/jobs/index.ts",
       f"{imports}\n\nexport const JobMessagingType = {{\n{spreads}\n}} as const;\n\n{exports}\n")
    ev = "\n".join(f"export * from './events/{d}/payloads.js';\nexport * from './websockets/{d}/types.js';\n"
                   f"export * from './websockets/{d}/mapping.js';" for d in domains)
    _w(root, f"{base}/src/index.ts", f"export * from './jobs/index.js';\n{ev}\n"
       "export function getEventStreamName(service: string): string {\n  return `stream:${service}`;\n}\n")
    return count + 2


def service(root: Path, d: str, fillers: int, rng: random.Random) -> int:
    c = _cap(d)
    base = f"ms-{d}"
    _w(root, f"{base}/package.json", json.dumps({"name": f"ms-{d}"}))
    _w(root, f"{base}/src/controllers/base.command.controller.ts", f"""import {{ JobsOutboxEntity }} from '@bench/database';
import {{ {c}Queue }} from '@bench/messaging';

export abstract class BaseCommandController {{
  protected async withFallback<T>(jobType: string, userId: string, payload: unknown, op: () => Promise<T>): Promise<T> {{
    try {{
      return await op();
    }} catch (error) {{
      const job = JobsOutboxEntity.createJob({{ type: jobType, emitter: 'ms-{d}', emitterId: userId,
        target: {c}Queue.FALLBACK, payload: {{ userId, payload }} }});
      await this.save(job);
      throw error;
    }}
  }}

  private async save(_job: unknown): Promise<void> {{}}
}}
""")
    _w(root, f"{base}/src/controllers/{d}.command.controller.ts", f"""import {{ JobMessagingType }} from '@bench/messaging';
import {{ BaseCommandController }} from './base.command.controller.js';

export class {c}CommandController extends BaseCommandController {{
  async update(data: {{ id: string }}, userId: string) {{
    return this.withFallback(JobMessagingType.FALLBACK_UPDATE_{d.upper()}, userId, data, async () => ({{ ok: true }}));
  }}
}}
""")
    calls = "\n".join(f"""    out.push(JobsOutboxEntity.createJob({{ type: {c}JobType.{d.upper()}_JOB_{j}, target: {c}Queue.MAIN, emitter: 'ms-{d}',
      emitterId: id, payload: {{ id }} }}));""" for j in range(JOBS_PER_DOMAIN - 1))
    events = "\n".join(f"""    out.push(EventQueueEntity.createEvent({{ type: {c}EventMessagingType.{d.upper()}_EVENT_{e}, emitter: 'ms-{d}',
      targetServices: [Streams.{d.upper()}_EVENTS], payload: {{ after: {{ id }} }} }}));""" for e in range(3))
    _w(root, f"{base}/src/{d}.producer.service.ts", f"""import {{ JobsOutboxEntity, EventQueueEntity }} from '@bench/database';
import {{ {c}JobType, {c}Queue, {c}EventMessagingType }} from '@bench/messaging';
import {{ Streams }} from '@bench/shared';

export class {c}ProducerService {{
  produce(id: string): unknown[] {{
    const out: unknown[] = [];
{calls}
{events}
    return out;
  }}
}}
""")
    _w(root, f"{base}/src/migrations/1700000000{rng.randint(100, 999)}-Triggers{c}.ts", f"""import type {{ MigrationInterface, QueryRunner }} from 'typeorm';

export class Triggers{c}1700000000000 implements MigrationInterface {{
  public async up(queryRunner: QueryRunner): Promise<void> {{
    await queryRunner.query(`
      CREATE TRIGGER {d}_rows_trigger AFTER INSERT OR UPDATE ON {d}_rows
      FOR EACH ROW EXECUTE FUNCTION create_event_queue_record('{d}.event_3', 'ms-{d}');
    `);
  }}

  public async down(queryRunner: QueryRunner): Promise<void> {{
    await queryRunner.query(`DROP TRIGGER IF EXISTS {d}_rows_trigger ON {d}_rows;`);
  }}
}}
""")
    for k in range(7):
        _w(root, f"{base}/src/entities/{d}-entity-{k}.ts",
           f"export class {c}Entity{k} {{\n  id!: string;\n  name!: string;\n  total!: number;\n  tenant!: string;\n}}\n")
    for i in range(fillers):
        folder = ("services", "dto", "utils", "tests")[i % 4]
        suffix = ".spec.ts" if folder == "tests" else ".ts"
        _w(root, f"{base}/src/{folder}/{d}-{i}{suffix}", filler(d, i, rng))
    return 11 + fillers


def worker(root: Path, d: str) -> int:
    c = _cap(d)
    base = f"workers-runners/worker-{d}"
    _w(root, f"{base}/package.json", json.dumps({"name": f"worker-{d}"}))
    names = []
    for j in range(JOBS_PER_DOMAIN):
        names.append(f"Job{j}Handler")
        _w(root, f"{base}/src/handlers/job-{j}.handler.ts", f"""import {{ {c}JobType }} from '@bench/messaging';

export class Job{j}Handler {{
  readonly jobType = {c}JobType.{d.upper()}_JOB_{j};

  async handle(job: {{ data: {{ payload: unknown }} }}) {{
    return {{ originalPayload: job.data.payload }};
  }}
}}
""")
    imports = "\n".join(f"import {{ {n} }} from './handlers/job-{j}.handler.js';" for j, n in enumerate(names))
    params = ", ".join(f"h{j}: {n}" for j, n in enumerate(names))
    _w(root, f"{base}/src/{d}.worker.ts", f"""import {{ Processor }} from '@nestjs/bullmq';
import {{ BaseWorker }} from '@bench/workers';
import {{ {c}Queue }} from '@bench/messaging';
{imports}

@Processor({c}Queue.MAIN)
export class {c}Worker extends BaseWorker<string> {{
  constructor({params}) {{
    super();
  }}
}}
""")
    return 2 + JOBS_PER_DOMAIN


def post_processor(root: Path, d: str) -> int:
    c = _cap(d)
    D = d.upper()
    base = f"post-processors-runner/post-processor-{d}"
    _w(root, f"{base}/package.json", json.dumps({"name": f"post-processor-{d}"}))
    _w(root, f"{base}/src/{d}.post-processor.ts", f"""import {{ BatchPostProcessor }} from '@bench/post-processors';
import {{ {c}EventMessagingType }} from '@bench/messaging';

export class {c}EventPostProcessor extends BatchPostProcessor<string> {{
  protected override shouldProcess(eventType: string): boolean {{
    return eventType === {c}EventMessagingType.{D}_EVENT_0 || eventType === {c}EventMessagingType.{D}_EVENT_1;
  }}
}}
""")
    _w(root, f"{base}/src/options.ts", f"""import {{ getEventStreamName }} from '@bench/messaging';
import {{ Streams }} from '@bench/shared';

export const {d.upper()}_OPTIONS = '{d.upper()}_OPTIONS';
export const {d}OptionsProvider = {{
  provide: {d.upper()}_OPTIONS,
  useFactory: () => ({{ groupName: 'pp-{d}', streamName: getEventStreamName(Streams.{d.upper()}_EVENTS) }}),
}};
""")
    _w(root, f"{base}/src/module.ts", f"""import {{ {c}EventPostProcessor }} from './{d}.post-processor.js';
import {{ {d.upper()}_OPTIONS, {d}OptionsProvider }} from './options.js';

export const providers = [
  {d}OptionsProvider,
  {{ provide: {c}EventPostProcessor, useFactory: (r: unknown, o: unknown) => new {c}EventPostProcessor(r, o),
    inject: ['REDIS', {d.upper()}_OPTIONS] }},
];
""")
    return 4


def generate(out: Path, files: int) -> int:
    """Write about ``files`` files under ``out``; returns how many were written."""
    rng = random.Random(files)
    domains_count = max(1, files // 100)
    domains = [f"d{i}" for i in range(domains_count)]
    total = messaging(out, domains)
    _w(out, "npm-packages/packages/post-processors/package.json", json.dumps({"name": "@bench/post-processors"}))
    _w(out, "npm-packages/packages/post-processors/src/index.ts",
       "export abstract class BatchPostProcessor<T> {\n  protected shouldProcess(_t: string): boolean {\n"
       "    return true;\n  }\n}\n")
    total += 1
    per_domain_fixed = 11 + 2 + JOBS_PER_DOMAIN + 4
    budget = files - total
    fillers = max(0, budget // domains_count - per_domain_fixed)
    extra = budget - domains_count * (per_domain_fixed + fillers)
    for n, d in enumerate(domains):
        total += service(out, d, fillers + (1 if n < extra else 0), rng)
        total += worker(out, d)
        total += post_processor(out, d)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--files", type=int, default=20000)
    args = parser.parse_args()
    written = generate(args.out, args.files)
    print(f"{written} files written under {args.out}")


if __name__ == "__main__":
    main()
