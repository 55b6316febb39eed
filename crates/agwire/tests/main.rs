//! The integration tests of the `agwire` binary, one test binary: `agwire
//! serve` as child processes (kill -9, drain, replicas on PostgreSQL), the API
//! fuzzer and the web app in a real browser.

mod common;

mod api_fuzz;
mod bucket_replicas;
mod replicas;
mod replicas_multitask;
mod replicas_run_control;
mod serve;
mod telemetry;
mod web;
