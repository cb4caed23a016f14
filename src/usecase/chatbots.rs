//! Chatbots as the admin token manages them (§1): create (with its API
//! key, shown once), list, read and change.

use std::time::Duration;

use super::Services;
use super::endpoints::new_signing_secret;
use super::error::AppResult;
use crate::domain::ids::{ChatbotId, hash_secret, new_id, new_secret};
use crate::domain::model::Chatbot;
use crate::domain::origins::AllowedOrigins;
use crate::store::Page;

/// A new chatbot and its API key (only its hash is stored).
pub async fn create(
    st: &Services,
    name: String,
    webhook_url: String,
    retention: Duration,
    allowed_origins: AllowedOrigins,
) -> AppResult<(Chatbot, String)> {
    let api_key = new_secret("sk");
    let bot = Chatbot {
        id: ChatbotId::generate(),
        name,
        webhook_url,
        retention_ms: retention.as_millis() as i64,
        signing_secret: new_signing_secret(),
        previous_secret: None,
        endpoint_disabled: false,
        member_id: new_id("mem"),
        created_at: st.now_ms(),
        allowed_origins,
    };
    st.store
        .create_chatbot(bot.clone(), hash_secret(&api_key))
        .await?;
    Ok((bot, api_key))
}

/// A page of the chatbots, newest first.
pub async fn list(st: &Services, limit: usize, cursor: Option<String>) -> AppResult<Page<Chatbot>> {
    Ok(st.store.list_chatbots(limit, cursor).await?)
}

/// One chatbot.
pub async fn get(st: &Services, id: &ChatbotId) -> AppResult<Chatbot> {
    Ok(st.store.get_chatbot(id).await?)
}

/// What a change sets; `None` keeps what the chatbot has.
#[derive(Debug, Default)]
pub struct ChatbotChange {
    pub name: Option<String>,
    /// A new `webhook_url` also ends an endpoint disabled by `410 Gone`.
    pub webhook_url: Option<String>,
    pub endpoint_disabled: Option<bool>,
    pub retention: Option<Duration>,
    pub allowed_origins: Option<AllowedOrigins>,
}

/// Applies `change` to `bot` and stores it.
pub async fn update(st: &Services, mut bot: Chatbot, change: ChatbotChange) -> AppResult<Chatbot> {
    if let Some(n) = change.name {
        bot.name = n;
    }
    if let Some(u) = change.webhook_url {
        bot.webhook_url = u;
        bot.endpoint_disabled = false;
    }
    if let Some(d) = change.endpoint_disabled {
        bot.endpoint_disabled = d;
    }
    if let Some(r) = change.retention {
        bot.retention_ms = r.as_millis() as i64;
    }
    if let Some(o) = change.allowed_origins {
        bot.allowed_origins = o;
    }
    st.store.update_chatbot(bot.clone()).await?;
    Ok(bot)
}
