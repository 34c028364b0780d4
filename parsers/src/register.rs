//! user_events register commands (`name[:flags] type field; ...`): parse, print, validate
//! as the kernel does, and compute the [`crate::schema::EventFormat`] the kernel will expose.
//!
//! OWNER: register helper.
