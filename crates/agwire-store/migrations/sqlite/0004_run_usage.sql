ALTER TABLE runs ADD COLUMN usage TEXT;
ALTER TABLE runs ADD COLUMN pending_messages TEXT;
CREATE INDEX messages_by_id ON messages (thread_id, id);
