//! The PostgreSQL store (work in progress).
