"""Benchmark of verify_flow / verify --all on a generated workspace in the target shapes.

    python bench/verify_bench.py [--domains 20] [--jobs-per-domain 40] [--events-per-domain 10]

Generates a workspace (messaging package with one job enum, queue enum and event enum per
domain merged into JobMessagingType and registered in JobRegistry; per domain one ms-*
service producing its jobs and events, one worker runner with a handler file per job,
one worker routing them and an app module providing them; one post-processor per domain),
indexes it with the real static index, then prints:

- cold index build (for scale; the index has its own benchmark);
- verify_flow latency per job and per event type (p50 / p95 / max, warm index; as in the
  server, calls share one session until the index relinks, so the first call pays for the
  registry and module scans and shows as the max);
- verify --all (every type, one session) and failing_checks_by_type (what list_catalogue
  would call), total and per type;
- peak RSS of the process.

Every third domain carries one broken flow per kind, so failing checks are exercised.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.config import Conventions
from tools.mesh_index.service import IndexService
from tools.verify.service import failing_checks_by_type, verify_all, verify_flow


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def generate(root: Path, domains: int, jobs: int, events: int) -> tuple[list[str], list[str]]:
    """Write the workspace; returns the qualified names of its jobs and events."""
    msg = root / "npm-packages/packages/messaging"
    write(msg / "package.json", '{"name": "@bench/messaging", "main": "dist/index.js"}')
    job_names: list[str] = []
    event_names: list[str] = []
    index_imports, spreads, registry, exports = [], [], [], []
    for d in range(domains):
        dom = f"D{d}"
        members = [f"  JOB_{d}_{j} = 'd{d}.job_{j}'," for j in range(jobs)]
        write(msg / f"src/jobs/d{d}/payloads.ts", f"export enum {dom}JobType {{\n" + "\n".join(members) + "\n}\n"
              + "".join(f"export interface IJob{d}x{j}Payload {{ id: string }}\n" for j in range(jobs)))
        write(msg / f"src/jobs/d{d}/queue.ts", f"export enum {dom}Queue {{\n  MAIN = 'd{d}-queue',\n}}\n")
        ev = [f"  EV_{d}_{e} = 'd{d}.event_{e}'," for e in range(events)]
        write(msg / f"src/events/d{d}/events.ts", f"export enum {dom}EventType {{\n" + "\n".join(ev) + "\n}\n")
        index_imports.append(f"import {{ {dom}JobType }} from './d{d}/payloads.js';")
        index_imports.append(
            "import type { " + ", ".join(f"IJob{d}x{j}Payload" for j in range(jobs)) + f" }} from './d{d}/payloads.js';"
        )
        spreads.append(f"  ...{dom}JobType,")
        skip_registry = d % 3 == 0
        registry += [
            f"  [JobMessagingType.JOB_{d}_{j}]: IJob{d}x{j}Payload;"
            for j in range(jobs)
            if not (skip_registry and j == 1)
        ]
        exports += [
            f"export * from './d{d}/payloads.js';",
            f"export * from './d{d}/queue.js';",
        ]
        job_names += [f"JobMessagingType.JOB_{d}_{j}" for j in range(jobs)]
        event_names += [f"{dom}EventType.EV_{d}_{e}" for e in range(events)]
    write(msg / "src/jobs/index.ts", "\n".join(index_imports) + "\n" + "\n".join(exports)
          + "\nexport const JobMessagingType = {\n" + "\n".join(spreads) + "\n} as const;\n"
          + "export type JobMessagingType = (typeof JobMessagingType)[keyof typeof JobMessagingType];\n"
          + "export interface JobRegistry {\n" + "\n".join(registry) + "\n}\n")
    write(msg / "src/events/index.ts", "".join(f"export * from './d{d}/events.js';\n" for d in range(domains)))
    write(msg / "src/index.ts", "export * from './jobs/index.js';\nexport * from './events/index.js';\n")
    for d in range(domains):
        _domain(root, d, jobs, events)
    return job_names, event_names


def _domain(root: Path, d: int, jobs: int, events: int) -> None:
    dom = f"D{d}"
    broken = d % 3 == 0
    ms = root / f"ms-d{d}"
    write(ms / "package.json", f'{{"name": "ms-d{d}"}}')
    for start in range(0, jobs, 10):
        methods = []
        for j in range(start, min(jobs, start + 10)):
            target = f"{dom}Queue.MAIN" if not (broken and j == 0) else "this.pick()"
            methods.append(f"""
  async job{j}(id: string) {{
    await this.ds.transaction(async (manager) => {{
      const job = JobsOutboxEntity.createJob({{
        type: JobMessagingType.JOB_{d}_{j}, emitter: 'ms-d{d}', emitterId: id,
        scheduledAt: new Date(), target: {target}, payload: {{ id }},
      }});
      await new JobsOutboxRepository(manager.getRepository(JobsOutboxModel)).create(job);
    }});
  }}""")
        write(ms / f"src/modules/jobs/jobs-{start}.service.ts", f"""\
