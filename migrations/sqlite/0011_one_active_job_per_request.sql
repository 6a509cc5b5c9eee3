-- One queued or running job per identical request (issue 28): a request that may share its job
-- (not forced, not in a batch) is `shared`, and two shared active jobs cannot have one key, so
-- identical requests that race each other find the one job instead of making several.
ALTER TABLE jobs ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX jobs_one_active_per_key ON jobs (request_key) WHERE shared = 1 AND status IN ('queued', 'running');
