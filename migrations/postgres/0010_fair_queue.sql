-- Fair queueing between clients (issue 28): each job's declared solve time (its time limit,
-- seconds), summed per client for the quota on queued work; and indexes for the claim, which
-- picks a client (the one with the fewest jobs running, then the one whose last job started
-- longest ago), then that client's oldest job. Owners are compared as COALESCE(owner, '').
ALTER TABLE jobs ADD COLUMN budget_s DOUBLE PRECISION;
CREATE INDEX jobs_by_owner_status_created ON jobs ((COALESCE(owner, '')), status, created_at);
CREATE INDEX jobs_by_owner_started ON jobs ((COALESCE(owner, '')), started_at);
