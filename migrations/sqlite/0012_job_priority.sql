-- Interactive jobs (issue 28): a scheduler that needs an answer now marks its request
-- `"priority": "interactive"` (1); workers claim those before normal ones (0), fairly between
-- clients within each class. A client may have only a few active at once, with short limits.
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
