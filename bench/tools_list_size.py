"""How much of a model's context `tools/list` takes: bytes of names, titles, descriptions and schemas.

    python bench/tools_list_size.py [--remediation]

Prints one row per tool and the totals, input side (name + title + description + input schema)
and output schemas apart, as the compact JSON a client sends the model.
"""

from __future__ import annotations

import argparse
import json

import anyio
from mcp import Client

from server.app import build_server
from server.config import load_settings


def _size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


INPUT_SIDE_GOAL = 22_500
"""Bytes of names, titles, descriptions and input schemas of the default (read-only) listing.

20,000 until issue 34 added the four tools the team's agents already call (smart_search,
find_dependents, analyze_grpc, search_docs: 2.4 KB with one-line descriptions); the listing
stood at 19.93 KB before them."""


async def sizes(remediation: bool) -> list[tuple[str, int, int]]:
    """(tool, input side bytes, output schema bytes) of each tool, as a client receives them."""
    settings = load_settings(environ={}, overrides={"enable_remediation": remediation})
    async with Client(build_server(settings), cache=None) as client:
        tools = (await client.list_tools()).tools
    rows = []
    for tool in tools:
        described = _size(tool.name) + _size(tool.title or "") + _size(tool.description or "")
        input_side = described + _size(tool.input_schema)
        rows.append((tool.name, input_side, _size(tool.output_schema or {})))
    return rows


async def measure(remediation: bool) -> None:
    rows = await sizes(remediation)
    print(f"{'tool':<22} {'input side':>10} {'output schema':>14}")
    for name, inp, out in sorted(rows, key=lambda r: -r[1]):
        print(f"{name:<22} {inp:>10} {out:>14}")
    print(f"{'total':<22} {sum(r[1] for r in rows):>10} {sum(r[2] for r in rows):>14}  ({len(rows)} tools)")
    print(f"goal: input side < {INPUT_SIDE_GOAL} bytes (read-only listing)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remediation", action="store_true", help="also list apply_remediation")
    anyio.run(measure, parser.parse_args().remediation)


if __name__ == "__main__":
    main()
