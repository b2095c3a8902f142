"""Values derived from one build of the static index, kept until the index is linked again.

A refresh that changes any indexed file links a new :class:`~tools.mesh_index.linked.LinkedIndex`;
a value memoized here is rebuilt on the first call after that (compared by identity), never served
stale. Files outside the index (``.proto``, Markdown) are checked by their own stat, see callers.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_MEMO: weakref.WeakKeyDictionary[Any, dict[str, tuple[Any, Any]]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def per_build(service: Any, name: str, build: Callable[[], T]) -> T:
    linked = service.linked()
    with _LOCK:
        hit = _MEMO.setdefault(service, {}).get(name)
    if hit is not None and hit[0] is linked:
        return hit[1]  # type: ignore[no-any-return]
    value = build()
    with _LOCK:
        _MEMO[service][name] = (linked, value)
    return value
