-- What reads of a thread need, stored when its messages are, so that no
-- request reads more than it shows:
-- `messages.shown`: whether day-scoped history shows the message (a user
-- message, an assistant message with text or a UI); a day is then read by
-- an index instead of the whole thread.
ALTER TABLE messages ADD COLUMN shown INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET shown = 1
WHERE role = 'user' OR ui_schema IS NOT NULL
   OR (role = 'assistant' AND COALESCE(json_extract(body, '$.content'), '') <> '');
CREATE INDEX messages_shown ON messages (thread_id, created_at) WHERE shown;
-- `threads.derived_title`: what the first user message calls the thread
-- (its first line, cut), so that listing threads reads no message. NULL
-- while it has none; filled for older threads by the store when it opens.
ALTER TABLE threads ADD COLUMN derived_title TEXT;
-- The attachments of its owner a thread's turns refer to, recorded when
-- they are accepted: deleting a thread finds what only it refers to by
-- index, not by scanning the owner's messages under the write lock.
CREATE TABLE attachment_refs (
    thread_id TEXT NOT NULL,
    attachment_id TEXT NOT NULL,
    PRIMARY KEY (thread_id, attachment_id)
);
CREATE INDEX attachment_refs_by_attachment ON attachment_refs (attachment_id);
INSERT OR IGNORE INTO attachment_refs (thread_id, attachment_id)
SELECT m.thread_id, substr(json_extract(p.value, '$.source.value'), 12)
FROM messages m
JOIN threads t ON t.id = m.thread_id
JOIN json_each(CASE WHEN json_type(m.body, '$.content') = 'array'
                    THEN json_extract(m.body, '$.content') ELSE '[]' END) p
JOIN attachments a ON a.id = substr(json_extract(p.value, '$.source.value'), 12) AND a.user_id = t.user_id
WHERE m.role = 'user' AND json_extract(p.value, '$.type') = 'image'
  AND json_extract(p.value, '$.source.value') LIKE 'attachment:%';
