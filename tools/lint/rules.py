"""The lint codes: one rule per code, with its default severity and what proves it.

Codes are stable (baselines and SARIF rule ids rely on them); add new ones, never rename.
"""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES: tuple[str, ...] = ("info", "warning", "error")


@dataclass(frozen=True)
class Rule:
    code: str
    title: str
    severity: str  # default severity (a finding may be lowered when part of its evidence is inferred)
    heuristic: bool
    description: str
    help: str
    check: str  # the check (module of tools/lint) that finds it: the engine runs a check for its codes


RULES: tuple[Rule, ...] = (
    Rule("consumer-never-matches", "Post-processor filter accepts nothing produced onto its stream", "error", False,
         "A started post-processor whose filter accepts no type that any production code writes onto the streams "
         "it reads: its messages are acknowledged and dropped. The closest produced types are shown.",
         "Make the filter accept the produced type (or fix the producer's spelling) and read the stream it is "
         "written to.", check="consumers"),
    Rule("type-never-consumed", "Produced type nothing consumes", "info", False,
         "An event type written by production code (including outcome types built by SQL) that no started "
         "post-processor accepts on the streams it travels on (a catalogue orphan).",
         "Add a consumer for it, or stop producing it.", check="orphans"),
    Rule("stream-without-group", "Stream read by no consumer group", "info", False,
         "A stream that events are written to but no started post-processor reads (a catalogue orphan).",
         "Start a post-processor on the stream, or stop writing to it.", check="orphans"),
    Rule("catalogue-orphan", "Catalogue orphan", "info", False,
         "A job, queue or websocket type the catalogue lists as an orphan (no producer, no handler, ...).",
         "See list_catalogue(orphans_only=true) for the reasons.", check="orphans"),
    Rule("worker-queue-not-registered", "Worker on a queue its module does not register", "error", False,
         "A @Processor(X) worker provided by a module whose registerQueue(...) calls list other queues only.",
         "Register the worker's queue in its module (or point the worker at a registered queue).", check="queues"),
    Rule("registered-queue-unread", "Registered queue no worker reads", "warning", False,
         "A queue registered by a module of a worker package that no worker of the workspace listens on.",
         "Add a worker for the queue, or remove the registration.", check="queues"),
    Rule("payload-wrong-level", "Handler reads the payload at the envelope level", "error", False,
         "A handler reads job.data.<field> where <field> is not an envelope field: the job data is the envelope "
         "({payload, emitter, emitterId, ...}), so the value is undefined at run time (often behind a cast).",
         "Read the field from job.data.payload instead.", check="payload"),
    Rule("migration-diverges", "Copies of a shared migration differ", "warning", False,
         "The same migration (class name or timestamp) exists in several repositories with different SQL in up(), "
         "so databases migrated from different repositories end with different triggers or tables.",
         "Make every copy identical (copy the reference version), or give the variant its own migration.",
         check="migrations"),
    Rule("migration-missing", "Repository lacks later migrations of a shared set", "warning", False,
         "A repository holds migrations of a set shared by other repositories but not the later ones they have.",
         "Copy the missing migrations into this repository.", check="migrations"),
    Rule("option-dropped", "Option key the declared type does not have", "error", False,
         "An object literal passed as a typed options object (constructor argument, provider useFactory result "
         "injected with @Inject) has keys its declared type does not have: nothing reads them.",
         "Rename the key to the declared option (closest shown) or add it to the type and read it.", check="options"),
    Rule("config-key-unread", "Configuration key nothing reads", "warning", True,
         "A key of a package's JSON configuration whose sibling keys are read but whose name appears in no "
         "source file of the workspace (heuristic: a key read through a computed name is not seen).",
         "Remove the key, or read it where its siblings are read.", check="options"),
    Rule("status-precondition", "Status precondition that cannot hold", "warning", True,
         "An UPDATE ... WHERE status = 'X' on an outbox table, run by a consumer (handler, worker, post-processor) "
         "after the outbox runner has already moved the row past X (heuristic: based on the runner's order).",
         "Match the status the row has when this code runs (or drop the condition).", check="status"),
    Rule("contract-newer-than-pin", "Contract member newer than the pinned package", "warning", True,
         "A service uses a contract member that, by the contracts package's changelog, appeared in a version "
         "later than the one its lock file (or resolutions) pins.",
         "Upgrade the pinned contracts package in that service (lock file), or stop using the member.",
         check="contracts"),
)

BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}
CODES: tuple[str, ...] = tuple(r.code for r in RULES)


def codes_of(check: str) -> tuple[str, ...]:
    """The codes the check ``check`` produces, in :data:`RULES` order."""
    return tuple(r.code for r in RULES if r.check == check)
