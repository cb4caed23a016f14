//! Endpoints (§13): read for routing, managed through the API. Writes go
//! through the writer like every other.

use super::*;
use crate::domain::endpoints::stored::COLUMNS;
use crate::domain::endpoints::{Endpoint, StoredEndpoint, default_endpoint_id};
use crate::store::endpoints as sql;
use rusqlite::{ToSql, params_from_iter};

/// The shared statements with SQLite's numbered parameters (`?1`).
fn q(s: &str) -> String {
    s.replace('$', "?")
}

fn endpoint_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEndpoint> {
    Ok(StoredEndpoint {
        id: r.get(0)?,
        chatbot_id: r.get(1)?,
        is_default: r.get(2)?,
        url: r.get(3)?,
        description: r.get(4)?,
        event_types: r.get(5)?,
        filter: r.get(6)?,
        replies: r.get(7)?,
        rate_limit: r.get(8)?,
        headers: r.get(9)?,
        enabled: r.get(10)?,
        disabled_reason: r.get(11)?,
        signing_secret: r.get(12)?,
        previous_secret: r.get(13)?,
        previous_until: r.get(14)?,
        created_at: r.get(15)?,
        updated_at: r.get(16)?,
    })
}

/// An endpoint's settings, `url` to `disabled_reason`, as parameters in
/// the order of [`COLUMNS`](crate::domain::endpoints::stored::COLUMNS).
fn settings(row: &StoredEndpoint) -> [&dyn ToSql; 9] {
    [
        &row.url,
        &row.description,
        &row.event_types,
        &row.filter,
        &row.replies,
        &row.rate_limit,
        &row.headers,
        &row.enabled,
        &row.disabled_reason,
    ]
}

fn insert(c: &Connection, row: &StoredEndpoint, upsert: &str) -> rusqlite::Result<usize> {
    let head: [&dyn ToSql; 3] = [&row.id, &row.chatbot_id, &row.is_default];
    let tail: [&dyn ToSql; 5] = [
        &row.signing_secret,
        &row.previous_secret,
        &row.previous_until,
        &row.created_at,
        &row.updated_at,
    ];
    c.prepare_cached(&format!("{} {upsert}", q(&sql::insert_sql())))?
        .execute(params_from_iter(
            head.into_iter().chain(settings(row)).chain(tail),
        ))
}

impl Endpoints for SqliteStore {
    fn endpoints_of(&self, chatbot_id: &str) -> StoreFut<'_, Vec<Endpoint>> {
        let r = self.read(|c| {
            let bot = c
                .prepare_cached(&format!(
                    "SELECT {CHATBOT_COLS} FROM chatbots WHERE id = ?1"
                ))?
                .query_row([chatbot_id], chatbot_row)
                .optional()?;
            let rows = c
                .prepare_cached(&format!("SELECT {COLUMNS} {}", q(sql::ENDPOINTS_OF)))?
                .query_map([chatbot_id], endpoint_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((bot, rows))
        });
        Box::pin(async move {
            let (bot, rows) = r?;
            sql::assemble(&bot.ok_or(StoreError::NotFound)?, rows)
        })
    }

    fn create_endpoint(&self, ep: Endpoint) -> StoreFut<'_, ()> {
        let row = StoredEndpoint::of(&ep);
        Box::pin(self.write(move |c| {
            insert(c, &row, "")?;
            Ok(())
        }))
    }

    fn update_endpoint(&self, ep: Endpoint) -> StoreFut<'_, ()> {
        let signals = self.signals.clone();
        let row = StoredEndpoint::of(&ep);
        Box::pin(async move {
            if !ep.is_default {
                self.write(move |c| {
                    let ids: [&dyn ToSql; 2] = [&row.id, &row.chatbot_id];
                    let args = ids
                        .into_iter()
                        .chain(settings(&row))
                        .chain([&row.updated_at as &dyn ToSql]);
                    let n = c
                        .prepare_cached(&q(sql::UPDATE_OTHER))?
                        .execute(params_from_iter(args))?;
                    if n == 0 {
                        return Err(StoreError::NotFound);
                    }
                    Ok(())
                })
                .await?;
                if ep.enabled {
                    // Its heads, left out of claims while it was paused.
                    self.claims.lock().deliveries.rescan();
                    signals.events_due();
                }
                return Ok(());
            }
            let (bot_id, url, enabled) = (ep.chatbot_id.clone(), ep.url.clone(), ep.enabled);
            self.write(move |c| {
                let n = c
                    .prepare_cached(
                        "UPDATE chatbots SET webhook_url = ?2, endpoint_disabled = ?3 WHERE id = ?1",
                    )?
                    .execute(params![row.chatbot_id, url, (!enabled) as i64])?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                insert(c, &row, sql::DEFAULT_SETTINGS_UPDATE)?;
                Ok(())
            })
            .await?;
            self.claims.lock().chatbot_changed(&bot_id, !enabled);
            if enabled {
                signals.events_due();
            }
            Ok(())
        })
    }

    fn delete_endpoint(&self, chatbot_id: &str, id: &str) -> StoreFut<'_, ()> {
        let (chatbot_id, id) = (chatbot_id.to_string(), id.to_string());
        Box::pin(self.write(move |c| {
            let n = c
                .prepare_cached(&q(sql::DELETE_OTHER))?
                .execute(params![id, chatbot_id])?;
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            c.prepare_cached(&q(sql::DELETE_ATTEMPTS))?.execute([&id])?;
            c.prepare_cached(&q(sql::DELETE_DELIVERIES))?
                .execute([&id])?;
            Ok(())
        }))
    }

    fn rotate_endpoint_secret(&self, r: sql::Rotation) -> StoreFut<'_, ()> {
        Box::pin(async move {
            let (chatbot_id, id) = (r.chatbot_id.to_string(), r.id.to_string());
            let (secret, previous_until) = (r.secret, r.previous_until);
            let is_default = id == default_endpoint_id(&chatbot_id);
            let bot_id = chatbot_id.clone();
            let disabled = self
                .write(move |c| {
                    let n = if is_default {
                        c.prepare_cached(&q(sql::ROTATE_DEFAULT))?.execute(params![
                            chatbot_id,
                            previous_until,
                            secret
                        ])?
                    } else {
                        c.prepare_cached(&q(sql::ROTATE_OTHER))?.execute(params![
                            id,
                            chatbot_id,
                            previous_until,
                            secret
                        ])?
                    };
                    if n == 0 {
                        return Err(StoreError::NotFound);
                    }
                    let disabled: i64 = c
                        .prepare_cached("SELECT endpoint_disabled FROM chatbots WHERE id = ?1")?
                        .query_row([&chatbot_id], |r| r.get(0))?;
                    Ok(disabled != 0)
                })
                .await?;
            if is_default {
                // Queued deliveries drop the chatbot they carry (its secrets).
                self.claims.lock().chatbot_changed(&bot_id, disabled);
            }
            Ok(())
        })
    }
}
