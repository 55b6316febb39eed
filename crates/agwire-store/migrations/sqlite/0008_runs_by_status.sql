-- Claims scan the queued runs in acceptance order.
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status);
