-- What kind of failure ended a failed job (issue 30 point 2): `input`, `refused`,
-- `time_limit` or `internal` (engine::ErrorKind), beside its message, so a client can tell a
-- request to fix from one to retry with a longer limit. NULL for every other job, and for the
-- failed jobs of earlier versions.
ALTER TABLE jobs ADD COLUMN error_kind TEXT;
