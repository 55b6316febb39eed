-- Per-user quotas (issue 44), and the outbox's delivered messages pruned
-- (as on SQLite, 0016).
--
-- Both are kept only while their quota is on, so a service without quotas
-- writes nothing more per run than before them.
--
-- `runs_per_minute`: a row for each run a user had accepted, written by the
-- accept and deleted once it is a minute old (by the user's next accept).
CREATE TABLE quota_runs (
    user_id TEXT NOT NULL,
    accepted_at BIGINT NOT NULL
);
CREATE INDEX quota_runs_by_user ON quota_runs (user_id, accepted_at);
-- `tokens_per_day`: the tokens of a user's runs, added by each run's end to
-- the count of the UTC day it ended on (`day`: days since the epoch).
CREATE TABLE token_usage (
    user_id TEXT NOT NULL,
    day BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (user_id, day)
);
-- The webhook messages done with (delivered, or given up on), by when:
-- they are deleted a while after.
CREATE INDEX webhook_outbox_done ON webhook_outbox ((COALESCE(delivered_at, gave_up_at)))
WHERE delivered_at IS NOT NULL OR gave_up_at IS NOT NULL;
-- agwire_accept takes the quotas, agwire_end the run's tokens: new
-- functions (functions.sql creates them when this process connects, after
-- the migrations), so the old ones go first.
DROP FUNCTION IF EXISTS agwire_accept(
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BOOLEAN,
    TEXT[], TEXT[], TEXT[], TEXT, BIGINT, TEXT, BIGINT, TEXT[], BOOLEAN,
    BOOLEAN[], TEXT, TEXT[]
);
DROP FUNCTION IF EXISTS agwire_end(
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT[], TEXT[], TEXT[], TEXT, TEXT,
    BIGINT, TEXT[], TEXT[], TEXT[], BOOLEAN[], BIGINT
);
