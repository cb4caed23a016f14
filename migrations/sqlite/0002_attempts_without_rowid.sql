-- Attempts are only ever found by (event_id, number): kept in that key's
-- own b-tree, each insert writes one tree instead of a table and an index.
BEGIN;
CREATE TABLE attempts_by_key (
    event_id            TEXT NOT NULL,
    number              INTEGER NOT NULL,
    at                  INTEGER NOT NULL,
    status_code         INTEGER,
    duration_ms         INTEGER NOT NULL,
    error               TEXT,
    response_excerpt    TEXT,
    PRIMARY KEY (event_id, number)
) WITHOUT ROWID;
INSERT INTO attempts_by_key
    SELECT event_id, number, at, status_code, duration_ms, error, response_excerpt FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_by_key RENAME TO attempts;
PRAGMA user_version = 2;
COMMIT;
