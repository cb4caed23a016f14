//! §10 limits.