import {{ JobsOutboxEntity, JobsOutboxModel }} from '@bench/database';
import {{ JobsOutboxRepository }} from '@bench/outbox';
import {{ JobMessagingType, {dom}Queue }} from '@bench/messaging';

export class Jobs{start}Service {{
  constructor(private readonly ds: DataSource) {{}}
  private pick(): string {{ return process.env.Q ?? ''; }}
{''.join(methods)}
}}
""")
    ev_methods = "".join(f"""
  async ev{e}(id: string) {{
    await this.ds.transaction(async (manager) => {{
      const event = EventQueueEntity.createEvent({{
        type: {dom}EventType.EV_{d}_{e}, emitter: 'ms-d{d}', emitterId: id,
        payload: {{ before: null, after: {{ id }} }}, targetServices: ['d{d}'],
      }});
      await new EventQueueRepository(manager.getRepository(EventQueueModel)).create(event);
    }});
  }}""" for e in range(events))
    write(ms / "src/modules/events/events.service.ts", f"""\
import {{ EventQueueEntity, EventQueueModel }} from '@bench/database';
import {{ EventQueueRepository }} from '@bench/outbox';
import {{ {dom}EventType }} from '@bench/messaging';

export class EventsService {{
  constructor(private readonly ds: DataSource) {{}}
{ev_methods}
}}
""")
    wr = root / f"workers-runners/worker-d{d}"
    write(wr / "package.json", f'{{"name": "worker-d{d}"}}')
    classes = [f"Job{d}x{j}Handler" for j in range(jobs)]
    for j, cls in enumerate(classes):
        read = "job.data.id" if broken and j == 2 else "job.data.payload.id"
        ret = "" if broken and j == 3 else "    return { originalPayload: job.data.payload };\n"
        write(wr / f"src/workers/handlers/job-{j}.handler.ts", f"""import {{ Injectable }} from '@nestjs/common';
import {{ JobMessagingType }} from '@bench/messaging';

@Injectable()
export class {cls} {{
  readonly jobType = JobMessagingType.JOB_{d}_{j};

  async handle(job: JobOf<typeof JobMessagingType.JOB_{d}_{j}>) {{
    const id = {read};
    void id;
{ret}  }}
}}
""")
    imports = "".join(f"import {{ {c} }} from './handlers/job-{j}.handler.js';\n" for j, c in enumerate(classes))
    params = "".join(f"    @Inject({c}) h{j}: {c},\n" for j, c in enumerate(classes))
    write(wr / "src/workers/main.worker.ts", f"""import {{ Inject, Injectable }} from '@nestjs/common';
