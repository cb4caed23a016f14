//! What the writer thread keeps of what clicks read, so that a click needs
//! no query for it: messages as parsed (every change of a message is
//! written there and the cache follows it), conversations with their
//! chatbot, and messages with no pending interaction left. Only the writer
//! thread has these; a rolled-back job or batch, or a change by another
//! connection, empties them all.

use std::cell::RefCell;
use std::num::NonZeroUsize;
use std::sync::Arc;

use crate::domain::ids::EndpointId;
use crate::domain::model::Message;
use crate::store::fanout::EndpointRoute;

const CAPACITY: NonZeroUsize = NonZeroUsize::new(4096).unwrap();

/// A message as parsed, and as JSON once some answer needed it.
type Entry = (Message, Option<Arc<str>>);

thread_local! {
    static CACHE: RefCell<Option<lru::LruCache<String, Entry>>> = const { RefCell::new(None) };
}

/// What the open batch routed (§13): whether it created deliveries, and
/// those that are heads of their (endpoint, conversation) pair.
#[derive(Default)]
pub struct Routed {
    pub any: bool,
    pub heads: Vec<(EndpointId, i64)>,
}

thread_local! {
    /// The open batch's deliveries: the fan-out is woken, and their heads
    /// listed for its claims, once the batch is on disk.
    static ROUTED: RefCell<Routed> = RefCell::new(Routed::default());
}

/// A job of the open batch created deliveries.
pub fn routed() {
    ROUTED.with(|r| r.borrow_mut().any = true);
}

/// A job of the open batch created the head delivery `seq` of its pair.
pub fn routed_head(endpoint: EndpointId, seq: i64) {
    ROUTED.with(|r| {
        let mut r = r.borrow_mut();
        r.any = true;
        r.heads.push((endpoint, seq));
    });
}

/// What the batch just ended routed; starts the next clean.
pub fn take_routed() -> Routed {
    ROUTED.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// Gives the calling thread (the writer) its caches.
pub fn enable() {
    CACHE.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
    CONVERSATIONS.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
    SETTLED.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
    ACTIVE.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
    ROUTES.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
    PAIRS.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
}

pub fn message(id: &str) -> Option<Message> {
    CACHE.with(|c| Some(c.borrow_mut().as_mut()?.get(id)?.0.clone()))
}

/// `json`, when known, is `m` serialized (what a click answers with).
pub fn put_message(m: &Message, json: Option<Arc<str>>) {
    CACHE.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.put(m.id.to_string(), (m.clone(), json));
        }
    });
}

/// Message `m` as JSON: as cached with it, or serialized once and kept.
/// `m` must be the cached message unchanged.
pub fn message_json(m: &Message) -> Option<Arc<str>> {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let (_, json) = c.as_mut()?.get_mut(m.id.as_str())?;
        if json.is_none() {
            *json = serde_json::to_string(m).ok().map(Arc::from);
        }
        debug_assert_eq!(
            json.as_deref(),
            serde_json::to_string(m).ok().as_deref(),
            "the cached JSON is the message's"
        );
        json.clone()
    })
}

pub fn forget_message(id: &str) {
    CACHE.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.pop(id);
        }
    });
}

/// After a rollback, or a change by another connection: what the
/// caches hold may not be what the file holds.
pub fn clear() {
    CACHE.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.clear();
        }
    });
    clear_conversations();
    SETTLED.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.clear();
        }
    });
}

thread_local! {
    static SETTLED: RefCell<Option<lru::LruCache<String, ()>>> = const { RefCell::new(None) };
}

/// Whether message `id` is known to have no pending or asked
/// interaction (most clicks after the first on a button that stays on).
pub fn settled(id: &str) -> bool {
    SETTLED.with(|c| c.borrow_mut().as_mut().is_some_and(|s| s.get(id).is_some()))
}

pub fn settle(id: &str) {
    SETTLED.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.put(id.to_string(), ());
        }
    });
}

