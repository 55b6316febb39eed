-- Attachments live in the database, so every replica serves them; the key
-- that signs their URLs too, so a URL one replica signed verifies on all.
ALTER TABLE attachments ADD COLUMN bytes BYTEA;
CREATE TABLE service_keys (
    name TEXT PRIMARY KEY,
    key BYTEA NOT NULL
);
