//! The author's kit: what a framework is and what its code is given. The job APIs ([`api`]), the
//! manifest ([`manifest`]), the code contract ([`framework`]), and the pure rules both share:
//! environment templates, labels, defaults, success policies, status rules, gang scheduling.
//! Nothing here reads a cache or sends a request.
pub mod api;
pub mod cel_rule;
pub mod child_view;
pub mod defaults;
pub mod env;
pub mod framework;
pub mod gang;
pub mod info;
pub mod labels;
pub mod manifest;
pub mod policy;
pub mod status_rule;
