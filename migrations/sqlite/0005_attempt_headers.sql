-- The request headers each attempt sent (a JSON object), shown to the
-- chatbot's reviewers.
ALTER TABLE attempts ADD COLUMN request_headers TEXT;
