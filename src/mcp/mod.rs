//! `blockhook mcp`: a Model Context Protocol server over stdio (API §12), so
//! an agent can ask a person through its tools. It speaks HTTP to a blockhook
//! server like `blockhook ask`: each question is asked without waiting and
//! its answer long-polled, so no tool call depends on one long connection.

mod client;
mod input;
mod tasks;

use std::time::{Duration, Instant};

use clap::Args;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, GetTaskParams,
    GetTaskResult, Implementation, ProgressNotificationParam, RequestMetaObject,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, Peer, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router,
};
use serde_json::{Value, json};

use client::{Api, Failure};
use input::{AskInput, ResultInput};

#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The blockhook server.
    #[arg(long, env = "BLOCKHOOK_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The chatbot's API key (`sk_…`).
    #[arg(long = "api-key", env = "BLOCKHOOK_API_KEY", hide_env_values = true)]
    pub api_key: String,
    /// The conversation questions go to when a call names none.
    #[arg(long, env = "BLOCKHOOK_CONVERSATION")]
    pub conversation: Option<String>,
}

/// How long one poll of the answer waits: progress goes out after each, so
/// well under the 10 s the contract allows between notifications.
const POLL_S: u64 = 5;

/// How long past the question's own timeout `ask` keeps trying a server it
/// lost (restarting, or another instance taking over) before giving up.
const UNREACHABLE_GRACE: Duration = Duration::from_secs(30);

/// The question's timeout as asked (600 s when not given).
fn question_timeout(input: &AskInput) -> Duration {
    match &input.timeout {
        Some(input::Timeout::Seconds(n)) => Duration::from_secs(*n),
        Some(input::Timeout::Text(t)) => {
            crate::domain::duration::parse(t).unwrap_or(Duration::from_secs(600))
        }
        None => Duration::from_secs(600),
    }
}

/// The pauses between tries of a server that is away: from 250 ms, doubling
/// up to 5 s, with jitter.
pub fn reconnect_delays() -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
        .build()
}

/// Whether a failed poll is the server being away (restarting, or another
/// instance taking over) rather than an answer.
fn server_away(f: &Failure) -> bool {
    f.code == "unreachable" || matches!(f.status, Some(502..=504))
}

const INSTRUCTIONS: &str = "Ask a person and get their decision. Use `ask` to ask and wait \
(it reports progress while the person decides), or `ask_start` then `ask_result` to ask and \
check back later. Answers: `accepted` (yes), `declined` (no; may carry a `comment`), `chose` \
(the chosen option ids), `custom` (the person's own `text`), `expired` (no answer in time — \
treat it as declined), `withdrawn` (the question was taken back — treat it as declined).";

macro_rules! answers {
    () => {
        "The result is the answer object: {\"answer\": \"accepted\"} — go ahead; \
{\"answer\": \"declined\", \"comment\"?} — do not, and read the comment; {\"answer\": \"chose\", \
\"options\": [ids]}; {\"answer\": \"custom\", \"text\"}; {\"answer\": \"expired\"} or \
{\"answer\": \"withdrawn\"} — nobody answered: treat it as declined. A tool error (isError) means \
the question could not be asked or read (`unreachable`, `unauthorized`, `dialog_pending`: \
another question is still open in the conversation, `validation_failed`, `not_found`)."
    };
}

const ASK: &str = concat!(
    "Ask the person in the conversation a question and wait for their answer (it may take ",
    "minutes). Sends progress notifications while waiting when the call carries a progress ",
    "token. Without options the question is yes/no. ",
    answers!()
);

const ASK_RESULT: &str = concat!(
    "The answer to a question asked with ask_start, waiting up to `wait` seconds for it; ",
    "{\"answer\": \"pending\"} if the person has not answered yet (call again). ",
    answers!()
);

const ANSWERS: &str = answers!();

#[derive(Clone)]
pub struct Blockhook {
    api: std::sync::Arc<Api>,
    conversation: Option<String>,
    tool_router: ToolRouter<Self>,
}

pub(crate) fn failed(f: &Failure) -> CallToolResult {
    CallToolResult::structured_error(f.to_json())
}

impl Blockhook {
    pub fn new(args: &McpArgs) -> Result<Self, String> {
        Ok(Self {
            api: std::sync::Arc::new(Api::new(&args.url, &args.api_key)?),
            conversation: args.conversation.clone(),
            tool_router: Self::tool_router(),
        })
    }

