-- An attachment's bytes in the configured S3-compatible bucket
-- (`[attachments] url`) instead of a file beside the database.
ALTER TABLE attachments ADD COLUMN in_bucket INTEGER NOT NULL DEFAULT 0;
