-- The retention purge walks a chatbot's expired conversations in
-- (created_at, id) order, a page at a time. With an index on
-- (chatbot_id, created_at) alone, every page read and sorted all the
-- conversations sharing a created_at from the page's start (on a store
-- where many do, the whole store per page). With id in the index a page
-- is read from where the last one ended, already in order.
CREATE INDEX IF NOT EXISTS conversations_by_age_id ON conversations(chatbot_id, created_at, id);
DROP INDEX IF EXISTS conversations_by_age;
