//! The integration tests of `agwire-llm`, one binary: the OpenAI-compatible
//! provider against a fake that speaks its wire, and `hf:` downloads.

mod agui;
mod axum_app;
mod fetch;
mod openai;
