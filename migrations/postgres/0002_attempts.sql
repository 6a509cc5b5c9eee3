-- How many times a job was claimed: a job whose worker keeps dying (or whose lease keeps
-- lapsing) fails after a fixed number of claims instead of being solved again forever.
ALTER TABLE jobs ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
