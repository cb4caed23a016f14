CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS chatbots (
    id                  TEXT PRIMARY KEY,
    name                TEXT NOT NULL,
    webhook_url         TEXT NOT NULL,
    retention_ms        INTEGER NOT NULL,
    api_key_hash        TEXT NOT NULL UNIQUE,
    signing_secret      TEXT NOT NULL,
    previous_secret     TEXT,
    previous_until      INTEGER,
    endpoint_disabled   INTEGER NOT NULL DEFAULT 0,
    member_id           TEXT NOT NULL,
    created_at          INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS conversations (
    id                  TEXT PRIMARY KEY,
    chatbot_id          TEXT NOT NULL REFERENCES chatbots(id),
    visitor_id          TEXT NOT NULL,
    visitor_name        TEXT NOT NULL,
    token_hash          TEXT NOT NULL UNIQUE,
    taken_over_by       TEXT,
    created_at          INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS messages (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    conversation_id     TEXT NOT NULL,
    doc                 TEXT NOT NULL,
    created_at          INTEGER NOT NULL,
    deleted             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, seq);

-- The outbox: one row per event, its delivery state beside it.
CREATE TABLE IF NOT EXISTS events (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    chatbot_id          TEXT NOT NULL,
    conversation_id     TEXT NOT NULL,
    type                TEXT NOT NULL,
    payload             BLOB NOT NULL,
    created_at          INTEGER NOT NULL,
    status              TEXT NOT NULL,          -- pending | failed | succeeded | dead
    attempts            INTEGER NOT NULL DEFAULT 0,
    attempt_base        INTEGER NOT NULL DEFAULT 0,  -- attempts before the last redeliver
    next_attempt_at     INTEGER NOT NULL,
    is_head             INTEGER NOT NULL,       -- 1: no earlier undelivered event in its conversation
    leased_until        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS events_due ON events(next_attempt_at) WHERE is_head = 1 AND status IN ('pending', 'failed');
CREATE INDEX IF NOT EXISTS events_active_by_conversation ON events(conversation_id, seq) WHERE status IN ('pending', 'failed');
CREATE INDEX IF NOT EXISTS events_by_chatbot ON events(chatbot_id, seq);

CREATE TABLE IF NOT EXISTS attempts (
    event_id            TEXT NOT NULL,
    number              INTEGER NOT NULL,
    at                  INTEGER NOT NULL,
    status_code         INTEGER,
    duration_ms         INTEGER NOT NULL,
    error               TEXT,
    response_excerpt    TEXT,
    PRIMARY KEY (event_id, number)
);

CREATE TABLE IF NOT EXISTS stream_events (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id     TEXT NOT NULL,
    kind                TEXT NOT NULL,
    data                TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS stream_by_conversation ON stream_events(conversation_id, seq);

-- response_url uses, per event, and their idempotency keys.
CREATE TABLE IF NOT EXISTS response_uses (
    event_id            TEXT PRIMARY KEY,
    uses                INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS response_idempotency (
    event_id            TEXT NOT NULL,
    key                 TEXT NOT NULL,
    result              TEXT NOT NULL,
    PRIMARY KEY (event_id, key)
);

-- Interactions: each interactive block (or ask) as an item to answer.
CREATE TABLE IF NOT EXISTS interactions (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    chatbot_id          TEXT NOT NULL,
    conversation_id     TEXT NOT NULL,
    message_id          TEXT NOT NULL,
    type                TEXT NOT NULL,
    status              TEXT NOT NULL,          -- pending | answered | expired | cancelled
    prompt              TEXT NOT NULL,
    payload             TEXT NOT NULL,
    spec                TEXT NOT NULL,
    is_ask              INTEGER NOT NULL DEFAULT 0,
    response            TEXT,
    expires_at          INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    answered_at         INTEGER
);
CREATE INDEX IF NOT EXISTS interactions_by_chatbot ON interactions(chatbot_id, seq);
CREATE INDEX IF NOT EXISTS interactions_by_message ON interactions(message_id);
CREATE INDEX IF NOT EXISTS interactions_pending_ask ON interactions(conversation_id) WHERE is_ask = 1 AND status = 'pending';

CREATE TABLE IF NOT EXISTS interaction_idempotency (
    interaction_id      TEXT NOT NULL,
    key                 TEXT NOT NULL,
    body_hash           TEXT NOT NULL,
    result              TEXT NOT NULL,
    PRIMARY KEY (interaction_id, key)
);
