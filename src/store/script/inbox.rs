//! Clicks, submits and answers applied to a message and its interactions;
//! interactions closed, created, and kept in step with a reply.

use serde_json::Value;

use super::clicks::{self, Cmd, Steps};
use super::{Announce, Effects, Party, Tx};
use crate::domain::error::Rejection;
use crate::domain::inbox::{self, Interaction, NewInteraction};
use crate::domain::interact::{Action, Context};
use crate::domain::model::Message;
use crate::domain::status::InteractionStatus;
use crate::store::{
    Acting, AnswerOutcome, AnswerRequest, Closing, InteractRequest, NewEvent, StoreError,
    StoreResult,
};

/// An action, who takes it, and the event it becomes if accepted.
pub struct Act<'a> {
    pub action: &'a Action,
    pub by: &'a Acting,
    /// A reviewer's answer body, recorded as sent.
    pub answer: Option<&'a Value>,
}

impl<'a> Act<'a> {
    /// A visitor's click or submit, as the widget sent it.
    pub fn visitor(req: &'a InteractRequest) -> Self {
        Self {
            action: &req.action,
            by: &req.by,
            answer: None,
        }
    }
}

/// An accepted action, decided on the rows as loaded: what to write. The
/// one decision of a click, submit or answer, whichever way it is applied
/// ([`clicks::run`], step by step through [`Tx`] or with a PostgreSQL
/// batch's other clicks in one statement per step).
pub struct Plan {
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
/// conversation, as loaded, and leaves the message and the interactions as
/// the action leaves them. No I/O. A refusal leaves them as they were: the
/// domain refuses before its first change (`domain::inbox::decide`).
pub fn plan(
    msg: &mut Message,
    interactions: &mut [Interaction],
    party: &Party,
    act: &Act<'_>,
) -> StoreResult<Plan> {
    let by = act.by;
    let ctx = Context {
        now_ms: by.now_ms,
        interactive_window_ms: by.interactive_window_ms,
        retention_ms: party.retention_ms,
        conversation_created_ms: party.created_at,
        taken_over: party.taken_over,
        chatbot_id: &party.chatbot_id,
        user: &by.user,
        event_id: &by.event_id,
        response_url: &by.response_url,
        allow_comment: false,
        require_one_checked: false,
        answer: act.answer,
    };
    let d = inbox::decide(interactions, msg, act.action, ctx)?;
    let event = NewEvent {
        id: by.event_id.clone(),
        chatbot_id: party.chatbot_id.clone(),
        conversation_id: msg.conversation_id.clone(),
        event_type: d.accepted.event_type,
        payload: d.accepted.payload,
        created_at: by.now_ms,
        trace: by.trace.clone(),
    };
    Ok(Plan {
        changed: d.changed,
        answered: d.answered,
        event,
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
    let kept = tx
        .answer_record(&req.interaction_id, &req.idempotency_key)
        .await?;
    if let inbox::Admit::Repeat(result) = inbox::admit(&i, kept, &req.body_hash, req.by.now_ms)? {
        return Ok((
            AnswerOutcome::Repeated(serde_json::from_str(&result)?),
            None,
        ));
    }
    let msg = tx.message(&i.message_id).await?;
    let action = inbox::action_from_answer(&i.kind, &i.spec, &msg, &req.body)?;
    let act = Act {
        action: &action,
        by: &req.by,
        answer: Some(&req.body),
    };
    let cmd = Cmd {
        message_id: &i.message_id,
        conversation_id: None,
        act,
    };
    let mut fx = clicks::one(&mut Steps::knowing(tx, msg), cmd).await?;
    let Some(answered) = fx.answered.take() else {
        return Err(Rejection::NotPending.into());
    };
    let result = answered.to_json(req.by.now_ms).to_string();
    tx.put_answer_record(req, &result).await?;
    Ok((AnswerOutcome::Answered(Box::new(answered)), Some(fx)))
}

/// Ends a pending interaction as `c` says, turning its blocks off;
/// returns it as it then stands (already answered if an answer won).
pub async fn close<T: Tx>(tx: &mut T, c: &Closing) -> StoreResult<(Interaction, Announce)> {
    let (id, status, now_ms) = (c.id.as_str(), c.status, c.now_ms);
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
    if !inbox::close(&mut i, &mut msg, status, c.reason, now_ms) {
        return Ok((i, announce));
    }
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

#[cfg(test)]
pub(crate) mod tests {
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

    /// A visitor acting at `T0` + 1 s, their event `event_id`.
    pub(crate) fn acting(event_id: &str) -> Acting {
        Acting {
            user: visitor(),
            event_id: EventId::stored(event_id),
            response_url: "https://hooks.test/r/tok".into(),
            now_ms: T0 + 1_000,
            interactive_window_ms: 24 * HOUR,
            trace: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        }
    }

    fn act<'a>(action: &'a Action, by: &'a Acting) -> Act<'a> {
        Act {
            action,
            by,
            answer: None,
        }
    }

    #[test]
    fn an_accepted_click_plans_its_event_for_the_party_and_the_message_it_changed() {
        let (mut msg, yes) = (message(true), click("yes"));
        let mut list = interactions(&msg);
        let p = plan(
            &mut msg,
            &mut list,
            &party(false),
            &act(&yes, &acting("evt_1")),
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
        let b1 = msg.blocks.iter().find(|b| b.block_id() == "b1").unwrap();
        assert!(b1.state().disabled, "the message as the click left it");
        let answered = p.answered.expect("the group's interaction is answered");
        assert_eq!(answered.status, InteractionStatus::Answered);
        assert!(
            list.iter()
                .any(|i| i.id == answered.id && i.status == InteractionStatus::Answered)
        );
    }

    /// What a message and its interactions are, to compare.
    fn state(msg: &Message, list: &[Interaction]) -> String {
        let l: Vec<Value> = list.iter().map(|i| i.to_json(T0)).collect();
        format!("{}{:?}", serde_json::to_string(msg).unwrap(), l)
    }

    #[test]
    fn the_plan_of_the_first_click_refuses_the_second_and_leaves_what_it_left() {
        let mut msg = message(true);
        let (yes, no) = (click("yes"), click("no"));
        let mut list = interactions(&msg);
        plan(
            &mut msg,
            &mut list,
            &party(false),
            &act(&yes, &acting("evt_1")),
        )
        .unwrap();
        let after_first = state(&msg, &list);
        let second = plan(
            &mut msg,
            &mut list,
            &party(false),
            &act(&no, &acting("evt_2")),
        );
        assert!(matches!(second, Err(StoreError::Rejected(_))));
        assert_eq!(state(&msg, &list), after_first, "a refusal changes nothing");
    }

    #[test]
    fn a_refused_action_leaves_the_message_and_interactions_as_they_were() {
        // Refused for each reason a click can be: taken over, a block that
        // is not there, a submit to a button group, a link button's id.
        let missing = Action::Click {
            block_id: "nope".into(),
            action_id: "yes".into(),
            comment: None,
        };
        let wrong_kind = Action::Submit {
            form_id: "b1".into(),
            values: Default::default(),
        };
        for (taken, action) in [
            (true, click("yes")),
            (false, missing),
            (false, wrong_kind),
            (false, click("unknown")),
        ] {
            let mut msg = message(true);
            let mut list = interactions(&msg);
            let before = state(&msg, &list);
            let r = plan(
                &mut msg,
                &mut list,
                &party(taken),
                &act(&action, &acting("evt_1")),
            );
            assert!(r.is_err(), "{action:?} is refused");
            assert_eq!(state(&msg, &list), before, "{action:?} changed nothing");
        }
    }
}
