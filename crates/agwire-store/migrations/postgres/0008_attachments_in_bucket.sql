-- An attachment's bytes in the configured S3-compatible bucket
-- (`[attachments] url`) instead of the row's `bytes`.
ALTER TABLE attachments ADD COLUMN in_bucket BOOLEAN NOT NULL DEFAULT false;
