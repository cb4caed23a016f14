-- The W3C trace context of the request that caused an event, continued by
-- every delivery of it (a restart or a retry keeps the trace).
ALTER TABLE events ADD COLUMN traceparent TEXT;
