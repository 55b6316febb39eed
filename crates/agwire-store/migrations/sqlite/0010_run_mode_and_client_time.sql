-- What validation established about a run, kept typed beside its input
-- (the engine does not parse forwardedProps again).
ALTER TABLE runs ADD COLUMN runtime_mode TEXT;
ALTER TABLE runs ADD COLUMN client_time TEXT;
UPDATE runs SET runtime_mode = json_extract(input, '$.forwardedProps.runtime_mode'),
    client_time = json(json_extract(input, '$.forwardedProps.client_time'))
WHERE status = 'queued';
