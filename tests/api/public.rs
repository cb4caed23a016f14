//! The public internet (§10): rate limits, stream caps, hostile input and
//! the defects a probe found — each with the answer the contract asks for.

mod cursors;
mod hostile;
mod limits;
