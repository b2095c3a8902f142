-- The outbox schema of one microservice database, as the target system declares it
-- (see shared/target-system.md). mesh-mcp never runs this against a user's database:
-- it is used by the tests, the benchmarks and the demo to build realistic scratch
-- databases. Names here are the defaults of [conventions].

-- Needs PostgreSQL 13 or later (gen_random_uuid() is built in).

CREATE TABLE IF NOT EXISTS jobs_outbox (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    status        varchar(20)  NOT NULL DEFAULT 'PENDING',
    attempts      int          NOT NULL DEFAULT 0,
    "lastError"   text,
    type          varchar(100) NOT NULL,
    emitter       varchar(100) NOT NULL,
    "emitterId"   uuid,
    target        varchar(100) NOT NULL,
    payload       jsonb        NOT NULL DEFAULT '{}'::jsonb,
    scheduled_at  timestamp    NOT NULL DEFAULT now(),
    created_at    timestamp    NOT NULL DEFAULT now(),
    updated_at    timestamp    NOT NULL DEFAULT now(),
    "traceId"     uuid,
    traceparent   varchar(55)
);

CREATE TABLE IF NOT EXISTS event_queue (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    status           varchar(20)  NOT NULL DEFAULT 'PENDING',
    attempts         int          NOT NULL DEFAULT 0,
    "lastError"      text,
    type             varchar(100) NOT NULL,
    emitter          varchar(100) NOT NULL,
    "emitterId"      uuid,         -- NOT NULL in the latest migrations; nullable here so tests may omit it
    payload          jsonb        NOT NULL DEFAULT '{}'::jsonb,
    version          int          NOT NULL DEFAULT 1,
    target_services  varchar[]    NOT NULL DEFAULT '{}',
    correlation_id   uuid,
    "traceId"        uuid,
    traceparent      varchar(55),
    processed_at     timestamp,
    created_at       timestamp    NOT NULL DEFAULT now(),
    updated_at       timestamp    NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS job_audit (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id           varchar(100) NOT NULL UNIQUE,
    job_type         varchar(255) NOT NULL,
    status           varchar(20)  NOT NULL DEFAULT 'PENDING',
    worker_id        varchar(100),
    emitter          varchar(100),
    current_attempt  int          NOT NULL DEFAULT 0,
    started_at       timestamp,
    finished_at      timestamp,
    result_payload   jsonb,
    error_message    text,
    error_stack      text,
    created_at       timestamp    NOT NULL DEFAULT now(),
    updated_at       timestamp    -- never written by the worker (NULL): ages come from started_at
);

CREATE INDEX IF NOT EXISTS idx_job_audit_status ON job_audit (status);
CREATE INDEX IF NOT EXISTS idx_job_audit_worker_id ON job_audit (worker_id);
CREATE INDEX IF NOT EXISTS idx_job_audit_job_type ON job_audit (job_type);

-- The audit trigger, as the latest of the reference system's four versions writes it
-- (target-system.md, "The job-outcome row, exactly"; tests/fixtures/migration_chain holds
-- all four): AFTER UPDATE OF status (never on insert), a COMPLETED or FAILED status writes
-- one event_queue row: type <d>:job:outbox:success|failure (<d> = emitter without "ms-"),
-- "emitterId" = the job id, payload = {before: <old job_audit row>, after: <new row>} (the
-- job id at payload.after.job_id), version 1, target_services = {<the type>}.
CREATE OR REPLACE FUNCTION notify_job_audit_status_change() RETURNS trigger AS $$
DECLARE
    domain_name text;
    outcome_type text;
BEGIN
    domain_name := regexp_replace(NEW.emitter, '^ms-', '');
    IF NEW.status = 'COMPLETED' THEN
        outcome_type := domain_name || ':job:outbox:success';
    ELSIF NEW.status = 'FAILED' THEN
        outcome_type := domain_name || ':job:outbox:failure';
    ELSE
        RETURN NEW;
    END IF;
    INSERT INTO event_queue (type, emitter, "emitterId", payload, version, target_services, updated_at)
    VALUES (
        outcome_type,
        NEW.emitter,
        NEW.job_id::uuid,
        jsonb_build_object('before', to_jsonb(OLD), 'after', to_jsonb(NEW)),
        1,
        ARRAY[outcome_type],
        now()
    );
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS job_audit_status_trigger ON job_audit;
CREATE TRIGGER job_audit_status_trigger
    AFTER UPDATE OF status ON job_audit
    FOR EACH ROW EXECUTE FUNCTION notify_job_audit_status_change();
