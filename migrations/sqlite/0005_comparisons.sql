-- A schedule's comparison with the baselines, computed once on first request (recomputing it
-- per call cost a minute and gigabytes on large tori).
CREATE TABLE comparisons (
    schedule_id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
