-- The topology each job runs on, so a topology that queued or running jobs still need is not
-- deleted under them (409). Jobs queued before this migration have none and are not protected.
ALTER TABLE jobs ADD COLUMN topology_id TEXT;
CREATE INDEX jobs_by_topology ON jobs (topology_id, status);
