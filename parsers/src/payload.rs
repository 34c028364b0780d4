//! user_events payload encoding (values → packed bytes with dynamic locations).
//!
//! OWNER: register helper.