/// An interaction of message `id` was inserted or changed.
pub fn unsettle(id: &str) {
    SETTLED.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.pop(id);
        }
    });
}

/// A conversation as a click needs it: its chatbot (whole, handed to
/// the dispatcher with the click's event), when it started, who took it
/// over.
#[derive(Clone)]
pub struct Conversation {
    pub bot: std::sync::Arc<crate::domain::model::Chatbot>,
    pub created_at: i64,
    pub taken_over_by: Option<String>,
}

thread_local! {
    static CONVERSATIONS: RefCell<Option<lru::LruCache<String, Conversation>>> = const { RefCell::new(None) };
}

pub fn conversation(id: &str) -> Option<Conversation> {
    CONVERSATIONS.with(|c| c.borrow_mut().as_mut()?.get(id).cloned())
}

pub fn put_conversation(id: &str, v: &Conversation) {
    CONVERSATIONS.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.put(id.to_string(), v.clone());
        }
    });
}

/// Before any write that may change a chatbot or a conversation,
/// including the state of its events.
pub fn clear_conversations() {
    CONVERSATIONS.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.clear();
        }
    });
    ACTIVE.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.clear();
        }
    });
    ROUTES.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.clear();
        }
    });
    forget_pairs();
}

thread_local! {
    static ACTIVE: RefCell<Option<lru::LruCache<String, u32>>> = const { RefCell::new(None) };
}

/// How many events of conversation `id` are undelivered (pending or
/// failed), when the writer knows it exactly: learned when a query
/// found none, then followed through every event it inserts and every
/// attempt that ends one. Any other change of an event's state goes
/// through a job that empties this first.
pub fn active(id: &str) -> Option<u32> {
    ACTIVE.with(|c| c.borrow_mut().as_mut()?.get(id).copied())
}

pub fn set_active(id: &str, n: u32) {
    ACTIVE.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.put(id.to_string(), n);
        }
    });
}

pub fn forget_active(id: &str) {
    ACTIVE.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.pop(id);
        }
    });
}

thread_local! {
    static ROUTES: RefCell<Option<lru::LruCache<String, Arc<[EndpointRoute]>>>> = const { RefCell::new(None) };
    static PAIRS: RefCell<Option<lru::LruCache<(EndpointId, String), u32>>> = const { RefCell::new(None) };
}

/// A chatbot's endpoints other than the default, as routing reads them
/// (every change of an endpoint goes through a job that empties this).
pub fn routes(chatbot_id: &str) -> Option<Arc<[EndpointRoute]>> {
    ROUTES.with(|c| c.borrow_mut().as_mut()?.get(chatbot_id).cloned())
}

pub fn put_routes(chatbot_id: &str, routes: Arc<[EndpointRoute]>) {
    ROUTES.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.put(chatbot_id.to_string(), routes);
        }
    });
}

/// How many deliveries of an (endpoint, conversation) pair are still to
/// make (pending or failed), when the writer knows it exactly: learned
/// when a query found none, then followed through every delivery it
/// inserts and every attempt that ends one. Any other change of a
/// delivery's state goes through a job that empties this first.
pub fn pair_pending(endpoint: &EndpointId, conversation: &str) -> Option<u32> {
    PAIRS.with(|c| {
        c.borrow_mut()
            .as_mut()?
            .get(&(endpoint.clone(), conversation.to_string()))
            .copied()
    })
}

/// `None`: no longer known.
pub fn set_pair_pending(endpoint: &EndpointId, conversation: &str, n: Option<u32>) {
    PAIRS.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            let key = (endpoint.clone(), conversation.to_string());
            match n {
                Some(n) => cache.put(key, n),
                None => cache.pop(&key),
            };
        }
    });
}

/// After a change of deliveries' states the counts do not follow.
pub fn forget_pairs() {
    PAIRS.with(|c| {
        if let Some(cache) = c.borrow_mut().as_mut() {
            cache.clear();
        }
    });
}
