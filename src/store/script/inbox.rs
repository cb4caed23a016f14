//! Clicks, submits and answers applied to a message and its interactions;
//! interactions closed, created, and kept in step with a reply.

use serde_json::Value;

use super::{Announce, Effects, Party, Tx};
use crate::domain::error::Rejection;
use crate::domain::inbox::{self, Interaction, NewInteraction};
use crate::domain::interact::{Action, Context};
use crate::domain::model::{Message, Person};
use crate::domain::status::InteractionStatus;
use crate::store::{
    AnswerOutcome, AnswerRequest, InteractRequest, Interacted, NewEvent, StoreError, StoreResult,
};

/// Who acts, and the event an accepted action becomes.
pub struct Act<'a> {
    pub action: &'a Action,
    pub user: &'a Person,
    pub event_id: &'a crate::domain::ids::EventId,
    pub response_url: &'a str,
    pub now_ms: i64,
    pub interactive_window_ms: i64,
    /// A reviewer's answer body, recorded as sent.
    pub answer: Option<&'a Value>,
    pub trace: Option<&'a str>,
}

impl<'a> Act<'a> {
    /// A visitor's click or submit, as the widget sent it.
    pub fn visitor(req: &'a InteractRequest) -> Self {
        Self {
            action: &req.action,
            user: &req.user,
            event_id: &req.event_id,
            response_url: &req.response_url,
            now_ms: req.now_ms,
            interactive_window_ms: req.interactive_window_ms,
            answer: None,
            trace: req.trace.as_deref(),
        }
    }
}

/// A visitor's click or submit on a message of their conversation.
pub async fn interact<T: Tx>(tx: &mut T, req: &InteractRequest) -> StoreResult<Effects> {
    let msg = tx.message(&req.message_id).await?;
    if msg.conversation_id != req.conversation_id {
        return Err(StoreError::NotFound);
    }
    apply(tx, msg, Act::visitor(req)).await
}

/// An accepted action, decided on the rows as loaded: what to write. The
/// one decision of a click, submit or answer, whichever way it is applied
/// (step by step through [`Tx`] here, or with a PostgreSQL batch's other
/// clicks in one statement per step).
pub struct Plan {
    /// The message as the action leaves it.
    pub message: Message,
    /// Its interactions as the action leaves them.
    pub interactions: Vec<Interaction>,
    /// Whether the message changed (its blocks turned off): it is saved,
    /// with a `message.updated` stream entry.
    pub changed: bool,
    /// The interaction the action answered.
    pub answered: Option<Interaction>,
    /// The event the action becomes.
    pub event: NewEvent,
}

/// Decides an action on a message, its interactions (pending and asked
/// ones, or all of them when the action's block is gone) and its
/// conversation, as loaded. No I/O: a refusal writes nothing.
pub fn plan(
    mut msg: Message,
    mut interactions: Vec<Interaction>,
    party: &Party,
    act: &Act<'_>,
) -> StoreResult<Plan> {
    let ctx = Context {
        now_ms: act.now_ms,
        interactive_window_ms: act.interactive_window_ms,
        retention_ms: party.retention_ms,
        conversation_created_ms: party.created_at,
        taken_over: party.taken_over,
        chatbot_id: &party.chatbot_id,
        user: act.user,
        event_id: act.event_id,
        response_url: act.response_url,
        allow_comment: false,
        require_one_checked: false,
        answer: act.answer,
    };
    let d = inbox::decide(&mut interactions, &mut msg, act.action, ctx)?;
    let event = NewEvent {
        id: act.event_id.clone(),
        chatbot_id: party.chatbot_id.clone(),
        conversation_id: msg.conversation_id.clone(),
        event_type: d.accepted.event_type,
        payload: d.accepted.payload,
        created_at: act.now_ms,
        trace: act.trace.map(str::to_string),
    };
    Ok(Plan {
        message: msg,
        interactions,
        changed: d.changed,
        answered: d.answered,
        event,
    })
}

