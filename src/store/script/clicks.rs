//! The one path of a click, a submit or a reviewer's answer, whatever the
//! store and however many are applied together: load the messages (with
//! their conversations and interactions) under the store's locks, decide
//! each action in arrival order on the rows as the ones before it left
//! them, and apply the accepted ones in the same transaction.
//!
//! A store supplies only the load and the apply ([`Clicks`]): step by step
//! through its [`Tx`] ([`Steps`]: a lone click on either store, SQLite's
//! writer, a reviewer's answer), or PostgreSQL's click batch, one statement
//! for the load and one for the apply of N clicks. Everything between — the
//! checks, the decision, what is announced — is written here once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::inbox::{Act, plan};
use super::{Announce, Effects, Party, Tx};
use crate::domain::inbox::{self as domain, Interaction};
use crate::domain::model::{Chatbot, Message};
use crate::store::StreamEvent;
use crate::store::{Claimed, InteractRequest, Interacted, NewEvent, StoreError, StoreResult};

/// One action on one message.
pub struct Cmd<'a> {
    pub message_id: &'a str,
    /// The conversation the action names, when it names one: a message of
    /// another conversation is not found.
    pub conversation_id: Option<&'a str>,
    pub act: Act<'a>,
}

impl<'a> Cmd<'a> {
    /// A visitor's click or submit, as the widget sent it.
    pub fn visitor(req: &'a InteractRequest) -> Self {
        Self {
            message_id: &req.message_id,
            conversation_id: Some(&req.conversation_id),
            act: Act::visitor(req),
        }
    }
}

/// What a set of actions reads under its locks.
#[derive(Default)]
pub struct Loaded {
    /// The live messages, by id (until their last action takes them).
    pub messages: HashMap<String, Message>,
    /// Their conversations, by id.
    pub parties: HashMap<String, Party>,
    /// The interactions an action may concern, by message id: the pending
    /// and asked ones.
    pub interactions: HashMap<String, Vec<Interaction>>,
    /// The messages whose closed interactions were read too. An action
    /// whose block is gone from its message needs them (it is refused as
    /// `replaced` or for the interaction that closed it).
    pub whole: HashSet<String>,
}

/// An accepted action, its writes still to do.
pub struct Decided {
    /// The action's place in the set.
    pub cmd: usize,
    /// The message as the action left it.
    pub message: Message,
    /// Whether the action changed it (its blocks turned off).
    pub changed: bool,
    /// The interaction the action answered.
    pub answered: Option<Interaction>,
    /// The conversation's chatbot, when the store read it whole.
    pub bot: Option<Arc<Chatbot>>,
    pub now_ms: i64,
}

/// What a store wrote for one accepted action.
#[derive(Default)]
pub struct Applied {
    /// Its `message.updated` entry, when it changed its message.
    pub stream: Option<StreamEvent>,
    /// Its event, to hand out at once when it heads its conversation.
    pub hot: Option<Claimed>,
    /// The message as JSON, when the store keeps it.
    pub json: Option<Arc<str>>,
}

