//! Compile tests: misuse of `#[training_job]` is a compile error at the offending attribute or
//! field that says the fix (`tests/ui/fail/*.stderr`, written once with `TRYBUILD=overwrite`),
//! and the supported variants compile and run (`tests/ui/pass`).
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