/// Applies an action to a loaded message: block state, interaction, event,
/// stream entry — or nothing. Every rejection comes before the first write.
pub async fn apply<T: Tx>(tx: &mut T, msg: Message, act: Act<'_>) -> StoreResult<Effects> {
    let party = tx.party(&msg.conversation_id).await?;
    let interactions = tx.interactions_for(&msg, act.action).await?;
    let p = plan(msg, interactions, &party, &act)?;
    let mut announce = Announce::default();
    if let Some(i) = &p.answered {
        tx.save_interaction(i).await?;
        announce.api(&party.chatbot_id, i, "interaction.answered", act.now_ms);
    }
    let mut hot = tx.insert_event(p.event).await?;
    let msg = p.message;
    if p.changed {
        let doc = tx.save_message(&msg).await?;
        let entry = tx
            .append_stream(&msg.conversation_id, "message.updated", doc)
            .await?;
        announce.stream.push(entry);
    }
    if let Some(h) = hot.as_mut() {
        h.bot = party.bot;
    }
    let typing = msg.typing_on_interaction;
    let json = tx.message_json(&msg);
    Ok(Effects {
        out: Interacted {
            message: msg,
            typing,
            json,
        },
        announce,
        answered: p.answered,
        hot,
    })
}

/// A reviewer's answer (`POST /api/v1/interactions/{id}/responses`), with
/// the same effects as the visitor's click or submit.
pub async fn answer<T: Tx>(
    tx: &mut T,
    req: &AnswerRequest,
) -> StoreResult<(AnswerOutcome, Option<Effects>)> {
    let i = tx.interaction(&req.interaction_id).await?;
    if i.chatbot_id != req.chatbot_id {
        return Err(StoreError::NotFound);
    }
    let prior = tx
        .answer_record(&req.interaction_id, &req.idempotency_key)
        .await?;
    if let Some((hash, result)) = prior {
        if hash != req.body_hash {
            return Err(Rejection::IdempotencyConflict.into());
        }
        return Ok((
            AnswerOutcome::Repeated(serde_json::from_str(&result)?),
            None,
        ));
    }
    if i.status_at(req.now_ms) != InteractionStatus::Pending {
        return Err(Rejection::NotPending.into());
    }
    let msg = tx.message(&i.message_id).await?;
    let action = inbox::action_from_answer(&i.kind, &i.spec, &msg, &req.body)?;
    let act = Act {
        action: &action,
        user: &req.user,
        event_id: &req.event_id,
        response_url: &req.response_url,
        now_ms: req.now_ms,
        interactive_window_ms: req.interactive_window_ms,
        answer: Some(&req.body),
        trace: req.trace.as_deref(),
    };
    let mut fx = apply(tx, msg, act).await?;
    let Some(answered) = fx.answered.take() else {
        return Err(Rejection::NotPending.into());
    };
    let result = answered.to_json(req.now_ms).to_string();
    tx.put_answer_record(req, &result).await?;
    Ok((AnswerOutcome::Answered(Box::new(answered)), Some(fx)))
}

/// Ends a pending interaction with `status`, turning its blocks off;
/// returns it as it then stands (already answered if an answer won).
pub async fn close<T: Tx>(
    tx: &mut T,
    id: &str,
    status: InteractionStatus,
    reason: &str,
    now_ms: i64,
) -> StoreResult<(Interaction, Announce)> {
    let found = tx.interaction(id).await?;
    if found.status != InteractionStatus::Pending {
        return Ok((found, Announce::default()));
    }
    let mut msg = tx.message(&found.message_id).await?;
    let mut i = tx
        .interactions_of(&msg.id)
        .await?
        .into_iter()
        .find(|x| x.id == id)
        .ok_or(StoreError::NotFound)?;
    let mut announce = Announce::default();
    if i.status != InteractionStatus::Pending {
        return Ok((i, announce));
    }
    inbox::close(&mut i, &mut msg, status, reason, now_ms);
    tx.save_interaction(&i).await?;
    let doc = tx.save_message(&msg).await?;
    let entry = tx
        .append_stream(&msg.conversation_id, "message.updated", doc)
        .await?;
    announce.stream.push(entry);
    let kind = if status == InteractionStatus::Expired {
        "interaction.expired"
    } else {
        "interaction.cancelled"
    };
    announce.api(&i.chatbot_id.clone(), &i, kind, now_ms);
    Ok((i, announce))
}

/// Records the interactions of a new message, announced as created.
pub async fn create<T: Tx>(
    tx: &mut T,
    interactions: &[NewInteraction],
    now_ms: i64,
    announce: &mut Announce,
) -> StoreResult<()> {
    for n in interactions {
        tx.insert_interaction(n, now_ms).await?;
        let stored = tx.interaction(&n.id).await?;
        announce.api(&n.chatbot_id, &stored, "interaction.created", now_ms);
    }
    Ok(())
}

