-- A run's options (what its request said beyond its input and mode:
-- `client_time`, and whatever is added later) kept as one JSON value, so
-- that a new option is a field of `RunOptions`, not a column.
ALTER TABLE runs RENAME COLUMN client_time TO options;
UPDATE runs SET options = json_object('client_time', json(options)) WHERE options IS NOT NULL;
