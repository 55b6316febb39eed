-- A run's options (what its request said beyond its input and mode:
-- `client_time`, and whatever is added later) kept as one JSON value, so
-- that a new option is a field of `RunOptions`, not a column (as on SQLite,
-- 0014).
ALTER TABLE runs RENAME COLUMN client_time TO options;
UPDATE runs SET options = json_build_object('client_time', options::json)::text
WHERE options IS NOT NULL;
-- agwire_accept's argument `p_client_time` is now `p_options`: a renamed
-- argument is a new function (functions.sql creates it when this process
-- connects, after the migrations).
DROP FUNCTION IF EXISTS agwire_accept(
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BOOLEAN, BOOLEAN,
    TEXT[], TEXT[], TEXT[], TEXT, BIGINT, TEXT, BIGINT, TEXT[], BOOLEAN,
    BOOLEAN[], TEXT, TEXT[]
);
