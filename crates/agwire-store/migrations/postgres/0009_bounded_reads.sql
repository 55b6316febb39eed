-- What reads of a thread need, stored when its messages are (as on SQLite,
-- 0013): `messages.shown` (day-scoped history by an index),
-- `threads.derived_title` (the thread list reads no message; older threads
-- are filled by the store when it connects), and `attachment_refs` (a
-- thread's delete finds the attachments only it refers to by index).
-- PostgreSQL cannot read a string holding `\u0000` (a NUL a model or an
-- older client wrote) as text, and would fail this migration on it: the
-- escape is read as a space (`\u0020`) here, which leaves every
-- judgement below as it was (a space is text; ids hold no escapes).
ALTER TABLE messages ADD COLUMN shown BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE messages SET shown = TRUE
WHERE role = 'user' OR ui_schema IS NOT NULL
   OR (role = 'assistant'
       AND json_typeof(replace(body, '\u0000', '\u0020')::json -> 'content') = 'string'
       AND (replace(body, '\u0000', '\u0020')::json -> 'content')::text <> '""');
CREATE INDEX messages_shown ON messages (thread_id, created_at) WHERE shown;
ALTER TABLE threads ADD COLUMN derived_title TEXT;
CREATE TABLE attachment_refs (
    thread_id TEXT NOT NULL,
    attachment_id TEXT NOT NULL,
    PRIMARY KEY (thread_id, attachment_id)
);
CREATE INDEX attachment_refs_by_attachment ON attachment_refs (attachment_id);
INSERT INTO attachment_refs (thread_id, attachment_id)
SELECT DISTINCT m.thread_id, a.id
FROM messages m
JOIN threads t ON t.id = m.thread_id
CROSS JOIN LATERAL (SELECT replace(m.body, '\u0000', '\u0020')::json -> 'content' AS content) AS c
CROSS JOIN LATERAL json_array_elements(
    CASE WHEN json_typeof(c.content) = 'array' THEN c.content ELSE '[]'::json END) AS p(part)
JOIN attachments a
  ON a.user_id = t.user_id
 AND (p.part -> 'source' -> 'value')::text = '"attachment:' || a.id || '"'
WHERE m.role = 'user' AND (p.part -> 'type')::text = '"image"'
ON CONFLICT DO NOTHING;
-- agwire_accept and agwire_end take what the rows above need
-- (functions.sql): their old signatures go.
DROP FUNCTION IF EXISTS agwire_accept(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BOOLEAN, BOOLEAN,
    TEXT[], TEXT[], TEXT[], TEXT, BIGINT, TEXT, BIGINT, TEXT[], BOOLEAN);
DROP FUNCTION IF EXISTS agwire_end(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT[], TEXT[], TEXT[], TEXT, TEXT,
    BIGINT, TEXT[], TEXT[], TEXT[]);
