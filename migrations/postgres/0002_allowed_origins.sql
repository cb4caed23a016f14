-- §9: the origins a chatbot's widget may be embedded on, as a JSON array of
-- normalised origins, or ["*"] (any).
ALTER TABLE chatbots ADD COLUMN IF NOT EXISTS allowed_origins TEXT NOT NULL DEFAULT '["*"]';
