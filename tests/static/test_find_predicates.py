"""The field a method's ``find`` predicate compares with its parameter (``trigger`` in
``aggregations.find((agg) => agg.trigger === trigger)``): what config lookups bind a subclass by.

The predicate is matched by a tree-sitter query behind a cheap byte guard; the guard must let
through every predicate the reader accepts, whatever its length or wrappers.
"""

from __future__ import annotations

import pytest

from server.config import Conventions
from tools.mesh_index.parser import extract
from tools.mesh_index.ts_queries import extract_config

CFG = extract_config(Conventions())
LONG_TYPE = "{ " + " ".join(f"field{i}: string;" for i in range(90)) + " trigger: string }"


def _finds(body: str) -> dict:
    src = f"export class Lookup {{\n  get(trigger: string) {{\n    {body}\n  }}\n}}\n"
    return extract(src.encode(), "ts", CFG)["classes"]["Lookup"].get("finds", {})


@pytest.mark.parametrize("predicate", [
    "(agg) => agg.trigger === trigger",
    "agg => trigger == agg.trigger",
    "(agg) => agg.trigger === (trigger as string)",
    "(agg) => agg.trigger === trigger!",
    f"(agg: {LONG_TYPE}) => agg.trigger === trigger",  # the comparison far from the call: over 1,000 bytes
])
def test_the_compared_field_is_found_for_every_predicate_shape(predicate: str) -> None:
    assert len(LONG_TYPE) > 1000
    assert _finds(f"return this.aggregations.find({predicate});") == {"get": ["trigger"]}
    assert _finds(f"return this.aggregations.findIndex({predicate});") == {"get": ["trigger"]}


@pytest.mark.parametrize("body", [
    "return this.items.filter((x) => x.enabled && x.weight > 0);",  # compares with something else
    "return this.aggregations.find((agg) => agg.trigger === this.other);",
    "return this.aggregations.find((agg) => agg.trigger.startsWith(trigger));",
    "// .find((agg) => agg.trigger === trigger)\n    return null;",  # only in a comment
])
def test_no_field_for_other_predicates(body: str) -> None:
    assert _finds(body) == {}
