//! What the reviewers' dashboard adds to the store: bulk redelivery and the
//! admin's list of chatbots.

use super::*;

pub(super) async fn redeliver_all(st: &PostgresStore, which: RedeliverAll) -> StoreResult<u64> {
    let (chatbot_id, status, now_ms) = (which.chatbot_id.as_str(), which.status, which.now_ms);
    let since = which.since.unwrap_or(i64::MIN);
    let mut tx = st.pool.begin().await?;
    let others = match &which.endpoint {
        Some(EndpointSel::Default) => 0,
        Some(EndpointSel::Other(id)) => redeliver_others(&mut tx, &which, id).await?,
        None => redeliver_others(&mut tx, &which, "").await?,
    };
    let n = if matches!(which.endpoint, Some(EndpointSel::Other(_))) {
        0
    } else if status == EventStatus::Failed {
        // Already queued: due now.
        sqlx::query(
            "UPDATE events SET next_attempt_at = $3
             WHERE chatbot_id = $1 AND status = 'failed' AND created_at >= $2",
        )
        .bind(chatbot_id)
        .bind(since)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected()
    } else {
        let rows = sqlx::query(
            "SELECT seq, conversation_id FROM events
             WHERE chatbot_id = $1 AND status = 'dead' AND created_at >= $2 ORDER BY seq",
        )
        .bind(chatbot_id)
        .bind(since)
        .fetch_all(&mut *tx)
        .await?;
        let rows = rows
            .iter()
            .map(|r| Ok((r.try_get::<i64, _>(0)?, r.try_get::<String, _>(1)?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        // The conversations in one order (as every writer takes them), then
        // the events in theirs: the first of a conversation with nothing
        // queued becomes its head, the later ones wait behind it.
        let mut convs: Vec<&str> = rows.iter().map(|(_, c)| c.as_str()).collect();
        convs.sort_unstable();
        convs.dedup();
        sqlx::query("SELECT 1 FROM conversations WHERE id = ANY($1) ORDER BY id FOR UPDATE")
            .bind(&convs)
            .execute(&mut *tx)
            .await?;
        for (seq, conv) in &rows {
            sqlx::query(
                "UPDATE events SET status = 'pending', next_attempt_at = $2, leased_until = 0, attempt_base = attempts,
                 is_head = CASE WHEN EXISTS (SELECT 1 FROM events WHERE conversation_id = $3 AND status IN ('pending', 'failed')) THEN 0 ELSE 1 END
                 WHERE seq = $1",
            )
            .bind(seq)
            .bind(now_ms)
            .bind(conv)
            .execute(&mut *tx)
            .await?;
        }
        rows.len() as u64
    };
    let n = n + others;
    tx.commit().await?;
    if n > 0 {
        st.signals.events_due();
        st.signals.deliveries_due();
    }
    Ok(n)
}

/// A bulk redelivery's deliveries to endpoints other than the default: to
/// `endpoint_id`, or all for `""` (`event_detail::REDELIVER_OTHERS`).
async fn redeliver_others(
    tx: &mut Tx<'_>,
    w: &RedeliverAll,
    endpoint_id: &str,
) -> StoreResult<u64> {
    super::fanout::lock_chatbot_endpoints(tx, w.chatbot_id.as_str(), endpoint_id).await?;
    let n = sqlx::query(crate::store::event_detail::REDELIVER_OTHERS)
        .bind(w.chatbot_id.as_str())
        .bind(w.status.as_str())
        .bind(w.since.unwrap_or(i64::MIN))
        .bind(w.now_ms)
        .bind(endpoint_id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if n > 0 {
        super::fanout::one_head_per_pair(tx, w.chatbot_id.as_str(), endpoint_id, "").await?;
    }
    Ok(n)
}

pub(super) async fn list_chatbots(
    st: &PostgresStore,
    limit: usize,
    cursor: Option<String>,
) -> StoreResult<Page<Chatbot>> {
    let q = format!(
        "SELECT {CHATBOT_COLS} FROM chatbots WHERE ($1::text IS NULL OR id < $1) ORDER BY id DESC LIMIT $2"
    );
    let rows = sqlx::query(&q)
        .bind(&cursor)
        .bind(limit as i64 + 1)
        .fetch_all(&st.pool)
        .await?;
    let data = rows
        .iter()
        .map(chatbot_row)
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    Ok(crate::store::page_by_key(data, limit, |b| b.id.to_string()))
}
