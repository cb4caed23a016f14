//! Messages (takeover, insert, read), attachments and the conversation stream.

use super::*;

impl Conversations for SqliteStore {
    fn takeover(&self, conversation_id: &str, member: Person, now_ms: i64) -> StoreFut<'_, ()> {
        let cid = conversation_id.to_string();
        let signals = self.signals.clone();
        Box::pin(async move {
            let announce = self
                .write(move |c| {
                    script::now(script::messages::take_over(
                        &mut Sql(c),
                        &cid,
                        &member,
                        now_ms,
                    ))
                })
                .await?;
            self.visitors.invalidate();
            announce.publish(signals.as_ref());
            Ok(())
        })
    }

    fn insert_message(&self, p: Posting) -> StoreFut<'_, ()> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let (announce, _) = self
                .write_with(
                    true,
                    true,
                    move |c| script::now(script::messages::insert(&mut Sql(c), p)),
                    |t| t.1.take(),
                )
                .await?;
            announce.publish(signals.as_ref());
            Ok(())
        })
    }

    fn insert_attachment(&self, a: crate::domain::attachment::Attachment) -> StoreFut<'_, ()> {
        Box::pin(self.write(move |c| attachments::insert(c, &a).map_err(StoreError::from)))
    }

    fn get_attachment(&self, id: &str) -> StoreFut<'_, crate::domain::attachment::Attachment> {
        let r = self.read(|c| attachments::get(c, id));
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn delete_attachment(&self, id: &str) -> StoreFut<'_, ()> {
        let id = id.to_string();
        Box::pin(self.write(move |c| attachments::delete(c, &id).map_err(StoreError::from)))
    }

    fn get_message(&self, id: &str) -> StoreFut<'_, Message> {
        let r = self.read(|c| {
            c.prepare_cached("SELECT doc, created_at FROM messages WHERE id = ?1 AND deleted = 0")?
                .query_row([id], |r| parse_message(&r.get::<_, String>(0)?, r.get(1)?))
                .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> StoreFut<'_, Page<Message>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT doc, created_at, seq FROM messages WHERE conversation_id = ?1 AND deleted = 0 AND seq < ?2
                 ORDER BY seq DESC LIMIT ?3",
            )?;
            let rows = s.query_map(params![conversation_id, cursor.unwrap_or(i64::MAX), limit as i64 + 1], |r| {
                Ok((parse_message(&r.get::<_, String>(0)?, r.get(1)?)?, r.get::<_, i64>(2)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move { Ok(crate::store::page_by_seq(r?, limit)) })
    }
    fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> StoreFut<'_, Vec<StreamEvent>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT seq, conversation_id, kind, data FROM stream_events WHERE conversation_id = ?1 AND seq > ?2
                 ORDER BY seq LIMIT ?3",
            )?;
            let rows = s.query_map(params![conversation_id, after_seq, limit as i64], |r| {
                Ok(StreamEvent {
                    seq: r.get(0)?,
                    conversation_id: r.get(1)?,
                    kind: r.get(2)?,
                    data: r.get(3)?,
                })
            })?;
            rows.collect()
        });
        Box::pin(async move { r })
    }

    fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> StoreFut<'_, StreamEvent> {
        let (cid, kind) = (conversation_id.to_string(), kind.to_string());
        let signals = self.signals.clone();
        Box::pin(async move {
            let e = self
                .write(move |c| append_stream(c, &cid, &kind, data))
                .await?;
            signals.stream(vec![e.clone()]);
            Ok(e)
        })
    }
}
