-- §13: several endpoints per chatbot. The chatbot's webhook_url stays its
-- default endpoint (its url, secret and 410 state in the chatbots row);
-- a row here with is_default = 1 holds that endpoint's other settings.
CREATE TABLE IF NOT EXISTS endpoints (
    id                  TEXT PRIMARY KEY,
    chatbot_id          TEXT NOT NULL,
    is_default          BIGINT NOT NULL DEFAULT 0,
    url                 TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    event_types         TEXT,
    filter              TEXT,
    replies             BIGINT NOT NULL,
    rate_limit          TEXT,
    headers             TEXT,
    enabled             BIGINT NOT NULL DEFAULT 1,
    disabled_reason     TEXT,
    signing_secret      TEXT NOT NULL,
    previous_secret     TEXT,
    previous_until      BIGINT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS endpoints_by_chatbot ON endpoints(chatbot_id, created_at);

-- One delivery per (event, endpoint other than the default); the default
-- endpoint's delivery is the events row itself.
CREATE TABLE IF NOT EXISTS deliveries (
    seq                 BIGSERIAL PRIMARY KEY,
    event_seq           BIGINT NOT NULL,
    event_id            TEXT NOT NULL,
    endpoint_id         TEXT NOT NULL,
    chatbot_id          TEXT NOT NULL,
    conversation_id     TEXT NOT NULL,
    status              TEXT NOT NULL,          -- pending | failed | succeeded | dead
    attempts            BIGINT NOT NULL DEFAULT 0,
    attempt_base        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at     BIGINT NOT NULL,
    leased_until        BIGINT NOT NULL DEFAULT 0,
    created_at          BIGINT NOT NULL
);
-- Unique: two routers (instances) never route one event to an endpoint twice.
CREATE UNIQUE INDEX IF NOT EXISTS deliveries_by_event ON deliveries(event_seq, endpoint_id);
CREATE INDEX IF NOT EXISTS deliveries_active ON deliveries(endpoint_id, conversation_id, seq) WHERE status IN ('pending', 'failed');
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries(next_attempt_at) WHERE status IN ('pending', 'failed');

CREATE TABLE IF NOT EXISTS delivery_attempts (
    delivery_seq        BIGINT NOT NULL,
    number              BIGINT NOT NULL,
    event_id            TEXT NOT NULL,
    endpoint_id         TEXT NOT NULL,
    at                  BIGINT NOT NULL,
    status_code         BIGINT,
    duration_ms         BIGINT NOT NULL,
    error               TEXT,
    response_excerpt    TEXT,
    request_headers     TEXT,
    PRIMARY KEY (delivery_seq, number)
);
CREATE INDEX IF NOT EXISTS delivery_attempts_by_event ON delivery_attempts(event_id);

-- 0: the event still has to be matched against the chatbot's other
-- endpoints (the router does it); 1: done, or nothing to match.
ALTER TABLE events ADD COLUMN routed BIGINT NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS events_unrouted ON events(seq) WHERE routed = 0;
