//! Attachments of asks on PostgreSQL: one row each, bytes in a BYTEA.

use sqlx::{PgPool, Row};

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
    .await?;
    Ok(())
}

pub async fn get(pool: &PgPool, id: &str) -> StoreResult<Attachment> {
    let r = sqlx::query(
        "SELECT id, chatbot_id, conversation_id, message_id, filename, content_type, data, created_at
         FROM attachments WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?
    .ok_or(StoreError::NotFound)?;
    Ok(Attachment {
        id: r.try_get(0)?,
        chatbot_id: r.try_get(1)?,
        conversation_id: r.try_get(2)?,
        message_id: r.try_get(3)?,
        filename: r.try_get(4)?,
        content_type: r.try_get(5)?,
        data: r.try_get(6)?,
        created_at: r.try_get(7)?,
    })
}

pub async fn delete(pool: &PgPool, id: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM attachments WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}
