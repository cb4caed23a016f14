//! Attachments of asks on PostgreSQL: one row each, bytes in a BYTEA.

use sqlx::{PgPool, Row};

use super::backend;
use crate::domain::attachment::Attachment;
use crate::store::{StoreError, StoreResult};

pub async fn insert(pool: &PgPool, a: Attachment) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO attachments (id, chatbot_id, conversation_id, message_id, filename, content_type, data, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&a.id)
    .bind(&a.chatbot_id)
    .bind(&a.conversation_id)
    .bind(&a.message_id)
    .bind(&a.filename)
    .bind(&a.content_type)
    .bind(&a.data)
    .bind(a.created_at)
    .execute(pool)
    .await
    .map_err(backend)?;
    Ok(())
}

pub async fn get(pool: &PgPool, id: &str) -> StoreResult<Attachment> {
    let r = sqlx::query(
        "SELECT id, chatbot_id, conversation_id, message_id, filename, content_type, data, created_at
         FROM attachments WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
    .map_err(backend)?
    .ok_or(StoreError::NotFound)?;
    Ok(Attachment {
        id: r.try_get(0).map_err(backend)?,
        chatbot_id: r.try_get(1).map_err(backend)?,
        conversation_id: r.try_get(2).map_err(backend)?,
        message_id: r.try_get(3).map_err(backend)?,
        filename: r.try_get(4).map_err(backend)?,
        content_type: r.try_get(5).map_err(backend)?,
        data: r.try_get(6).map_err(backend)?,
        created_at: r.try_get(7).map_err(backend)?,
    })
}

pub async fn delete(pool: &PgPool, id: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM attachments WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await
        .map_err(backend)?;
    Ok(())
}
