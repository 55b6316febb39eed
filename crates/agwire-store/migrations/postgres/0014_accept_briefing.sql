-- `agwire_accept_many` answers each run it starts with what the run's agent
-- reads besides its input (the owner's settings and, for a thread that
-- existed, its latest messages), so the run does not read them in a round
-- trip of its own (issue 47). It takes the history window as a third
-- argument: the two-argument function goes (functions.sql writes the new
-- one). A replica still running the previous binary cannot accept after
-- this migration: stop the old replicas first (docs/DEPLOY.md).
DROP FUNCTION IF EXISTS agwire_accept_many(JSONB, BIGINT);
