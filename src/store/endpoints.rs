//! The chatbots' endpoints (§13) as the store keeps them. The default
//! endpoint lives in its chatbot's row (url, secrets, 410 state) and, once
//! one of its other settings is changed, a settings row in `endpoints`
//! (`is_default = 1`); the others are rows of their own.

use super::{StoreError, StoreResult};
use crate::domain::endpoints::stored::COLUMNS;
use crate::domain::endpoints::{Endpoint, StoredEndpoint};

store_role! {
    /// Endpoints read for routing and delivery, and managed through the API.
    pub trait Endpoints {
        /// Every endpoint of the chatbot: the default first, then the others
        /// by creation. `NotFound` when there is no such chatbot.
        read fn endpoints_of(&self, chatbot_id: &str) -> Vec<Endpoint>;
        /// One endpoint of the chatbot (its default's id included); `NotFound`
        /// for an unknown id or another chatbot's.
        read fn get_endpoint(&self, chatbot_id: &str, id: &str) -> Endpoint = {
            let id = id.to_string();
            let all = self.endpoints_of(chatbot_id);
            Box::pin(async move {
                all.await?
                    .into_iter()
                    .find(|e| e.id == id)
                    .ok_or(StoreError::NotFound)
            })
        };
        /// Stores a new endpoint (never the default).
        write fn create_endpoint(&self, ep: Endpoint) -> ();
        /// Saves an endpoint's settings, url and state (not its secrets: see
        /// [`Self::rotate_endpoint_secret`]). For the default endpoint, its
        /// url and enabled state go to the chatbot's row and the rest to its
        /// settings row, in one transaction.
        write fn update_endpoint(&self, ep: Endpoint) -> ();
        /// Deletes an endpoint other than the default with its deliveries that
        /// have not succeeded and their attempts, in one transaction.
        write fn delete_endpoint(&self, chatbot_id: &str, id: &str) -> ();
        /// Makes `secret` the endpoint's signing secret; the one it replaces
        /// keeps signing until `previous_until`. The default endpoint's secret
        /// is its chatbot's.
        write fn rotate_endpoint_secret(&self, r: Rotation) -> ();
    }
}

/// The endpoints of a chatbot from its row and its `endpoints` rows (read
/// in the order: the default's settings row first, then by creation).
pub fn assemble(
    bot: &crate::domain::model::Chatbot,
    rows: Vec<StoredEndpoint>,
) -> StoreResult<Vec<Endpoint>> {
    let mut settings = None;
    let mut others = Vec::with_capacity(rows.len());
    for row in rows {
        let ep = row.into_endpoint()?;
        if ep.is_default {
            settings = Some(ep);
        } else {
            others.push(ep);
        }
    }
    let mut out = Vec::with_capacity(others.len() + 1);
    out.push(Endpoint::default_of(bot, settings.as_ref()));
    out.extend(others);
    Ok(out)
}

/// A new signing secret for endpoint `id` of a chatbot; the one it
/// replaces signs too until `previous_until`.
#[derive(Debug, Clone)]
pub struct Rotation {
    pub chatbot_id: crate::domain::ids::ChatbotId,
    pub id: crate::domain::ids::EndpointId,
    pub secret: String,
    pub previous_until: i64,
}

/// `endpoints` of one chatbot, the default's settings row first.
pub const ENDPOINTS_OF: &str =
    "FROM endpoints WHERE chatbot_id = $1 ORDER BY is_default DESC, created_at, id";

/// The settings a default endpoint's settings row takes on an update.
pub const DEFAULT_SETTINGS_UPDATE: &str = "ON CONFLICT (id) DO UPDATE SET description = excluded.description, event_types = excluded.event_types, filter = excluded.filter, replies = excluded.replies, rate_limit = excluded.rate_limit, headers = excluded.headers, enabled = excluded.enabled, disabled_reason = excluded.disabled_reason, updated_at = excluded.updated_at";

/// What an update of an endpoint other than the default sets.
pub const UPDATE_OTHER: &str = "UPDATE endpoints SET url = $3, description = $4, event_types = $5, filter = $6, replies = $7, rate_limit = $8, headers = $9, enabled = $10, disabled_reason = $11, updated_at = $12 WHERE id = $1 AND chatbot_id = $2 AND is_default = 0";

/// The attempts and the deliveries (not succeeded) of an endpoint being
/// deleted.
pub const DELETE_ATTEMPTS: &str = "DELETE FROM delivery_attempts WHERE delivery_seq IN (SELECT seq FROM deliveries WHERE endpoint_id = $1 AND status <> 'succeeded')";
pub const DELETE_DELIVERIES: &str =
    "DELETE FROM deliveries WHERE endpoint_id = $1 AND status <> 'succeeded'";
pub const DELETE_OTHER: &str =
    "DELETE FROM endpoints WHERE id = $1 AND chatbot_id = $2 AND is_default = 0";

/// A rotation: the current secret becomes the previous one.
pub const ROTATE_DEFAULT: &str = "UPDATE chatbots SET previous_secret = signing_secret, previous_until = $2, signing_secret = $3 WHERE id = $1";
pub const ROTATE_OTHER: &str = "UPDATE endpoints SET previous_secret = signing_secret, previous_until = $3, signing_secret = $4 WHERE id = $1 AND chatbot_id = $2 AND is_default = 0";

/// Inserts a row of [`COLUMNS`] (17 values).
pub fn insert_sql() -> String {
    let values: Vec<String> = (1..=17).map(|i| format!("${i}")).collect();
    format!(
        "INSERT INTO endpoints ({COLUMNS}) VALUES ({})",
        values.join(", ")
    )
}
