//! Fails when a committed generated file (CRDs, API reference, install bundle) drifts from the Rust types.
// Test helpers outside #[test] functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn committed_generated_files_match_the_rust_types() {
    let drifted = xtask::drifted(&xtask::repo_root()).expect("generate");
    assert!(
        drifted.is_empty(),
        "out of date (run `cargo xtask generate` and commit): {drifted:?}"
    );
}
