//! Clicks and submits, interactions read and answered, replies.

use super::*;
use crate::domain::status::InteractionStatus;

impl Inbox for PostgresStore {
    fn interact(&self, req: InteractRequest) -> StoreFut<'_, Interacted> {
        Box::pin(async move {
            let done = self.clicks.interact(req).await?;
            self.signals.stream(done.stream);
            self.signals.api(done.api);
            if done.due {
                self.signals.events_due();
            }
            Ok(done.out)
        })
    }

    fn get_interaction(&self, chatbot_id: &str, id: &str) -> StoreFut<'_, Interaction> {
        let (bid, id) = (chatbot_id.to_string(), id.to_string());
        Box::pin(async move {
            let r = sqlx::query(&format!(
                "SELECT {} FROM interactions WHERE id = $1 AND chatbot_id = $2",
                inbox::COLS
            ))
            .bind(&id)
            .bind(&bid)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StoreError::NotFound)?;
            inbox::row(&r).map_err(StoreError::from)
        })
    }

    fn list_interactions(
        &self,
        ask: PageAsk<InteractionFilter>,
    ) -> StoreFut<'_, Page<Interaction>> {
        Box::pin(async move {
            let rows = sqlx::query(&format!(
                "SELECT {}, seq FROM interactions
                 WHERE chatbot_id = $1 AND seq < $2 AND ($3::text IS NULL OR conversation_id = $3)
                   AND ($4::text IS NULL
                        OR ($4 = 'pending' AND status = 'pending' AND (expires_at IS NULL OR expires_at > $5))
                        OR ($4 = 'expired' AND (status = 'expired' OR (status = 'pending' AND expires_at <= $5)))
                        OR ($4 NOT IN ('pending', 'expired') AND status = $4))
                 ORDER BY seq DESC LIMIT $6",
                inbox::COLS
            ))
            .bind(ask.chatbot_id.as_str())
            .bind(ask.cursor.unwrap_or(i64::MAX))
            .bind(&ask.filter.conversation_id)
            .bind(ask.filter.status.map(InteractionStatus::as_str))
            .bind(ask.now_ms)
            .bind(ask.limit as i64 + 1)
            .fetch_all(&self.pool)
            .await?;
            let out = rows
                .iter()
                .map(|r| Ok((inbox::row(r)?, r.try_get::<i64, _>(14)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok(page_of(out, ask.limit))
        })
    }

    fn answer_interaction(&self, req: AnswerRequest) -> StoreFut<'_, AnswerOutcome> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let (outcome, fx) = script::inbox::answer(&mut tx, &req).await?;
            if let Some(fx) = fx {
                self.commit_announcing(tx, fx.announce, true).await?;
            }
            Ok(outcome)
        })
    }

    fn close_interaction(&self, c: Closing) -> StoreFut<'_, Interaction> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let (i, announce) = script::inbox::close(&mut tx, &c).await?;
            self.commit_announcing(tx, announce, false).await?;
            Ok(i)
        })
    }

    fn reply(&self, req: ReplyRequest) -> StoreFut<'_, ReplyOutcome> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let (outcome, announce) = script::reply::reply(&mut tx, req).await?;
            if matches!(outcome, ReplyOutcome::Applied(_)) {
                self.commit_announcing(tx, announce, false).await?;
            }
            Ok(outcome)
        })
    }
}
