"""Paging is checked and applied in one place, :mod:`tools.paging`: ``list_catalogue`` and ``lint_flows``
page one list (:func:`tools.paging.page`), ``analyze_impact`` pages every list of its answer and keeps
their totals (:mod:`tools.mesh_index.paging`, built on :func:`tools.paging.window` and
:func:`tools.paging.validate_window`). A bad limit or offset is a clear error, never a strange slice."""

from __future__ import annotations

import pytest

from server.errors import InvalidArgument
from tools.mesh_index import paging as impact_paging
from tools.mesh_index.model import FollowUp, ImpactResult, IndexInfo, Site
from tools.paging import MAX_LIMIT, Page, page, validate_window, window

LETTERS = list("abcdefg")


def test_a_page_is_limit_items_from_offset_and_says_where_the_next_one_starts() -> None:
    assert page(LETTERS, 3, 0) == (["a", "b", "c"], Page(total=7, offset=0, shown=3, next_offset=3))
    assert page(LETTERS, 3, 6) == (["g"], Page(total=7, offset=6, shown=1, next_offset=None))
    assert page(LETTERS, 3, 9) == ([], Page(total=7, offset=9, shown=0, next_offset=None))
    assert page(LETTERS, MAX_LIMIT, 0)[1].next_offset is None


@pytest.mark.parametrize(("limit", "offset", "message"), [
    (0, 0, "limit must be between 1 and 1000 (got 0)"),
    (1001, 0, "limit must be between 1 and 1000 (got 1001)"),
    (True, 0, "limit must be between 1 and 1000 (got True)"),
    (None, 0, "limit must be between 1 and 1000 (got None)"),
    (3, -1, "offset must be 0 or more (got -1)"),
    (3, "2", "offset must be 0 or more (got '2')"),
])
def test_a_page_out_of_bounds_is_refused_with_the_bound(limit, offset, message) -> None:
    # before, page() sliced whatever it got: limit=0 answered an empty page, offset=-1 the last items
    with pytest.raises(InvalidArgument) as caught:
        page(LETTERS, limit, offset)
    assert str(caught.value) == message


def test_a_window_without_limit_is_every_item_from_offset() -> None:
    assert window(LETTERS, None, 0) == LETTERS and window(LETTERS, None, 5) == ["f", "g"]
    assert window(LETTERS, 2, 5) == ["f", "g"] and window(LETTERS, 2, 6) == ["g"]
    assert window(tuple(LETTERS), 1, 0) == ["a"]  # always a list


def test_an_optional_limit_may_be_omitted_and_the_message_says_so() -> None:
    validate_window(None, 4, 500, limit_optional=True)
    with pytest.raises(InvalidArgument, match=r"^limit must be between 1 and 500 \(got 501\); omit it for every"):
        validate_window(501, 0, 500, limit_optional=True)


@pytest.mark.parametrize(("args", "message"), [
    (("sideways", None, 0), "direction must be one of downstream, upstream, both (got 'sideways')"),
    (("both", 0, 0), "limit must be between 1 and 500 (got 0); omit it for every item"),
    (("both", 501, 0), "limit must be between 1 and 500 (got 501); omit it for every item"),
    (("upstream", False, 0), "limit must be between 1 and 500 (got False); omit it for every item"),
    (("downstream", None, -1), "offset must be 0 or more (got -1)"),
])
def test_analyze_impact_refuses_the_same_bad_pages_with_its_own_cap(args, message) -> None:
    with pytest.raises(InvalidArgument) as caught:
        impact_paging.validate_page(*args)
    assert str(caught.value) == message
    impact_paging.validate_page("both", 500, 0)  # the cap itself is a page


def _impact(producers: int, followups: int) -> ImpactResult:
    site = Site(repo="r", file="f.ts", line=1, kind="create_job")
    index = IndexInfo(workspace="/w", files=1, parse_errors=0, indexed_at="2026-12-05T00:00:00Z")
    return ImpactResult(target="t", matches=[], producers=[site.model_copy(update={"line": n + 1})
                                                           for n in range(producers)],
                        consumers=[], routes=[], unresolved=[], index=index,
                        followups=[FollowUp(depth=1, from_kind="job", from_value="t", kind="event", value=f"v{n}",
                                            via="Handler", confidence="exact", site=site) for n in range(followups)])


def test_every_list_of_an_impact_answer_is_cut_by_the_same_window_and_keeps_its_total() -> None:
    whole = _impact(5, 2)
    cut = impact_paging.page(_impact(5, 2), 2, 1)
    assert cut.producers == window(whole.producers, 2, 1) and [s.line for s in cut.producers] == [2, 3]
    assert cut.followups == window(whole.followups, 2, 1) and [f.value for f in cut.followups] == ["v1"]
    assert cut.totals == {"producers": 5, "consumers": 0, "candidates": 0, "routes": 0, "followups": 2,
                          "upstream": 0, "unresolved": 0}
    assert (cut.offset, cut.limit) == (1, 2)
    assert cut.notes == ["page offset=1 limit=2: producers 2/5, followups 1/2 (call again with another offset "
                         "for the rest)"]
    uncut = impact_paging.page(_impact(5, 2), None, 0)
    assert len(uncut.producers) == 5 and uncut.notes == [] and uncut.totals["producers"] == 5
