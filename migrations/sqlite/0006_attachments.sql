-- The file an ask may carry, stored with its question. Deleting the
-- conversation deletes its attachments (foreign keys are on).
CREATE TABLE IF NOT EXISTS attachments (
    id                  TEXT PRIMARY KEY,
    chatbot_id          TEXT NOT NULL,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    message_id          TEXT NOT NULL,
    filename            TEXT NOT NULL,
    content_type        TEXT NOT NULL,
    data                BLOB NOT NULL,
    created_at          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS attachments_by_conversation ON attachments(conversation_id);
