//! The integration tests of `agwire-service`, one binary: each file below is a
//! suite of its own. The suites that serve over HTTP run on SQLite, or on
//! PostgreSQL with `AGWIRE_TEST_STORE=postgres` (the test command runs them
//! both ways).

mod common;

mod api_property;
mod bucket;
mod capabilities;
mod from_config;
mod hardening;
mod jobs;
mod jwks;
mod local_model;
mod multitask;
mod pipeline;
mod quotas;
mod runs;
mod service;
mod store_contract;
mod threads;
mod trust;
mod validate;
mod validation_http;
mod webhooks;
