# Sourced by scripts/test and scripts/serve: how both build, so that the
# serve command after the tests compiles nothing again. (So does the
# profile: scripts/test sets AGWIRE_BUILD_PROFILE=tests, which
# scripts/serve builds in when set, release otherwise.)
#
# An explicit target (the host's own triple): without one, cargo shares
# build scripts and proc-macros between host and target when it can, which
# it can in a full build but not in `cargo check` — so clippy and the test
# build would each compile their own, and each build llama.cpp from source
# (minutes). With one, the host side is the same for every command. (The
# other half of the reuse is crates/agwire-workspace-hack: the same
# features whichever packages a command selects.)
CARGO_BUILD_TARGET="${CARGO_BUILD_TARGET:-$(rustc -vV | sed -n 's/^host: //p')}"
export CARGO_BUILD_TARGET
