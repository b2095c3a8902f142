"""Mermaid primitives: hostile labels stay labels (parsed by the real parser), ids are stable and safe."""

from __future__ import annotations

import re

from tests.flow_map.mermaid_parser import edges, parse_ok, vertices
from tools.flow_map import mermaid as mm

HOSTILE = ['a"b', "end", "x]y[z", "a{b}c", "p(q)r", "a|b", "a;b", "a%%b", "#lt;", "<script>x</script>",
           "a`b`c", "back\\slash", "click x call y()", ":::broken", "-->", "ünï ⚠", "&amp;",
           '"]:::broken\n  A-->B', "%%{init: {}}%%", "subgraph", "style x fill:red"]


def test_hostile_labels_parse_and_read_back_exactly():
    lines = ["flowchart LR"]
    ids = []
    for i, text in enumerate(HOSTILE):
        nid = mm.node_id("n", i)
        ids.append(nid)
        shape = ("type", "route", "code", "folded", "hop")[i % 5]
        lines.append(mm.node_line(nid, shape, mm.label(text, "second " + text), "code"))
        if i:
            lines.append(mm.edge_line(ids[i - 1], nid, text, dashed=i % 2 == 0))
    lines += mm.legend_lines(mm.LEGEND_TEXT) + mm.class_lines(mm.CLASS_STYLES)
    (result,) = parse_ok(["\n".join(lines)])
    seen = vertices(result)
    legend = [nid for nid in seen if nid.startswith("lg")]
    assert len(seen) == len(HOSTILE) + len(legend), "a label created or swallowed a node"
    for nid, text in zip(ids, HOSTILE, strict=True):
        flat = " ".join(text.split())
        assert seen[nid]["label"] == f"{flat}\nsecond {flat}"
        assert "code" in seen[nid]["classes"] and "broken" not in seen[nid]["classes"]
    links = edges(result)
    assert len(links) == len(HOSTILE) - 1
    for i, text in enumerate(HOSTILE[1:], start=1):
        edge = links[(ids[i - 1], ids[i])]
        assert edge["label"] == " ".join(text.split())
        assert edge["stroke"] == ("dotted" if i % 2 == 0 else "normal")


def test_node_ids_are_stable_and_never_keywords():
    a = mm.node_id("t", "job", "events.geocode_event")
    assert a == mm.node_id("t", "job", "events.geocode_event")
    assert a != mm.node_id("t", "event", "events.geocode_event")
    assert re.fullmatch(r"t[0-9a-f]{8}", a)


def test_long_labels_are_shortened():
    text = mm.label("x" * 200)
    assert len(text) < 70 and text.endswith('…"')