import {{ Processor }} from '@nestjs/bullmq';
import {{ InternalServerError }} from '@bench/errors';
import {{ {dom}Queue }} from '@bench/messaging';
import {{ BaseWorker }} from '@bench/workers';
{imports}
@Injectable()
@Processor({dom}Queue.MAIN)
export class Main{d}Worker extends BaseWorker<string> {{
  private readonly handlerMap: Map<string, IJobHandler>;

  constructor(
{params}  ) {{
    super();
    const handlers: IJobHandler[] = [{", ".join(f"h{j}" for j in range(jobs))}];
    this.handlerMap = new Map(handlers.map((h) => [h.jobType, h]));
  }}

  protected async processJob(job: JobOf<string>) {{
    const handler = this.handlerMap.get(job.name);
    if (!handler) {{
      throw new InternalServerError(`Unhandled job type: ${{job.name}}`, 'UNHANDLED');
    }}
    return handler.handle(job);
  }}
}}
""")
    provided = [c for j, c in enumerate(classes) if not (broken and j == 4)]
    module_imports = imports.replace("./handlers/", "./workers/handlers/")
    write(wr / "src/app.module.ts", f"""import {{ Module }} from '@nestjs/common';
import {{ Main{d}Worker }} from './workers/main.worker.js';
{module_imports}
@Module({{
  providers: [Main{d}Worker, {", ".join(provided)}],
}})
export class AppModule {{}}
""")
    accepted = [f"{dom}EventType.EV_{d}_{e}" for e in range(events) if not (broken and e == 0)]
    write(root / f"post-processors-runner/src/d{d}.post-processor.ts", f"""\
import {{ SinglePostProcessor }} from '@bench/post-processors';
import {{ {dom}EventType }} from '@bench/messaging';

export class D{d}PostProcessor extends SinglePostProcessor {{
  readonly stream = 'stream:d{d}';
  readonly group = 'd{d}-group';
  readonly handledTypes = [{", ".join(accepted)}];

  async process(message: unknown): Promise<void> {{ void message; }}
}}
""")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", type=int, default=20)
    parser.add_argument("--jobs-per-domain", type=int, default=40)
    parser.add_argument("--events-per-domain", type=int, default=10)
    parser.add_argument("--samples", type=int, default=200, help="verify_flow calls timed per kind")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mesh-verify-bench-") as tmp:
        root = Path(tmp) / "ws"
        started = time.perf_counter()
        jobs, events = generate(root, args.domains, args.jobs_per_domain, args.events_per_domain)
        files = sum(1 for p in root.rglob("*") if p.is_file())
        print(f"workspace: {files} files, {len(jobs)} job types, {len(events)} event types "
              f"(generated in {time.perf_counter() - started:.1f} s)")
        index = IndexService(root, Conventions(), cache_dir=Path(tmp) / "cache")
        started = time.perf_counter()
        index.refresh()
        print(f"index cold build: {time.perf_counter() - started:.2f} s")

        for kind, names in (("job", jobs), ("event", events)):
            step = max(1, len(names) // args.samples)
            timings = []
            for name in names[::step][: args.samples]:
                t0 = time.perf_counter()
                verify_flow(index, name)
                timings.append((time.perf_counter() - t0) * 1000)
            print(f"verify_flow ({kind}, {len(timings)} calls): p50 {statistics.median(timings):.1f} ms, "
                  f"p95 {pct(timings, 0.95):.1f} ms, max {max(timings):.1f} ms")

        started = time.perf_counter()
        report = verify_all(index)
        took = time.perf_counter() - started
        print(f"verify --all: {len(report.flows)} flows in {took:.2f} s ({1000 * took / len(report.flows):.1f} ms "
              f"per flow); {report.failed_flows} with a failing check, {report.unknown_flows} incomplete")
        started = time.perf_counter()
        table = failing_checks_by_type(index)
        print(f"failing_checks_by_type: {len(table)} types in {time.perf_counter() - started:.2f} s")
        index.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MB")


if __name__ == "__main__":
    main()
