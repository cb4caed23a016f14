//! Endpoints (§13): read for routing, managed through the API.

use super::*;
use crate::domain::endpoints::stored::COLUMNS;
use crate::domain::endpoints::{Endpoint, StoredEndpoint, default_endpoint_id};
use crate::store::endpoints as sql;

fn endpoint_row(r: &PgRow) -> Result<StoredEndpoint, sqlx::Error> {
    Ok(StoredEndpoint {
        id: r.try_get(0)?,
        chatbot_id: r.try_get(1)?,
        is_default: r.try_get(2)?,
        url: r.try_get(3)?,
        description: r.try_get(4)?,
        event_types: r.try_get(5)?,
        filter: r.try_get(6)?,
        replies: r.try_get(7)?,
        rate_limit: r.try_get(8)?,
        headers: r.try_get(9)?,
        enabled: r.try_get(10)?,
        disabled_reason: r.try_get(11)?,
        signing_secret: r.try_get(12)?,
        previous_secret: r.try_get(13)?,
        previous_until: r.try_get(14)?,
        created_at: r.try_get(15)?,
        updated_at: r.try_get(16)?,
    })
}

type Query<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Binds an endpoint's settings, `url` to `disabled_reason`, in the order
/// of [`COLUMNS`](crate::domain::endpoints::stored::COLUMNS).
fn bind_settings<'q>(q: Query<'q>, row: &'q StoredEndpoint) -> Query<'q> {
    q.bind(&row.url)
        .bind(&row.description)
        .bind(&row.event_types)
        .bind(&row.filter)
        .bind(row.replies)
        .bind(&row.rate_limit)
        .bind(&row.headers)
        .bind(row.enabled)
        .bind(&row.disabled_reason)
}

async fn insert(tx: &mut Tx<'_>, row: &StoredEndpoint, upsert: &str) -> StoreResult<()> {
    let sql = format!("{} {upsert}", sql::insert_sql());
    let q = sqlx::query(&sql)
        .bind(&row.id)
        .bind(&row.chatbot_id)
        .bind(row.is_default);
    bind_settings(q, row)
        .bind(&row.signing_secret)
        .bind(&row.previous_secret)
        .bind(row.previous_until)
        .bind(row.created_at)
        .bind(row.updated_at)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl PostgresStore {
    /// Commits a change that may let deliveries go (an endpoint enabled).
    async fn commit_enabled(&self, mut tx: Tx<'_>, enabled: bool) -> StoreResult<()> {
        let mut notes = notify::Notes::new(&self.instance);
        if enabled {
            notes.due();
        }
        notes.send(&mut tx).await?;
        tx.commit().await?;
        if enabled {
            self.signals.events_due();
        }
        Ok(())
    }
}

impl Endpoints for PostgresStore {
    fn endpoints_of(&self, chatbot_id: &str) -> StoreFut<'_, Vec<Endpoint>> {
        let chatbot_id = chatbot_id.to_string();
        Box::pin(async move {
            let q = format!("SELECT {CHATBOT_COLS} FROM chatbots WHERE id = $1");
            let bot = sqlx::query(&q)
                .bind(&chatbot_id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or(StoreError::NotFound)?;
            let bot = chatbot_row(&bot)?;
            let rows = sqlx::query(&format!("SELECT {COLUMNS} {}", sql::ENDPOINTS_OF))
                .bind(&chatbot_id)
                .fetch_all(&self.pool)
                .await?;
            let rows = rows
                .iter()
                .map(endpoint_row)
                .collect::<Result<Vec<_>, _>>()?;
            sql::assemble(&bot, rows)
        })
    }

    fn create_endpoint(&self, ep: Endpoint) -> StoreFut<'_, ()> {
        let row = StoredEndpoint::of(&ep);
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            insert(&mut tx, &row, "").await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn update_endpoint(&self, ep: Endpoint) -> StoreFut<'_, ()> {
        let row = StoredEndpoint::of(&ep);
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let n = if ep.is_default {
                sqlx::query(
                    "UPDATE chatbots SET webhook_url = $2, endpoint_disabled = $3 WHERE id = $1",
                )
                .bind(&ep.chatbot_id)
                .bind(&ep.url)
                .bind((!ep.enabled) as i64)
                .execute(&mut *tx)
                .await?
                .rows_affected()
            } else {
                let q = sqlx::query(sql::UPDATE_OTHER)
                    .bind(&row.id)
                    .bind(&row.chatbot_id);
                bind_settings(q, &row)
                    .bind(row.updated_at)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
            };
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            if ep.is_default {
                insert(&mut tx, &row, sql::DEFAULT_SETTINGS_UPDATE).await?;
            }
            self.commit_enabled(tx, ep.enabled).await
        })
    }

    fn delete_endpoint(&self, chatbot_id: &str, id: &str) -> StoreFut<'_, ()> {
        let (chatbot_id, id) = (chatbot_id.to_string(), id.to_string());
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let n = sqlx::query(sql::DELETE_OTHER)
                .bind(&id)
                .bind(&chatbot_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            for q in [sql::DELETE_ATTEMPTS, sql::DELETE_DELIVERIES] {
                sqlx::query(q).bind(&id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn rotate_endpoint_secret(&self, r: sql::Rotation) -> StoreFut<'_, ()> {
        let sql::Rotation {
            chatbot_id,
            id,
            secret,
            previous_until,
        } = r;
        Box::pin(async move {
            let q = if id == default_endpoint_id(&chatbot_id) {
                sqlx::query(sql::ROTATE_DEFAULT)
                    .bind(&chatbot_id)
                    .bind(previous_until)
                    .bind(&secret)
            } else {
                sqlx::query(sql::ROTATE_OTHER)
                    .bind(&id)
                    .bind(&chatbot_id)
                    .bind(previous_until)
                    .bind(&secret)
            };
            if q.execute(&self.pool).await?.rows_affected() == 0 {
                return Err(StoreError::NotFound);
            }
            Ok(())
        })
    }
}
