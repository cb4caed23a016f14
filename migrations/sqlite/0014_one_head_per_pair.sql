-- Each (endpoint, conversation) pair's oldest delivery still to make is
-- its only head: a redelivery that revives older deliveries unmarks the
-- heads behind them. Until now a revived delivery could be a second head
-- and the claim checked each head's order again; that check is gone, so
-- the extra heads left by earlier versions are unmarked here.
UPDATE deliveries SET is_head = 0
 WHERE is_head = 1 AND status IN ('pending', 'failed')
   AND EXISTS (SELECT 1 FROM deliveries b INDEXED BY deliveries_active
               WHERE b.endpoint_id = deliveries.endpoint_id AND b.conversation_id = deliveries.conversation_id
                 AND b.status IN ('pending', 'failed') AND b.seq < deliveries.seq);
