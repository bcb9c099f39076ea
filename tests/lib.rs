//! End-to-end tests live in this crate's test targets; the library only anchors the package.
