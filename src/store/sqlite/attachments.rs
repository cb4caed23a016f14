//! Attachments of asks on SQLite: one row each, bytes in a BLOB.

use rusqlite::{Connection, OptionalExtension, params};

use crate::domain::attachment::Attachment;

pub fn insert(c: &Connection, a: &Attachment) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO attachments (id, chatbot_id, conversation_id, message_id, filename, content_type, data, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        a.id,
        a.chatbot_id,
        a.conversation_id,
        a.message_id,
        a.filename,
        a.content_type,
        a.data,
        a.created_at
    ])?;
    Ok(())
}

pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Attachment>> {
    c.prepare_cached(
        "SELECT id, chatbot_id, conversation_id, message_id, filename, content_type, data, created_at
         FROM attachments WHERE id = ?1",
    )?
    .query_row([id], |r| {
        Ok(Attachment {
            id: r.get(0)?,
            chatbot_id: r.get(1)?,
            conversation_id: r.get(2)?,
            message_id: r.get(3)?,
            filename: r.get(4)?,
            content_type: r.get(5)?,
            data: r.get(6)?,
            created_at: r.get(7)?,
        })
    })
    .optional()
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<()> {
    c.prepare_cached("DELETE FROM attachments WHERE id = ?1")?
        .execute([id])?;
    Ok(())
}
