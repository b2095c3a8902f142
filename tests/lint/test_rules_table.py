"""The lint rule table is the one list of codes: each code names the check that finds it."""

from tools.lint import engine
from tools.lint.rules import CODES, RULES, codes_of


def test_every_code_is_found_by_a_check_the_engine_runs():
    run = [name for name, _ in engine.CHECKS]
    assert len(set(run)) == len(run)
    unknown = sorted({(r.code, r.check) for r in RULES if r.check not in {*run, "orphans"}})
    assert unknown == [], f"rules naming a check the engine does not run: {unknown}"
    assert all(codes_of(name) for name in run), "a check the engine runs finds no code"
    produced = [c for name in run for c in codes_of(name)] + sorted(engine.ORPHAN_CODES)
    assert sorted(produced) == sorted(CODES)


def test_orphan_codes_come_from_the_table():
    assert {"type-never-consumed", "stream-without-group", "catalogue-orphan"} == engine.ORPHAN_CODES
