"""One page of a long list in a tool's answer: ``limit`` items from ``offset``, and where the next page starts.

Tools whose lists grow with the workspace (``list_catalogue``, ``lint_flows``) answer a page by
default, so that a model's context is not filled by a whole catalogue it did not ask for; the text
and the structured content both say how many there are and which ``offset`` gives the next page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, Field

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


def page(items: Sequence[T], limit: int, offset: int) -> tuple[list[T], Page]:
    """``items[offset:offset + limit]`` and its :class:`Page`."""
    chosen = list(items[offset:offset + limit])
    end = offset + len(chosen)
    next_offset = end if end < len(items) else None
    return chosen, Page(total=len(items), offset=offset, shown=len(chosen), next_offset=next_offset)
