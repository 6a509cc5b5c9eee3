-- The client that made each batch: with tokens, other clients get 404 for it.
ALTER TABLE batches ADD COLUMN owner TEXT;
