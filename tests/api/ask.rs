//! Asking without waiting (`"wait": false` and `…/answer?wait=`), over MCP
//! (`blockhook mcp` driven by an independent client), and with an attachment.

mod attachments;
pub mod mcp;
mod nowait;
mod tasks;
