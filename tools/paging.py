"""Paging of a tool's long lists: the one place where ``limit`` / ``offset`` are checked and applied.

Tools whose lists grow with the workspace (``list_catalogue``, ``lint_flows``) answer a page by
default, so that a model's context is not filled by a whole catalogue it did not ask for; the text
and the structured content both say how many there are and which ``offset`` gives the next page
(:func:`page`, :class:`Page`). ``analyze_impact`` cuts each of its lists the same way and keeps their
totals (:mod:`tools.mesh_index.paging`, built on :func:`validate_window` and :func:`window`).

A window is ``limit`` items from ``offset``; ``limit=None`` (where a tool allows it) is every item
from ``offset``. A limit out of ``1..max_limit`` or a negative offset is refused with a clear
:class:`~server.errors.InvalidArgument`, never sliced into a surprising answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, Field

from server.errors import InvalidArgument

T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


class Page(BaseModel):
    """Which part of the list this answer holds."""

    total: int = Field(description="items in the whole list")
    offset: int = Field(description="index of the first item shown")
    shown: int = Field(description="items shown in this answer")
    next_offset: int | None = Field(default=None, description="pass as offset for the next page; null: last page")

    def text(self, noun: str) -> str | None:
        """One line for the text content when the list is cut, else None."""
        if self.shown == self.total:
            return None
        first, last = self.offset + 1, self.offset + self.shown
        if self.shown:
            line = f"showing {noun} {first}-{last} of {self.total}"
        else:
            line = f"no {noun} at offset {self.offset} of {self.total}"
        return line + (f": call again with offset={self.next_offset} for the next page" if self.next_offset else "")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_window(limit: int | None, offset: int, max_limit: int = MAX_LIMIT, *, limit_optional: bool = False
                    ) -> None:
    """Refuse a limit that is not an int in ``1..max_limit`` and an offset that is not an int ``>= 0``.

    With ``limit_optional`` a ``None`` limit is accepted (every item) and the message says so.
    """
    in_range = limit_optional if limit is None else _is_int(limit) and 1 <= limit <= max_limit
    if not in_range:
        raise InvalidArgument(f"limit must be between 1 and {max_limit} (got {limit!r})"
                              + ("; omit it for every item" if limit_optional else ""))
    if not _is_int(offset) or offset < 0:
        raise InvalidArgument(f"offset must be 0 or more (got {offset!r})")


def window(items: Sequence[T], limit: int | None, offset: int) -> list[T]:
    """``items[offset:offset + limit]``; every item from ``offset`` when ``limit`` is None."""
    return list(items[offset:None if limit is None else offset + limit])


def page(items: Sequence[T], limit: int, offset: int) -> tuple[list[T], Page]:
    """``items[offset:offset + limit]`` and its :class:`Page`; a limit out of ``1..MAX_LIMIT`` or a negative
    offset is refused (:func:`validate_window`)."""
    validate_window(limit, offset)
    chosen = window(items, limit, offset)
    end = offset + len(chosen)
    next_offset = end if end < len(items) else None
    return chosen, Page(total=len(items), offset=offset, shown=len(chosen), next_offset=next_offset)
