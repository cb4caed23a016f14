-- The data lifecycle: a purge finds conversations past their chatbot's
-- retention by age, and deletes each with everything keyed by it.
CREATE INDEX IF NOT EXISTS conversations_by_age ON conversations(chatbot_id, created_at);
CREATE INDEX IF NOT EXISTS events_by_conversation ON events(conversation_id);
CREATE INDEX IF NOT EXISTS interactions_by_conversation ON interactions(conversation_id);
