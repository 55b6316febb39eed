ALTER TABLE messages ADD COLUMN ui_schema TEXT;
