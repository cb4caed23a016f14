//! Endpoints (§13) managed with a chatbot's key: a body checked by the
//! domain, its URL checked against private addresses, then stored. The
//! default endpoint is the chatbot's `webhook_url`: the same rules, kept in
//! the chatbot's row.

use serde_json::Value;

use super::Services;
use super::error::{AppError, AppResult};
use crate::delivery::ssrf;
use crate::domain::endpoints::{Endpoint, default_endpoint_id, parse_change};
use crate::domain::error::FieldError;
use crate::domain::ids::{ChatbotId, EndpointId, random_bytes};

/// How long a replaced signing secret keeps signing (§1).
pub const SECRET_GRACE_MS: i64 = 24 * 3600 * 1000;

/// A new signing secret: `whsec_` and the base64 of 32 random bytes
/// (Standard Webhooks).
pub fn new_signing_secret() -> String {
    use base64::Engine;
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(random_bytes::<32>())
    )
}

/// Why `url` may not receive webhooks, as the problem at `pointer`: not a
/// URL, or a private address without `--allow-private-webhooks`. A host
/// that does not resolve now may resolve later: it is checked again at
/// every send, so only invalid and private URLs are refused here.
pub async fn url_refusal(st: &Services, url: &str, pointer: &str) -> Option<FieldError> {
    let (code, message) = match ssrf::check(url, st.settings.allow_private_webhooks).await {
        Ok(_) | Err(ssrf::Refusal::Unresolvable(_)) => return None,
        Err(ssrf::Refusal::Private(ip)) => (
            "private_address",
            format!(
                "{ip} is not a public address; for a local receiver start the server with --allow-private-webhooks (BLOCKHOOK_ALLOW_PRIVATE_WEBHOOKS=1)"
            ),
        ),
        Err(ssrf::Refusal::Invalid(m)) => ("invalid_url", m),
    };
    Some(FieldError::new(pointer, code, message))
}

/// A body's change, every problem of it in one 422 (the URL's included).
async fn checked(
    st: &Services,
    body: &Value,
    creating: bool,
) -> AppResult<crate::domain::endpoints::EndpointChange> {
    let parsed = parse_change(body, creating);
    let mut errors = match &parsed {
        Ok(_) => Vec::new(),
        Err(e) => e.clone(),
    };
    let url = body.get("url").and_then(Value::as_str);
    if let Some(url) = url.filter(|_| !errors.iter().any(|e| e.field == "/url"))
        && let Some(refusal) = url_refusal(st, url, "/url").await
    {
        errors.push(refusal);
    }
    match parsed {
        Ok(change) if errors.is_empty() => Ok(change),
        _ => Err(AppError::invalid(errors)),
    }
}

/// `POST /api/v1/endpoints`: a new endpoint of the chatbot, with its own
/// secret.
pub async fn create(st: &Services, chatbot_id: &ChatbotId, body: &Value) -> AppResult<Endpoint> {
    let change = checked(st, body, true).await?;
    let ep = Endpoint::new(
        EndpointId::generate(),
        chatbot_id,
        change,
        new_signing_secret(),
        st.now_ms(),
    );
    st.store.create_endpoint(ep.clone()).await?;
    Ok(ep)
}

/// `PATCH /api/v1/endpoints/{id}`: the default endpoint's `url` is its
/// chatbot's `webhook_url`.
pub async fn update(
    st: &Services,
    chatbot_id: &ChatbotId,
    id: &EndpointId,
    body: &Value,
) -> AppResult<Endpoint> {
    let mut ep = st.store.get_endpoint(chatbot_id, id).await?;
    let change = checked(st, body, false).await?;
    ep.apply(change, st.now_ms());
    st.store.update_endpoint(ep.clone()).await?;
    Ok(ep)
}

/// The chatbot's endpoints, the default first.
pub async fn list(st: &Services, chatbot_id: &str) -> AppResult<Vec<Endpoint>> {
    Ok(st.store.endpoints_of(chatbot_id).await?)
}

/// One endpoint of the chatbot (`NotFound` for another chatbot's).
pub async fn get(st: &Services, chatbot_id: &ChatbotId, id: &EndpointId) -> AppResult<Endpoint> {
    Ok(st.store.get_endpoint(chatbot_id, id).await?)
}

/// `DELETE /api/v1/endpoints/{id}`: never the default (409).
pub async fn delete(st: &Services, chatbot_id: &ChatbotId, id: &EndpointId) -> AppResult<()> {
    if *id == default_endpoint_id(chatbot_id) {
        return Err(AppError::DefaultEndpoint);
    }
    st.store.delete_endpoint(chatbot_id, id).await?;
    Ok(())
}

/// A new signing secret for an endpoint (the default's is its chatbot's);
/// the one it replaces signs too for 24 h.
pub async fn rotate(st: &Services, chatbot_id: &ChatbotId, id: &EndpointId) -> AppResult<String> {
    let secret = new_signing_secret();
    let until = st.now_ms() + SECRET_GRACE_MS;
    let r = crate::store::endpoints::Rotation {
        chatbot_id: chatbot_id.clone(),
        id: id.clone(),
        secret: secret.clone(),
        previous_until: until,
    };
    st.store.rotate_endpoint_secret(r).await?;
    Ok(secret)
}
