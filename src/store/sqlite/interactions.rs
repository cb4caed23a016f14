//! Clicks and submits, interactions read and answered, replies.

use super::*;
use crate::domain::status::InteractionStatus;

impl Inbox for SqliteStore {
    fn interact(&self, req: InteractRequest) -> StoreFut<'_, Interacted> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let fx = self
                .write_with(
                    true,
                    false,
                    move |c| script::now(script::clicks::interact(&mut Sql(c), &req)),
                    |fx| fx.hot.take(),
                )
                .await?;
            fx.announce.publish(signals.as_ref());
            Ok(fx.out)
        })
    }

    fn get_interaction(&self, chatbot_id: &str, id: &str) -> StoreFut<'_, Interaction> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {} FROM interactions WHERE id = ?1 AND chatbot_id = ?2",
                inbox::COLS
            ))?
            .query_row([id, chatbot_id], inbox::row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn list_interactions(
        &self,
        ask: PageAsk<InteractionFilter>,
    ) -> StoreFut<'_, Page<Interaction>> {
        let (f, limit) = (&ask.filter, ask.limit);
        let r = self.read(|c| {
            let mut s = c.prepare_cached(&format!(
                "SELECT {}, seq FROM interactions
                 WHERE chatbot_id = ?1 AND seq < ?2 AND (?3 IS NULL OR conversation_id = ?3)
                   AND (?4 IS NULL
                        OR (?4 = 'pending' AND status = 'pending' AND (expires_at IS NULL OR expires_at > ?5))
                        OR (?4 = 'expired' AND (status = 'expired' OR (status = 'pending' AND expires_at <= ?5)))
                        OR (?4 NOT IN ('pending', 'expired') AND status = ?4))
                 ORDER BY seq DESC LIMIT ?6",
                inbox::COLS
            ))?;
            let rows = s.query_map(
                params![ask.chatbot_id, ask.cursor.unwrap_or(i64::MAX), f.conversation_id, f.status.map(InteractionStatus::as_str), ask.now_ms, limit as i64 + 1],
                |r| Ok((inbox::row(r)?, r.get::<_, i64>(14)?)),
            )?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move { Ok(crate::store::page_by_seq(r?, limit)) })
    }

    fn answer_interaction(&self, req: AnswerRequest) -> StoreFut<'_, AnswerOutcome> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let (outcome, fx) = self
                .write_with(
                    true,
                    true,
                    move |c| script::now(script::inbox::answer(&mut Sql(c), &req)),
                    |t| t.1.as_mut().and_then(|fx| fx.hot.take()),
                )
                .await?;
            if let Some(fx) = fx {
                fx.announce.publish(signals.as_ref());
            }
            Ok(outcome)
        })
    }

    fn close_interaction(&self, closing: Closing) -> StoreFut<'_, Interaction> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let (i, announce) = self
                .write(move |c| script::now(script::inbox::close(&mut Sql(c), &closing)))
                .await?;
            announce.publish(signals.as_ref());
            Ok(i)
        })
    }

    fn reply(&self, req: ReplyRequest) -> StoreFut<'_, ReplyOutcome> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let (outcome, announce) = self
                .write(move |c| script::now(script::reply::reply(&mut Sql(c), req)))
                .await?;
            announce.publish(signals.as_ref());
            Ok(outcome)
        })
    }
}
