-- Interactive jobs (issue 28): a scheduler that needs an answer now marks its request
-- `"priority": "interactive"` (1); workers claim those before normal ones (0), fairly between
-- clients within each class. A client may have only a few active at once, with short limits.
-- The claim's index now orders a client's queued jobs by priority, then age.
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
DROP INDEX jobs_by_owner_status_created;
CREATE INDEX jobs_by_owner_status_priority ON jobs ((COALESCE(owner, '')), status, priority DESC, created_at);
