"""lint's text scans give what the expressions they replaced gave (those tried an expression at
the start of every word: slow on dense sources; these search a literal and look around it).

Compared with the old expressions on generated text (hypothesis) and on the shapes that broke.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tools.lint.config_keys import member_reads
from tools.lint.options import _CLASS_NAME, _NEW_WITH_OBJECT, _at_word_start

OLD_DOT = re.compile(r"\b(\w+)(?=\s*\??\.\s*([\w$-]+))")
OLD_INDEX = re.compile(r"\b(\w+)\s*\[\s*['\"`]([^'\"`\n]+)['\"`]\s*\]")
OLD_NEW = re.compile(r"\bnew\s+[A-Z]\w*\s*\((?:[^(){};]|\([^()]*\))*\{")
OLD_CLASS = re.compile(r"\bclass\s+(\w+)")

# the characters that matter to the expressions, and a few that do not
PIECES = [*"ab_$1é.?[]'\"`-() {};\n\t", "new ", "class ", "Foo", "x.", "renew "]
TEXT = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def old_reads(text: str) -> set[tuple[str, str]]:
    pairs = set()
    for parent, member in OLD_DOT.findall(text):
        pairs.add((parent, member))
        head = member.split("-", 1)[0]
        if head != member:
            pairs.add((parent, head))
    pairs.update(OLD_INDEX.findall(text))
    return pairs


@settings(max_examples=1000, deadline=None)
@given(TEXT)
def test_member_reads_are_the_old_expressions_pairs(text: str) -> None:
    assert member_reads([text]) == old_reads(text)


@settings(max_examples=1000, deadline=None)
@given(TEXT)
def test_new_with_an_object_is_found_where_the_old_expression_found_it(text: str) -> None:
    old = OLD_NEW.search(text)
    new = next(_at_word_start(_NEW_WITH_OBJECT, text), None)
    assert (old.span() if old else None) == (new.span() if new else None)


@settings(max_examples=1000, deadline=None)
@given(TEXT)
def test_every_declared_class_the_old_expression_saw_is_seen(text: str) -> None:
    assert set(OLD_CLASS.findall(text)) <= {m.group(1) for m in _at_word_start(_CLASS_NAME, text)}


def test_a_class_after_the_word_class_at_a_line_end() -> None:
    names = {m.group(1) for m in _at_word_start(_CLASS_NAME, "// the writer class\nclass RankingJobWriter {}")}
    assert "RankingJobWriter" in names
    assert {m.group(1) for m in _at_word_start(_CLASS_NAME, "subclass Foo; my_class Bar")} == set()