/// Keeps the inbox in step with a reply: a replaced message's removed
/// blocks close, its new blocks (or a new message's) become interactions, a
/// deleted message's pending interactions are cancelled.
pub async fn after_reply<T: Tx>(
    tx: &mut T,
    msg: &Message,
    deleted: bool,
    window_ms: i64,
    now_ms: i64,
) -> StoreResult<Announce> {
    let chatbot_id = tx.party(&msg.conversation_id).await?.chatbot_id;
    let existing = tx.interactions_of(&msg.id).await?;
    let (changed, fresh) =
        inbox::after_reply(existing, msg, deleted, &chatbot_id, window_ms, now_ms);
    let mut announce = Announce::default();
    for i in changed {
        tx.save_interaction(&i).await?;
        if i.status == InteractionStatus::Cancelled && i.updated_at == now_ms {
            announce.api(&chatbot_id, &i, "interaction.cancelled", now_ms);
        }
    }
    create(tx, &fresh, now_ms, &mut announce).await?;
    Ok(announce)
}

/// A takeover closes every pending interaction of the conversation.
pub(super) async fn cancel_pending<T: Tx>(
    tx: &mut T,
    conversation_id: &str,
    now_ms: i64,
) -> StoreResult<Announce> {
    let mut announce = Announce::default();
    for id in tx.pending_interactions(conversation_id).await? {
        let (_, a) = close(tx, &id, InteractionStatus::Cancelled, "takeover", now_ms).await?;
        announce.extend(a);
    }
    Ok(announce)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::EventId;
    use crate::domain::inbox::tests::{HOUR, T0, click, interactions, message, visitor};

    fn party(taken_over: bool) -> Party {
        Party {
            chatbot_id: crate::domain::ids::ChatbotId::stored("bot_1"),
            retention_ms: 7 * 24 * HOUR,
            created_at: T0,
            taken_over,
            bot: None,
        }
    }

    fn act<'a>(
        action: &'a Action,
        user: &'a Person,
        event_id: &'a crate::domain::ids::EventId,
    ) -> Act<'a> {
        Act {
            action,
            user,
            event_id,
            response_url: "https://hooks.test/r/tok",
            now_ms: T0 + 1_000,
            interactive_window_ms: 24 * HOUR,
            answer: None,
            trace: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        }
    }

    #[test]
    fn an_accepted_click_plans_its_event_for_the_party_and_the_message_it_changed() {
        let (msg, user, yes) = (message(true), visitor(), click("yes"));
        let list = interactions(&msg);
        let p = plan(
            msg,
            list,
            &party(false),
            &act(&yes, &user, &EventId::stored("evt_1")),
        )
        .unwrap();
        assert_eq!(p.event.id, "evt_1");
        assert_eq!(p.event.chatbot_id, "bot_1");
        assert_eq!(p.event.conversation_id, "conv_1");
        assert_eq!(p.event.event_type, "interaction.button_clicked");
        assert_eq!(p.event.created_at, T0 + 1_000);
        assert!(p.event.trace.is_some());
        let body: Value = serde_json::from_slice(&p.event.payload).unwrap();
        assert_eq!(body["action_id"], "yes");
        assert!(p.changed, "a disable_on_click group turns off");
        let answered = p.answered.expect("the group's interaction is answered");
        assert_eq!(answered.status, InteractionStatus::Answered);
        assert!(
            p.interactions
                .iter()
                .any(|i| i.id == answered.id && i.status == InteractionStatus::Answered)
        );
    }

    #[test]
    fn the_plan_of_the_first_click_refuses_the_second_on_what_it_left() {
        let (msg, user) = (message(true), visitor());
        let (yes, no) = (click("yes"), click("no"));
        let list = interactions(&msg);
        let first = plan(
            msg,
            list,
            &party(false),
            &act(&yes, &user, &EventId::stored("evt_1")),
        )
        .unwrap();
        let second = plan(
            first.message,
            first.interactions,
            &party(false),
            &act(&no, &user, &EventId::stored("evt_2")),
        );
        assert!(matches!(second, Err(StoreError::Rejected(_))));
    }

    #[test]
    fn a_taken_over_conversation_plans_nothing() {
        let (msg, user, yes) = (message(true), visitor(), click("yes"));
        let list = interactions(&msg);
        let r = plan(
            msg,
            list,
            &party(true),
            &act(&yes, &user, &EventId::stored("evt_1")),
        );
        assert!(matches!(r, Err(StoreError::Rejected(_))));
    }
}
