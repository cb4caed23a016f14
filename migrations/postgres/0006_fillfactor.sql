-- An event's row is updated in place several times (its lease, then its
-- outcome; the next one's promotion to head). Room left on each page lets
-- PostgreSQL write a lease (no indexed column) as a heap-only tuple, with
-- no new index entries, and prune the old versions as it goes.
ALTER TABLE events SET (fillfactor = 50);