    /// Posts the question without waiting; its interaction id.
    async fn start(&self, input: AskInput) -> Result<String, Failure> {
        let Some(cid) = input
            .conversation_id
            .clone()
            .or_else(|| self.conversation.clone())
        else {
            return Err(Failure {
                code: "validation_failed".into(),
                status: None,
                detail: "no conversation: pass conversation_id, or start the server with \
                         --conversation / BLOCKHOOK_CONVERSATION"
                    .into(),
                errors: Some(json!([{"field": "/conversation_id", "code": "required",
                    "message": "conversation_id is required"}])),
            });
        };
        let mut body = serde_json::to_value(&input).unwrap_or_else(|_| json!({}));
        if let Some(o) = body.as_object_mut() {
            o.remove("conversation_id");
        }
        self.api.start(&cid, body).await
    }
}

#[tool_router]
impl Blockhook {
    #[tool(description = ASK)]
    async fn ask(
        &self,
        Parameters(input): Parameters<AskInput>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let deadline = Instant::now() + question_timeout(&input) + UNREACHABLE_GRACE;
        let id = match self.start(input).await {
            Ok(id) => id,
            Err(f) => return Ok(failed(&f)),
        };
        let token = meta.get_progress_token();
        let started = Instant::now();
        let progress = |peer: &Peer<RoleServer>| {
            let peer = peer.clone();
            let token = token.clone();
            let id = id.clone();
            async move {
                if let Some(t) = token {
                    let p = ProgressNotificationParam::new(t, started.elapsed().as_secs_f64())
                        .with_message(format!("waiting for the person's answer ({id})"));
                    let _ = peer.notify_progress(p).await;
                }
            }
        };
        progress(&peer).await;
        let mut delays = reconnect_delays();
        loop {
            match self.api.answer(&id, POLL_S).await {
                Ok(v) if v.get("answer").and_then(Value::as_str) == Some("pending") => {
                    delays = reconnect_delays();
                    progress(&peer).await
                }
                Ok(v) => return Ok(CallToolResult::structured(v)),
                Err(mut f) if server_away(&f) => {
                    // The server restarts or fails over: the question stays
                    // open there; try again with backoff until its timeout.
                    if Instant::now() > deadline {
                        f.detail = format!(
                            "{} (the question {id} stays open: read it later with ask_result)",
                            f.detail
                        );
                        return Ok(failed(&f));
                    }
                    progress(&peer).await;
                    tokio::time::sleep(delays.next().unwrap_or(Duration::from_secs(5))).await;
                }
                Err(f) => return Ok(failed(&f)),
            }
        }
    }

    #[tool(
        description = "Ask the person in the conversation a question without waiting. Returns \
{\"interaction_id\"} at once; read the answer with ask_result."
    )]
    async fn ask_start(
        &self,
        Parameters(input): Parameters<AskInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.start(input).await {
            Ok(id) => CallToolResult::structured(json!({"interaction_id": id})),
            Err(f) => failed(&f),
        })
    }

    #[tool(description = ASK_RESULT)]
    async fn ask_result(
        &self,
        Parameters(input): Parameters<ResultInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let wait = input.wait.unwrap_or(30);
        Ok(match self.api.answer(&input.interaction_id, wait).await {
            Ok(v) => CallToolResult::structured(v),
            Err(f) => failed(&f),
        })
    }
}

#[tool_handler]
impl ServerHandler for Blockhook {
    /// `ask` becomes a task for a client that opted in (§12); every other
    /// call goes to its tool.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "ask" && tasks::wanted(&context) {
            return self.ask_task(request).await;
        }
        let tcc = ToolCallContext::new(self, request, context);
        self.tool_router.call(tcc).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.task(&request.task_id).await?))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.cancel(&request.task_id).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("blockhook", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!("{INSTRUCTIONS}\n\n{ANSWERS}"))
    }
}

/// Serves MCP on stdin/stdout until the client closes it.
pub async fn run(args: McpArgs) -> i32 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = match Blockhook::new(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("blockhook mcp: {e}");
            return crate::ask_cli::EXIT_UNAVAILABLE;
        }
    };
    let service = match server.serve(rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("blockhook mcp: {e}");
            return crate::ask_cli::EXIT_UNAVAILABLE;
        }
    };
    match service.waiting().await {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("blockhook mcp: {e}");
            crate::ask_cli::EXIT_UNAVAILABLE
        }
    }
}