/// A store's two steps of a set of actions, in one open transaction.
#[allow(async_fn_in_trait)]
pub trait Clicks {
    /// Loads and locks the actions' messages, their conversations and the
    /// interactions the actions may concern. A message that is not there
    /// (or not live) is left out.
    async fn load(&mut self, cmds: &[Cmd<'_>]) -> StoreResult<Loaded>;
    /// Writes the accepted actions in order: the interactions they
    /// answered (as `loaded` holds them now), the messages they changed (as
    /// the last action on each left it), their events (`events[k]` is
    /// `decided[k]`'s) and stream entries.
    async fn apply(
        &mut self,
        loaded: &Loaded,
        decided: &[Decided],
        events: Vec<NewEvent>,
    ) -> StoreResult<Vec<Applied>>;
}

/// Per action, its outcome; `None` for one to run again on its own (its
/// block is gone and the load did not read its message whole).
pub type Outcomes = Vec<Option<StoreResult<Effects>>>;

/// Loads, decides and applies `cmds` in the transaction `c` has open. An
/// error is the transaction's; a refusal is its action's.
pub async fn run<C: Clicks>(c: &mut C, cmds: &[Cmd<'_>]) -> StoreResult<Outcomes> {
    let mut loaded = c.load(cmds).await?;
    let mut out: Outcomes = (0..cmds.len()).map(|_| None).collect();
    let (decided, events) = decide(&mut loaded, cmds, &mut out);
    if decided.is_empty() {
        return Ok(out);
    }
    let applied = c.apply(&loaded, &decided, events).await?;
    for (d, a) in decided.into_iter().zip(applied) {
        let mut announce = Announce::default();
        if let Some(i) = &d.answered {
            announce.api(&i.chatbot_id, i, "interaction.answered", d.now_ms);
        }
        announce.stream.extend(a.stream);
        let mut hot = a.hot;
        if let Some(h) = hot.as_mut().filter(|h| h.bot.is_none()) {
            h.bot = d.bot;
        }
        out[d.cmd] = Some(Ok(Effects {
            out: Interacted {
                typing: d.message.typing_on_interaction,
                message: d.message,
                json: a.json,
            },
            announce,
            answered: d.answered,
            hot,
        }));
    }
    Ok(out)
}

/// Runs one action through [`run`].
pub async fn one<C: Clicks>(c: &mut C, cmd: Cmd<'_>) -> StoreResult<Effects> {
    run(c, std::slice::from_ref(&cmd))
        .await?
        .pop()
        .flatten()
        .unwrap_or_else(|| Err(StoreError::Backend("a lone action was set aside".into())))
}

/// Decides each action in order on the rows as the ones before it left
/// them: the accepted ones, with their events, and each refusal in `out`.
/// A refusal leaves the rows as they were ([`plan`]). A message's last
/// action takes it out of `loaded` (no copy): what is written of it is
/// its last accepted action's.
fn decide(
    loaded: &mut Loaded,
    cmds: &[Cmd<'_>],
    out: &mut Outcomes,
) -> (Vec<Decided>, Vec<NewEvent>) {
    let (mut decided, mut events) = (Vec::new(), Vec::new());
    for (k, cmd) in cmds.iter().enumerate() {
        let again = cmds[k + 1..].iter().any(|c| c.message_id == cmd.message_id);
        let mut owned = if again {
            None
        } else {
            loaded.messages.remove(cmd.message_id)
        };
        let Some(msg) = owned
            .as_mut()
            .or_else(|| loaded.messages.get_mut(cmd.message_id))
        else {
            out[k] = Some(Err(StoreError::NotFound));
            continue;
        };
        if cmd
            .conversation_id
            .is_some_and(|c| c != msg.conversation_id.as_str())
        {
            out[k] = Some(Err(StoreError::NotFound));
            continue;
        }
        if !loaded.whole.contains(cmd.message_id) && domain::block_gone(msg, cmd.act.action) {
            continue; // on its own, with its closed interactions
        }
        let Some(party) = loaded.parties.get(msg.conversation_id.as_str()) else {
            out[k] = Some(Err(StoreError::NotFound));
            continue;
        };
        let list = loaded
            .interactions
            .entry(cmd.message_id.to_string())
            .or_default();
        let p = match plan(msg, list, party, &cmd.act) {
            Ok(p) => p,
            Err(e) => {
                out[k] = Some(Err(e));
                continue;
            }
        };
        let bot = party.bot.clone();
        // A copy only for a message an action after this one acts on.
        let copy = again.then(|| msg.clone());
        let Some(message) = owned.take().or(copy) else {
            continue; // not reached: the message was found above
        };
        decided.push(Decided {
            cmd: k,
            message,
            changed: p.changed,
            answered: p.answered,
            bot,
            now_ms: cmd.act.by.now_ms,
        });
        events.push(p.event);
    }
    (decided, events)
}

/// The load and the apply of a store's [`Tx`], step by step.
pub struct Steps<'t, T> {
    tx: &'t mut T,
    /// A message the caller loaded (and locked) already.
    known: Option<Message>,
}

impl<'t, T: Tx> Steps<'t, T> {
    pub fn new(tx: &'t mut T) -> Self {
        Self { tx, known: None }
    }

    /// With `msg`, loaded and locked in `tx` already.
    pub fn knowing(tx: &'t mut T, msg: Message) -> Self {
        Self {
            tx,
            known: Some(msg),
        }
    }
}

impl<T: Tx> Clicks for Steps<'_, T> {
    /// Per message: the message, its conversation, then the interactions
    /// its first action may concern (every one when its block is gone).
    async fn load(&mut self, cmds: &[Cmd<'_>]) -> StoreResult<Loaded> {
        let mut l = Loaded::default();
        for cmd in cmds {
            if l.messages.contains_key(cmd.message_id) {
                continue;
            }
            let msg = match self.known.take() {
                Some(m) if m.id == cmd.message_id => m,
                _ => match self.tx.message(cmd.message_id).await {
                    Ok(m) => m,
                    Err(StoreError::NotFound) => continue,
                    Err(e) => return Err(e),
                },
            };
            if cmd
                .conversation_id
                .is_some_and(|c| c != msg.conversation_id.as_str())
            {
                continue;
            }
            if !l.parties.contains_key(msg.conversation_id.as_str()) {
                let party = self.tx.party(&msg.conversation_id).await?;
                l.parties.insert(msg.conversation_id.to_string(), party);
            }
            let list = self.tx.interactions_for(&msg, cmd.act.action).await?;
            if domain::block_gone(&msg, cmd.act.action) {
                l.whole.insert(msg.id.to_string());
            }
            l.interactions.insert(msg.id.to_string(), list);
            l.messages.insert(msg.id.to_string(), msg);
        }
        Ok(l)
    }

    async fn apply(
        &mut self,
        _loaded: &Loaded,
        decided: &[Decided],
        events: Vec<NewEvent>,
    ) -> StoreResult<Vec<Applied>> {
        let mut applied = Vec::with_capacity(decided.len());
        for (d, e) in decided.iter().zip(events) {
            if let Some(i) = &d.answered {
                self.tx.save_interaction(i).await?;
            }
            let mut a = Applied {
                hot: self.tx.insert_event(e).await?,
                ..Applied::default()
            };
            if d.changed {
                let doc = self.tx.save_message(&d.message).await?;
                let entry = self
                    .tx
                    .append_stream(&d.message.conversation_id, "message.updated", doc)
                    .await?;
                a.stream = Some(entry);
            }
            a.json = self.tx.message_json(&d.message);
            applied.push(a);
        }
        Ok(applied)
    }
}

/// A visitor's click or submit on a message of their conversation, in a
/// transaction of its own.
pub async fn interact<T: Tx>(tx: &mut T, req: &InteractRequest) -> StoreResult<Effects> {
    one(&mut Steps::new(tx), Cmd::visitor(req)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::ChatbotId;
    use crate::domain::inbox::tests::{HOUR, T0, click, interactions, message};
    use crate::domain::interact::Action;
    use crate::domain::status::InteractionStatus;
    use crate::store::Acting;
    use crate::store::script::inbox::tests::acting;
    use crate::store::script::now;

    /// A store's rows in memory: what `load` finds, what `apply` was given.
    #[derive(Default)]
    struct Rows {
        loaded: Loaded,
        applied: Vec<(usize, String, bool)>,
        fail: bool,
    }

    impl Clicks for Rows {
        async fn load(&mut self, _: &[Cmd<'_>]) -> StoreResult<Loaded> {
            Ok(std::mem::take(&mut self.loaded))
        }

        async fn apply(
            &mut self,
            loaded: &Loaded,
            decided: &[Decided],
            events: Vec<NewEvent>,
        ) -> StoreResult<Vec<Applied>> {
            if self.fail {
                return Err(StoreError::Backend("the write failed".into()));
            }
            for (d, e) in decided.iter().zip(&events) {
                assert!(loaded.interactions.contains_key(d.message.id.as_str()));
                self.applied.push((d.cmd, e.id.to_string(), d.changed));
            }
            Ok(decided.iter().map(|_| Applied::default()).collect())
        }
    }

    fn rows(disable: bool) -> Rows {
        let msg = message(disable);
        let mut l = Loaded::default();
        l.interactions
            .insert(msg.id.to_string(), interactions(&msg));
        l.parties.insert(
            msg.conversation_id.to_string(),
            Party {
                chatbot_id: ChatbotId::stored("bot_1"),
                retention_ms: 7 * 24 * HOUR,
                created_at: T0,
                taken_over: false,
                bot: None,
            },
        );
        l.messages.insert(msg.id.to_string(), msg);
        Rows {
            loaded: l,
            ..Rows::default()
        }
    }

    struct Who {
        by: Vec<Acting>,
        actions: Vec<Action>,
    }

    fn who(actions: &[&str]) -> Who {
        Who {
            by: (0..actions.len())
                .map(|k| acting(&format!("evt_{k}")))
                .collect(),
            actions: actions.iter().map(|a| click(a)).collect(),
        }
    }

    fn cmds<'a>(w: &'a Who, message_id: &'a str, conversation_id: &'a str) -> Vec<Cmd<'a>> {
        w.actions
            .iter()
            .zip(&w.by)
            .map(|(action, by)| Cmd {
                message_id,
                conversation_id: Some(conversation_id),
                act: Act {
                    action,
                    by,
                    answer: None,
                },
            })
            .collect()
    }

    #[test]
    fn in_one_set_the_first_click_wins_and_only_it_is_applied() {
        let (mut r, w) = (rows(true), who(&["yes", "no"]));
        let out = now(run(&mut r, &cmds(&w, "msg_1", "conv_1"))).unwrap();
        let first = out[0].as_ref().unwrap().as_ref().unwrap();
        assert_eq!(
            first.answered.as_ref().unwrap().status,
            InteractionStatus::Answered
        );
        assert_eq!(first.announce.api.len(), 1, "interaction.answered");
        assert_eq!(first.announce.api[0].kind, "interaction.answered");
        assert!(matches!(out[1], Some(Err(StoreError::Rejected(_)))));
        assert_eq!(r.applied, vec![(0, "evt_0".to_string(), true)]);
    }

    #[test]
    fn clicks_of_a_group_that_stays_on_are_each_applied_in_order() {
        let (mut r, w) = (rows(false), who(&["yes", "no", "yes"]));
        let out = now(run(&mut r, &cmds(&w, "msg_1", "conv_1"))).unwrap();
        assert!(out.iter().all(|o| matches!(o, Some(Ok(_)))));
        let ids: Vec<&str> = r.applied.iter().map(|a| a.1.as_str()).collect();
        assert_eq!(ids, ["evt_0", "evt_1", "evt_2"]);
        assert!(r.applied.iter().all(|a| !a.2), "nothing turned off");
    }

    #[test]
    fn a_message_of_another_conversation_or_none_is_not_found_and_nothing_is_applied() {
        for (m, c) in [("msg_1", "conv_2"), ("msg_9", "conv_1")] {
            let (mut r, w) = (rows(true), who(&["yes"]));
            let out = now(run(&mut r, &cmds(&w, m, c))).unwrap();
            assert!(matches!(out[0], Some(Err(StoreError::NotFound))), "{m} {c}");
            assert!(r.applied.is_empty());
        }
    }

    #[test]
    fn a_click_whose_block_is_gone_is_set_aside_unless_its_message_was_read_whole() {
        let w = Who {
            actions: vec![Action::Click {
                block_id: "gone".into(),
                action_id: "yes".into(),
                comment: None,
            }],
            ..who(&["yes"])
        };
        let mut r = rows(true);
        let out = now(run(&mut r, &cmds(&w, "msg_1", "conv_1"))).unwrap();
        assert!(out[0].is_none(), "set aside, to run on its own");
        let mut r = rows(true);
        r.loaded.whole.insert("msg_1".into());
        let out = now(run(&mut r, &cmds(&w, "msg_1", "conv_1"))).unwrap();
        assert!(matches!(out[0], Some(Err(StoreError::Rejected(_)))));
        assert!(r.applied.is_empty());
    }

    #[test]
    fn a_failed_apply_fails_the_whole_set() {
        let (mut r, w) = (rows(false), who(&["yes", "no"]));
        r.fail = true;
        assert!(matches!(
            now(run(&mut r, &cmds(&w, "msg_1", "conv_1"))),
            Err(StoreError::Backend(_))
        ));
    }
}
