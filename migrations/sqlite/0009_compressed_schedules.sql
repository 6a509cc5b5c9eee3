-- Schedule bodies of 64 KiB and more are stored zstd-compressed in body_zstd, with body left
-- empty; rows stored before stay as they were (body holds the JSON, body_zstd is NULL).
ALTER TABLE schedules ADD COLUMN body_zstd BLOB;
