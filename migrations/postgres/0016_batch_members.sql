-- Which jobs each batch holds, in the order of its items. A batch's item answered by a job
-- of an earlier batch (a cached result) or of no batch keeps that job's own batch_id, so the
-- batch's list cannot be read from jobs.batch_id. Batches made before this migration are
-- filled from jobs.batch_id, in the order they were listed by.
CREATE TABLE batch_members (
    batch TEXT NOT NULL,
    item BIGINT NOT NULL,
    job TEXT NOT NULL,
    PRIMARY KEY (batch, item)
);
INSERT INTO batch_members (batch, item, job)
    SELECT batch_id, ROW_NUMBER() OVER (PARTITION BY batch_id ORDER BY created_at, id) - 1, id
    FROM jobs WHERE batch_id IS NOT NULL;
