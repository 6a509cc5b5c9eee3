-- The service's state: topologies (idempotent by digest), jobs (the durable queue) and
-- schedules (results). Ids are made by the application; times are Unix milliseconds.
CREATE TABLE topologies (
    id TEXT PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    npus BIGINT NOT NULL,
    switches BIGINT NOT NULL,
    links BIGINT NOT NULL,
    connected BIGINT NOT NULL,
    parent_id TEXT,
    failures TEXT,
    created_at BIGINT NOT NULL
);

CREATE TABLE batches (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    batch_id TEXT,
    request_id TEXT,
    request_key TEXT NOT NULL,
    request TEXT NOT NULL,
    algorithm TEXT NOT NULL,
    status TEXT NOT NULL,
    progress DOUBLE PRECISION NOT NULL,
    message TEXT,
    error TEXT,
    schedule_id TEXT,
    lease_until BIGINT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT
);
CREATE INDEX jobs_by_status ON jobs (status, created_at);
CREATE INDEX jobs_by_key ON jobs (request_key, status);
CREATE INDEX jobs_by_batch ON jobs (batch_id);

CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL,
    topology_id TEXT NOT NULL,
    body TEXT NOT NULL,
    summary TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
