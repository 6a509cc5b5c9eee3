-- Schedule bodies of 64 KiB and more are stored zstd-compressed in body_zstd, with body left
-- empty. Rows stored before (body holds the JSON, body_zstd is NULL) are compressed by the
-- server in the background after it starts (store::compress_old_schedules).
ALTER TABLE schedules ADD COLUMN body_zstd BYTEA;
