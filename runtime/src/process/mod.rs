//! The process: a running operator assembled from the engine. The manager (shared caches and
//! watches, one controller per kind), the operator's command line and `main`, run-time
//! frameworks loaded from `Framework` objects, the allocator's tuning, and the test harness.
pub mod dynamic;
pub mod malloc;
pub mod manager;
pub mod operator;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
