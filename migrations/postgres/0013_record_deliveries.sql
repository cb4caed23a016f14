-- The fan-out's attempt records, a batch in one call: the same three
-- statements per attempt as before (the delivery's state, its pair's next
-- head once it ended, the attempt row), run by the database in one round
-- trip instead of three per attempt. The endpoints of the ended attempts
-- are locked first, in one order, as every writer of heads does.
CREATE OR REPLACE FUNCTION blockhook_record_deliveries(
    p_seq           BIGINT[],
    p_status        TEXT[],
    p_number        BIGINT[],
    p_next          BIGINT[],
    p_final         BOOLEAN[],
    p_endpoint      TEXT[],
    p_conversation  TEXT[],
    p_event         TEXT[],
    p_at            BIGINT[],
    p_code          BIGINT[],
    p_duration      BIGINT[],
    p_error         TEXT[],
    p_excerpt       TEXT[],
    p_headers       TEXT[],
    p_gone          BOOLEAN[]
) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    i INT;
BEGIN
    PERFORM pg_advisory_xact_lock(7261537, k) FROM (
        SELECT DISTINCT hashtext(e) AS k
          FROM UNNEST(p_endpoint, p_final) AS u(e, f) WHERE f ORDER BY k) s;
    FOR i IN 1 .. COALESCE(array_length(p_seq, 1), 0) LOOP
        UPDATE deliveries SET status = p_status[i], attempts = GREATEST(attempts, p_number[i]),
               next_attempt_at = p_next[i], leased_until = 0
         WHERE seq = p_seq[i];
        -- Deleted with its endpoint or event while on the wire.
        CONTINUE WHEN NOT FOUND;
        IF p_final[i] THEN
            UPDATE deliveries SET is_head = 1 WHERE seq = (
                SELECT min(seq) FROM deliveries
                 WHERE endpoint_id = p_endpoint[i] AND conversation_id = p_conversation[i]
                   AND status IN ('pending', 'failed'))
               AND is_head = 0;
        END IF;
        INSERT INTO delivery_attempts (delivery_seq, number, event_id, endpoint_id, at, status_code,
               duration_ms, error, response_excerpt, request_headers)
        VALUES (p_seq[i], p_number[i], p_event[i], p_endpoint[i], p_at[i], p_code[i],
                p_duration[i], p_error[i], p_excerpt[i], p_headers[i])
        ON CONFLICT (delivery_seq, number) DO UPDATE SET at = EXCLUDED.at, status_code = EXCLUDED.status_code,
               duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error,
               response_excerpt = EXCLUDED.response_excerpt, request_headers = EXCLUDED.request_headers;
        IF p_gone[i] THEN
            UPDATE endpoints SET enabled = 0, disabled_reason = 'gone', updated_at = p_at[i]
             WHERE id = p_endpoint[i];
        END IF;
    END LOOP;
END
$$;
