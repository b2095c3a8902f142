"""SQL facts: functions, triggers, inserts, symbolic evaluation of names built at run time."""

from __future__ import annotations

from tools.mesh_index.sql_sites import evaluate, evaluate_list, parse_expr, split_top, sql_facts

AUDIT = """
CREATE OR REPLACE FUNCTION notify_job_audit_status_change()
RETURNS TRIGGER AS $$
DECLARE
  stream_prefix text;
  event_type text;
BEGIN
  stream_prefix := replace(NEW.emitter, 'ms-', '');
  IF NEW.status = 'COMPLETED' THEN
    event_type := stream_prefix || ':job:outbox:success';
    INSERT INTO event_queue (type, emitter, payload, target_services)
    VALUES (event_type, NEW.emitter, jsonb_build_object('before', to_jsonb(OLD), 'after', to_jsonb(NEW)),
            ARRAY[event_type]);
  ELSIF NEW.status = 'FAILED' THEN
    INSERT INTO event_queue (type, emitter, payload, target_services)
    VALUES ('job.outbox.failed', NEW.emitter, jsonb_build_object('before', to_jsonb(OLD), 'after', to_jsonb(NEW)),
            ARRAY['ws:it''s']);
  END IF;
  RETURN NEW;
END;
$BODY$ LANGUAGE plpgsql;
"""


def test_split_top_respects_quotes_and_parentheses():
    assert split_top("a, f(b, c), 'x, y', ARRAY[1, 2]") == ["a", "f(b, c)", "'x, y'", "ARRAY[1, 2]"]
    assert split_top("a || 'b||c' || d", "||") == ["a", "'b||c'", "d"]


def test_parse_expr_shapes():
    assert parse_expr("'a''b'") == ["s", "a'b"]
    assert parse_expr("TG_ARGV[1]::text") == ["argv", 1]
    assert parse_expr("NEW.\"emitter\"") == ["col", "NEW.emitter"]
    assert parse_expr("x", {"x": ["s", "bound"]}) == ["s", "bound"]
    assert parse_expr("COALESCE(a, 'b')")[0] == "|"
    assert parse_expr("now()")[0] == "?"


def test_function_inserts_and_status_branches():
    facts = sql_facts(AUDIT.replace("$BODY$", "$$"), 10, None)
    assert [f[0] for f in facts] == ["fn"]
    _tag, name, line, inserts = facts[0]
    assert (name, line) == ("notify_job_audit_status_change", 11)
    assert [(i["line"], i["status"]) for i in inserts] == [(20, "COMPLETED"), (24, "FAILED")]
    success = evaluate(inserts[0]["type"], [], ["ms-event", "ms-user"])
    assert success == [("event:job:outbox:success", True, "ms-event"), ("user:job:outbox:success", True, "ms-user")]
    assert evaluate_list(inserts[0]["target_services"], [], ["ms-event"]) == [
        ("event:job:outbox:success", True, "ms-event")]
    assert evaluate(inserts[1]["type"], [], ["ms-event"]) == [("job.outbox.failed", False, None)]
    assert evaluate_list(inserts[1]["target_services"], [], []) == [("ws:it's", False, None)]


def test_unterminated_dollar_quote_leaves_only_loose_inserts():
    facts = sql_facts(AUDIT, 1, None)  # $$ opened, $BODY$ never closes it: no function body
    assert [f[0] for f in facts] == ["ins", "ins"]
    assert evaluate(facts[0][2]["type"], [], ["ms-a"]) == []  # a variable: reported unresolved by the linker
    assert evaluate(facts[1][2]["type"], [], []) == [("job.outbox.failed", False, None)]


def test_trigger_arguments_bind_tg_argv():
    text = """
    CREATE OR REPLACE FUNCTION create_event_queue_record() RETURNS TRIGGER AS $fn$
    DECLARE event_type TEXT := TG_ARGV[0];
    BEGIN
      INSERT INTO "public"."event_queue" (type, emitter, target_services) VALUES (event_type, TG_ARGV[1], '{a,b}');
      RETURN NEW;
    END; $fn$ LANGUAGE plpgsql;
    create trigger t1 after insert on "tags" for each row
      execute procedure create_event_queue_record('tag.changed', 'ms-x');
    """
    facts = sql_facts(text, 1, None)
    fn = next(f for f in facts if f[0] == "fn")
    trg = next(f for f in facts if f[0] == "trg")
    assert trg[:4] == ["trg", "t1", "tags", "create_event_queue_record"]
    ins = fn[3][0]
    assert evaluate(ins["type"], trg[4], []) == [("tag.changed", False, None)]
    assert evaluate(ins["emitter"], trg[4], []) == [("ms-x", False, None)]
    assert evaluate_list(ins["target_services"], trg[4], []) == [("a", False, None), ("b", False, None)]


def test_other_tables_and_plain_inserts():
    text = ("INSERT INTO jobs_outbox (type) VALUES ('x'); "
            "INSERT INTO event_queue (type, emitter) VALUES ('e.plain', 'm');")
    facts = sql_facts(text, 5, None)
    assert len(facts) == 1 and facts[0][0] == "ins"
    assert evaluate(facts[0][2]["type"], [], []) == [("e.plain", False, None)]
    assert sql_facts(text, 1, None, table="other") == []


def test_trigger_of_a_function_defined_outside_the_workspace(tmp_path):
    from server.config import Conventions
    from tools.mesh_index.service import IndexService

    (tmp_path / "ms-post/src").mkdir(parents=True)
    (tmp_path / "ms-post/src/post.trigger.sql").write_text(
        "CREATE TRIGGER posts_trg AFTER INSERT ON posts\n"
        "FOR EACH ROW EXECUTE FUNCTION create_post_event_queue_record('post.changed', 'ms-post');\n"
        "CREATE TRIGGER audit_trg AFTER INSERT ON posts FOR EACH ROW EXECUTE FUNCTION log_changes('x');\n")
    svc = IndexService(tmp_path, Conventions(), use_cache=False)
    r = svc.analyze_impact("post.changed")
    assert [(p.kind, p.line, p.confidence, p.detail["emitter"]) for p in r.producers] == [
        ("sql_trigger", 1, "heuristic", "ms-post")]
    assert "function body not found" in r.producers[0].detail["reason"]
    assert svc.analyze_impact("x").matches == []
