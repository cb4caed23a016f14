-- Each (endpoint, conversation) pair's oldest delivery still to make is
-- its only head: the router marks only the first of a pair it inserts, and
-- a redelivery that revives older deliveries unmarks the heads behind
-- them. Until now two heads of one pair were allowed and the claim checked
-- each head's order again; that check is gone, so the extra heads left by
-- earlier versions are unmarked here.
UPDATE deliveries d SET is_head = 0
 WHERE d.is_head = 1 AND d.status IN ('pending', 'failed')
   AND EXISTS (SELECT 1 FROM deliveries b
               WHERE b.endpoint_id = d.endpoint_id AND b.conversation_id = d.conversation_id
                 AND b.status IN ('pending', 'failed') AND b.seq < d.seq);
