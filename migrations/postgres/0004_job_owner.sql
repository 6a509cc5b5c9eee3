-- The client (token name) that queued each job: only it may cancel the job, and its queued
-- and running jobs count against its quota. NULL when the service runs without tokens.
ALTER TABLE jobs ADD COLUMN owner TEXT;
CREATE INDEX jobs_by_owner ON jobs (owner, status);
