"""The gather workspace (issue 33): ``tests/fixtures/feedback_workspace`` with ``tests/fixtures/gather_overlay``
laid over it, and its renamed twin.

The overlay holds the shapes of target-system.md's "Shapes of the real workspace that a name-matcher
misses": the ws-service's ``scatterGather.aggregations[]`` config read by a service method
(``aggregations.find(agg => agg.trigger === trigger)``), gather post-processor subclasses passing their
own trigger through ``super(...)`` to a base class that writes ``repository.create({type:
aggregation.successEvent, ...})`` and sends ``getWsEventForEvent(aggregation.successEvent)``,
post-processors whose filter is "any key of the mapping" (``try { mapping(t); return true } catch``), and
the common success post-processor writing ``getEventForJob(payload.after.job_type)`` (emitter
``ms-post-processors``) to the ws-service's job-success stream, read by its job-outcome post-processor.

The twin (:func:`make_twin`) renames, by a fixed map applied to every file: every identifier the fixture
declares (enums, members, tables, functions, classes, fields), every job, event, websocket, queue, stream,
config-key and emitter string, and every file and folder name that carries one of those words. Nothing
that [conventions] configures is renamed (``createJob``, ``jobType``, ``shouldProcess``, the websocket
receivers' words such as ``notifications``...); the config keys ``successEvent`` / ``failureEvent`` of
``config_event_type_keys`` *are* renamed: the index finds them by data (fields of the config's array
entries holding declared event types).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.static.twin import FIXTURE
from tests.static.twin import IDENTIFIERS as BASE_IDENTIFIERS
from tests.static.twin import STRINGS as BASE_STRINGS

OVERLAY = Path(__file__).resolve().parents[1] / "fixtures" / "gather_overlay"

IDENTIFIERS = {
    **BASE_IDENTIFIERS,
    "SocialEventType": "CircleFacts", "SocialWsType": "CirclePings",
    "POST_PUBLISHED": "NOTE_OUT", "POST_DELETED": "NOTE_GONE", "FEED_SHARD_DONE": "WALL_PART_OK",
    "DELETION_SHARD_DONE": "ERASE_PART_OK", "FEED_FANOUT_SUCCESSFULL": "WALL_SPREAD_OK",
    "FEED_FANOUT_FAILED": "WALL_SPREAD_KO", "DELETION_COMPLETED": "ERASE_OK", "DELETION_FAILED": "ERASE_KO",
    "WS_JOBS_OUTBOX_SUCCESS": "PUSH_TASKS_OK", "SOCIAL_POSTS": "CIRCLE_NOTES", "SOCIAL_SHARDS": "CIRCLE_PARTS",
    "SOCIAL_GATHERED": "CIRCLE_MERGED",
    # classes, services, methods and fields of the new shapes
    "ScatterGatherService": "FanInRegistry", "scatterGather": "fanIn", "getAggregation": "ruleFor",
    "AggregationDefinition": "FanInRule", "aggregations": "rules", "aggregation": "rule", "agg": "r",
    "trigger": "startedBy", "triggerType": "startKind", "expects": "waitsFor", "successEvent": "whenDone",
    "failureEvent": "whenBroken",
    "GatherPostProcessor": "MergeConsumer", "FeedFanoutGatherPostProcessor": "WallSpreadMerge",
    "PostDeletionGatherPostProcessor": "EraseMerge", "GatheredWsPostProcessor": "MergedPush",
    "JobOutcomeSuccessWsPostProcessor": "TaskOkPush", "JobOutboxSuccessPostProcessor": "TaskOkFollower",
    "FeedRepository": "WallStore", "eventQueueRepository": "factsRepo",
}

STRINGS = {
    **BASE_STRINGS,
    "social.post_published": "c.f1", "social.post_deleted": "c.f2", "social.feed_shard_done": "c.f3",
    "social.deletion_shard_done": "c.f4", "social.feed_fanout_successfull": "c.f5",
    "social.feed_fanout_failed": "c.f6", "social.deletion_completed": "c.f7", "social.deletion_failed": "c.f8",
    "ws.social.feed_fanout_successfull": "push-6", "ws.social.feed_fanout_failed": "push-7",
    "ws.social.deletion_completed": "push-8", "ws.social.deletion_failed": "push-9",
    "ws:jobs-outbox-success": "chan-6", "social:posts": "chan-7", "social:shards": "chan-8",
    "social:gathered": "chan-9", "ws-feed-gather": "grp-wall", "ws-deletion-gather": "grp-erase",
    "ws-gathered": "grp-merged", "ws-jobs-outbox-success": "grp-tasks", "ms-post-processors": "ms-followers",
    "ws-service": "ms-push", "ms-social": "ms-circle",
}

# file and folder names carrying a renamed word (the twin's paths say nothing the original's do)
PATH_WORDS = {
    "gather": "fanin", "feed-fanout": "wall-spread", "post-deletion": "erase", "gathered": "merged",
    "scatter-gather": "fan-in", "job-outcome-success": "task-ok", "social": "circle", "feed": "wall",
}

_IDENT = re.compile(r"\b(" + "|".join(sorted(map(re.escape, IDENTIFIERS), key=len, reverse=True)) + r")\b")
_STRING = re.compile(r"(['\"])(" + "|".join(sorted(map(re.escape, STRINGS), key=len, reverse=True)) + r")\1")
_PATH = re.compile(r"(?<![A-Za-z])(" + "|".join(sorted(map(re.escape, PATH_WORDS), key=len, reverse=True))
                   + r")(?![A-Za-z])")


def rename_text(text: str) -> str:
    text = _STRING.sub(lambda m: m.group(1) + STRINGS[m.group(2)] + m.group(1), text)
    text = _IDENT.sub(lambda m: IDENTIFIERS[m.group(1)], text)
    # relative import specifiers follow the renamed files
    return re.sub(r"(['\"])(\.{1,2}/[^'\"]*)\1", lambda m: m.group(1) + rename_path(m.group(2)) + m.group(1), text)


def rename_path(rel: str) -> str:
    return "/".join(_PATH.sub(lambda m: PATH_WORDS[m.group(1)], part) for part in rel.split("/"))


def rename_value(value: str) -> str:
    if value.startswith("stream:") and value[7:] in STRINGS:
        return "stream:" + STRINGS[value[7:]]
    return STRINGS.get(value, value)


def make_gather(dest: Path) -> Path:
    """The feedback workspace with the gather overlay laid over it, under ``dest``."""
    root = dest / "gather_ws"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns(".mesh"))
    for path in OVERLAY.rglob("*"):
        if path.is_file() and path.name != "README.md":
            target = root / path.relative_to(OVERLAY)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return root


def make_twin(dest: Path) -> Path:
    """The renamed twin of the gather workspace under ``dest`` (contents, files and folders renamed)."""
    original = make_gather(dest / "orig")
    root = dest / "gather_twin"
    for path in sorted(original.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(original).as_posix()
        target = root / rename_path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in (".ts", ".json", ".sql"):
            target.write_text(rename_text(path.read_text(encoding="utf-8")), encoding="utf-8")
        else:
            shutil.copyfile(path, target)
    shutil.rmtree(dest / "orig")
    return root
