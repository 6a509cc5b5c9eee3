-- A schedule stores its topology by reference (the topologies row) instead of embedding it:
-- many schedules on one large topology stored it once per schedule. A topology that such
-- schedules use is soft-deleted (hidden, kept for them) rather than removed.
ALTER TABLE topologies ADD COLUMN deleted_at BIGINT;
ALTER TABLE schedules ADD COLUMN topology_by_ref BIGINT NOT NULL DEFAULT 0;
CREATE INDEX schedules_by_topology ON schedules (topology_id);
