-- Each (endpoint, conversation) pair's oldest delivery still to make is
-- marked, so that a claim reads the pairs' heads instead of every delivery
-- waiting behind them (§13: per-conversation order per endpoint). A mark
-- on a delivery that is not its pair's oldest is harmless: the claim
-- checks the order again; a missing mark would hold a pair, so every row
-- starts marked and the rows behind an older one are unmarked here.
BEGIN;
ALTER TABLE deliveries ADD COLUMN is_head INTEGER NOT NULL DEFAULT 1;
UPDATE deliveries SET is_head = 0
 WHERE status IN ('pending', 'failed')
   AND EXISTS (SELECT 1 FROM deliveries b INDEXED BY deliveries_active
               WHERE b.endpoint_id = deliveries.endpoint_id AND b.conversation_id = deliveries.conversation_id
                 AND b.status IN ('pending', 'failed') AND b.seq < deliveries.seq);
CREATE INDEX IF NOT EXISTS deliveries_heads ON deliveries(next_attempt_at, seq) WHERE is_head = 1 AND status IN ('pending', 'failed');
DROP INDEX IF EXISTS deliveries_due;
PRAGMA user_version = 9;
COMMIT;
