-- A job's thread belongs to the job's owner from the moment the job
-- exists (before, it was created by the first tick, and another user
-- could take it first). Jobs whose thread another user already holds
-- move to a fresh thread of their own.
UPDATE automation_jobs SET thread_id = lower(
    hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
    substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))
WHERE EXISTS (SELECT 1 FROM threads t WHERE t.id = automation_jobs.thread_id AND t.user_id <> automation_jobs.user_id);
INSERT INTO threads (id, user_id, created_at, last_active_at)
SELECT thread_id, user_id, created_at, created_at FROM automation_jobs j
WHERE NOT EXISTS (SELECT 1 FROM threads t WHERE t.id = j.thread_id);
