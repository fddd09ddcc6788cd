//! `#[launch_config]`.
