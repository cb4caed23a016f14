//! `ask` as a task (the MCP Tasks extension, SEP-2663, from revision
//! 2026-07-28 on; API §12). The task is the question: its id is the
//! interaction id and its state is read from the blockhook server on every
//! `tasks/get`, so nothing is kept here — a task outlives a restart of
//! `blockhook mcp` and can be read from another one. `tasks/cancel`
//! withdraws the question on the server.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask,
    ProtocolVersion, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};

use super::client::Failure;
use super::input::AskInput;
use super::{Blockhook, failed};

/// How often a client should poll `tasks/get`.
pub const POLL_INTERVAL_MS: u64 = 2000;

/// Whether this `tools/call` gets a task: the client declared the tasks
/// extension and speaks a revision that defines it (a 2025-11-25 session
/// keeps the held call, whatever it declared).
pub fn wanted(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|c| c.supports_tasks())
        && ctx
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

fn not_found(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no such task: {id}"), None)
}

/// A failure reading the server, as the JSON-RPC error of a tasks call.
fn error(id: &str, f: Failure) -> ErrorData {
    if f.status == Some(404) {
        return not_found(id);
    }
    ErrorData::internal_error(
        format!(
            "the question {id} could not be read: {} ({})",
            f.detail, f.code
        ),
        Some(f.to_json()),
    )
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The base task of interaction `i` with `status`.
fn base(i: &Value, status: TaskStatus) -> Task {
    let created = text(i, "created_at");
    let updated = Some(text(i, "updated_at"))
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| created.clone());
    let mut task =
        Task::new(text(i, "id"), status, created, updated).with_poll_interval_ms(POLL_INTERVAL_MS);
    if status == TaskStatus::Working {
        task = task.with_status_message(format!(
            "waiting for the person's answer in conversation {}",
            text(i, "conversation_id")
        ));
    }
    task
}

fn as_object(r: CallToolResult) -> Map<String, Value> {
    match serde_json::to_value(r) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

impl Blockhook {
    /// `ask` for a client that opted in: the question is posted without
    /// waiting and the answer is at once a working task. A question that
    /// cannot be asked is the same tool error as for the held call.
    pub(super) async fn ask_task(
        &self,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let input: AskInput = serde_json::from_value(args)
            .map_err(|e| ErrorData::invalid_params(format!("invalid arguments: {e}"), None))?;
        let id = match self.start(input).await {
            Ok(id) => id,
            Err(f) => return Ok(CallToolResponse::Complete(failed(&f))),
        };
        let task = match self.api.interaction(&id).await {
            Ok(i) => base(&i, TaskStatus::Working),
            // Asked, but not readable just now: the seed state still says
            // what it is, `tasks/get` reads it again.
            Err(_) => {
                let now = crate::domain::time::rfc3339(crate::domain::time::now_ms());
                Task::new(id, TaskStatus::Working, now.clone(), now)
                    .with_poll_interval_ms(POLL_INTERVAL_MS)
            }
        };
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// `tasks/get`: `working` while the question is pending, `completed`
    /// with the answer object once decided (expired included), `cancelled`
    /// once withdrawn.
    pub(super) async fn task(&self, id: &str) -> Result<DetailedTask, ErrorData> {
        let i = self.api.interaction(id).await.map_err(|f| error(id, f))?;
        let payload = match i.get("status").and_then(Value::as_str) {
            Some("pending") => TaskPayload::Working,
            Some("cancelled") => TaskPayload::Cancelled,
            _ => {
                let answer = self.api.answer(id, 0).await.map_err(|f| error(id, f))?;
                if answer.get("answer").and_then(Value::as_str) == Some("pending") {
                    TaskPayload::Working
                } else {
                    TaskPayload::Completed {
                        result: as_object(CallToolResult::structured(answer)),
                    }
                }
            }
        };
        Ok(DetailedTask::new(base(&i, payload.status()), payload))
    }

    /// `tasks/cancel`: withdraws the question (block reason `withdrawn`).
    /// A task that already ended cannot be cancelled.
    pub(super) async fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        match self.api.cancel(id).await {
            Ok(_) => Ok(()),
            Err(f) if f.code == "interaction_not_pending" => Err(ErrorData::invalid_params(
                format!("the task {id} has already ended"),
                None,
            )),
            Err(f) => Err(error(id, f)),
        }
    }
}
