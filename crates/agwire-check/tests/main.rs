//! agwire-check's suites: mutants (one broken rule each), and real servers (our dojo, the official SDKs' producers).
mod mutants;
mod peers;
