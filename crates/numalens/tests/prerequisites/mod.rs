//! What a test needs of the machine beyond the Rust toolchain. A test that returns early when a
//! tool is missing passes without having run, and hides an install step missing from the test
//! command; so a missing tool fails the test, naming the package that provides it
//! (`tests/install-deps`, run by `make test`, installs them). On a machine that cannot have it,
//! `NUMALENS_ALLOW_SKIP=1` turns the failure into a skip that says so.

/// Whether the test can go on: true when `available`. Otherwise it panics saying `what` is
/// missing and `remedy`, or, under `NUMALENS_ALLOW_SKIP=1`, says it skips and returns false.
pub fn require(available: bool, what: &str, remedy: &str) -> bool {
    if available {
        return true;
    }
    if std::env::var_os("NUMALENS_ALLOW_SKIP").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED (NUMALENS_ALLOW_SKIP=1): {what} is missing: {remedy}");
        return false;
    }
    panic!(
        "{what} is missing: {remedy}. \
         Set NUMALENS_ALLOW_SKIP=1 to skip the tests that need it instead."
    );
}
