-- Finished exports (issue 28 point 5): one schedule in one format with one set of options,
-- stored zstd-compressed, so a later GET (after a restart, or on another replica) reads it
-- instead of building it again. `variant` is the SHA-256 of the format and its options.
CREATE TABLE exports (
    schedule_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    body_zstd BLOB NOT NULL,
    bytes BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (schedule_id, variant)
);
