//! Messages (takeover, insert, read), attachments and the conversation stream.

use super::*;

impl Conversations for PostgresStore {
    fn takeover(&self, conversation_id: &str, member: Person, now_ms: i64) -> StoreFut<'_, ()> {
        let cid = conversation_id.to_string();
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let announce = script::messages::take_over(&mut tx, &cid, &member, now_ms).await?;
            self.tokens_changed(&mut tx).await?;
            self.commit_announcing(tx, announce, false).await?;
            self.visitors.invalidate();
            Ok(())
        })
    }

    fn insert_message(&self, p: Posting) -> StoreFut<'_, ()> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let due = p.event.is_some();
            let (announce, _) = script::messages::insert(&mut tx, p).await?;
            self.commit_announcing(tx, announce, due).await
        })
    }

    fn insert_attachment(&self, a: crate::domain::attachment::Attachment) -> StoreFut<'_, ()> {
        Box::pin(attachments::insert(&self.pool, a))
    }

    fn get_attachment(&self, id: &str) -> StoreFut<'_, crate::domain::attachment::Attachment> {
        let id = id.to_string();
        Box::pin(async move { attachments::get(&self.pool, &id).await })
    }

    fn delete_attachment(&self, id: &str) -> StoreFut<'_, ()> {
        let id = id.to_string();
        Box::pin(async move { attachments::delete(&self.pool, &id).await })
    }

    fn get_message(&self, id: &str) -> StoreFut<'_, Message> {
        let id = id.to_string();
        Box::pin(async move {
            let row =
                sqlx::query("SELECT doc, created_at FROM messages WHERE id = $1 AND deleted = 0")
                    .bind(&id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or(StoreError::NotFound)?;
            parse_message(&row.try_get::<String, _>(0)?, row.try_get(1)?)
        })
    }

    fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> StoreFut<'_, Page<Message>> {
        let cid = conversation_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT doc, created_at, seq FROM messages WHERE conversation_id = $1 AND deleted = 0 AND seq < $2
                 ORDER BY seq DESC LIMIT $3",
            )
            .bind(&cid)
            .bind(cursor.unwrap_or(i64::MAX))
            .bind(limit as i64 + 1)
            .fetch_all(&self.pool)
            .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let m = parse_message(&r.try_get::<String, _>(0)?, r.try_get(1)?)?;
                out.push((m, r.try_get::<i64, _>(2)?));
            }
            Ok(page_of(out, limit))
        })
    }
    fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> StoreFut<'_, Vec<StreamEvent>> {
        let cid = conversation_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT seq, conversation_id, kind, data FROM stream_events WHERE conversation_id = $1 AND seq > $2
                 ORDER BY seq LIMIT $3",
            )
            .bind(&cid)
            .bind(after_seq)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|r| {
                    Ok(StreamEvent {
                        seq: r.try_get(0)?,
                        conversation_id: r.try_get(1)?,
                        kind: r.try_get(2)?,
                        data: r.try_get(3)?,
                    })
                })
                .collect()
        })
    }

    fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> StoreFut<'_, StreamEvent> {
        let (cid, kind) = (conversation_id.to_string(), kind.to_string());
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let e = append_stream(&mut tx, &cid, &kind, data).await?;
            self.commit(tx, std::slice::from_ref(&e), &[], false)
                .await?;
            self.signals.stream(vec![e.clone()]);
            Ok(e)
        })
    }
}
