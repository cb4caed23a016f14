-- The events still to be matched against their chatbot's other endpoints,
-- as a queue of their own: the router deletes a narrow row here instead of
-- updating the wide events row (an update of `routed`, in the partial
-- index's predicate, was never HOT: every index of events took a new
-- entry per event). `events.routed` stays as it was written at insert
-- (whether the event needed routing); nothing reads it any more. No
-- foreign key: its check would lock each new event's row in the click's
-- statement; an erasure or purge deletes an event's row here with it.
CREATE TABLE IF NOT EXISTS unrouted_events (
    seq BIGINT PRIMARY KEY
);
INSERT INTO unrouted_events (seq) SELECT seq FROM events WHERE routed = 0 ON CONFLICT DO NOTHING;
DROP INDEX IF EXISTS events_unrouted;
-- A queue: rows come and go many times a second. Vacuumed after every
-- thousand deleted rows, not after a fifth of the table.
ALTER TABLE unrouted_events SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
