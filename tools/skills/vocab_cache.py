"""check_skills' vocabulary kept between calls while neither the code nor the config changed.

Building the vocabulary reads every source, SQL, JSON and YAML file of the workspace; a running
server keeps the last one (with the :class:`~tools.skills.names.NameChecker` built on it) and
builds again only when:

- the config identity changed: the workspace, the skipped folders, or any convention the
  checker uses (tables, audit trigger, stream prefix, dead-letter suffix); or
- the tree changed (:meth:`~tools.skills.vocabulary.Vocabulary.unchanged`): a folder walked
  gained, lost or renamed an entry, or a file read was edited. These are the inputs of the
  vocabulary itself: the index's files (TypeScript, SQL, package.json) and the migrations are
  among them, so an index refresh that found a change is seen here too.

``builds`` counts the builds, ``reuses`` the calls answered from the kept one.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tools.skills.names import NameChecker
from tools.skills.vocabulary import Vocabulary, build_vocabulary


def config_identity(root: Path, skip_dirs: list[str] | tuple[str, ...], conventions: Any) -> str:
    """What, besides the files, the vocabulary and checker depend on, as one string."""
    return json.dumps([str(Path(root).resolve()), sorted(skip_dirs), conventions.tables.model_dump(),
                       conventions.audit_trigger, conventions.stream_prefix, conventions.dlq_suffix])


def make_checker(vocab: Vocabulary, conventions: Any) -> NameChecker:
    declared = [*conventions.tables.model_dump().values(), conventions.audit_trigger]
    return NameChecker(vocab, stream_prefix=conventions.stream_prefix, dlq_suffix=conventions.dlq_suffix,
                       known_tables=[t for t in declared if isinstance(t, str)])


class VocabularyCache:
    """The last vocabulary and checker, reused while :func:`config_identity` and the tree are unchanged."""

    def __init__(self) -> None:
        self.builds = 0
        self.reuses = 0
        self._key: str | None = None
        self._kept: tuple[Vocabulary, NameChecker] | None = None
        self._lock = threading.Lock()

    def get(self, root: Path, skip_dirs: list[str] | tuple[str, ...],
            conventions: Any) -> tuple[Vocabulary, NameChecker, bool]:
        """(vocabulary, checker, reused) for ``root`` as it is now."""
        key = config_identity(root, skip_dirs, conventions)
        with self._lock:
            if self._kept is not None and self._key == key and self._kept[0].unchanged(root):
                self.reuses += 1
                return *self._kept, True
            vocab = build_vocabulary(root, skip_dirs)
            checker = make_checker(vocab, conventions)
            self._key, self._kept = key, (vocab, checker)
            self.builds += 1
            return vocab, checker, False
