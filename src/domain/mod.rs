//! Pure domain code: no I/O.

pub mod attachment;
pub mod blocks;
pub mod duration;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod fields;
pub mod ids;
pub mod inbox;
pub mod interact;
pub mod model;
pub mod origins;
pub mod reply;
pub mod status;
pub mod text;
pub mod time;
pub mod token;
pub mod values;
