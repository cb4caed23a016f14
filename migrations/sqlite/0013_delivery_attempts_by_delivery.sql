-- An event's attempts at its other endpoints are read through its
-- deliveries (`deliveries_by_event`, then the attempts' own key), so the
-- attempts keep no index by event: one b-tree fewer written per attempt.
DROP INDEX IF EXISTS delivery_attempts_by_event;
