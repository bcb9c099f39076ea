//! Expansion snapshots: each example kind in `tests/kinds/` is expanded by calling the macro's
//! implementation directly and pretty-printed, so a change to the generated code shows up as a
//! reviewable diff (`cargo insta review`, or `INSTA_UPDATE=always cargo test -p kfop-derive`).
use std::path::Path;

use syn::{Item, Meta};

use crate::training_job_impl;

/// Expands the `#[training_job(...)]` struct of the file at `path`.
fn expand_file(path: &Path) -> String {
    let source = std::fs::read_to_string(path).unwrap();
    let file = syn::parse_file(&source).unwrap();
    let mut item = file
        .items
        .into_iter()
        .find_map(|item| match item {
            Item::Struct(s) if s.attrs.iter().any(is_training_job) => Some(s),
            _ => None,
        })
        .expect("a struct with #[training_job(...)]");
    let position = item.attrs.iter().position(is_training_job).unwrap();
    let Meta::List(list) = item.attrs.remove(position).meta else {
        panic!("#[training_job] without arguments");
    };
    let out = training_job_impl(list.tokens, quote::quote!(#item));
    prettyplease::unparse(&syn::parse2(out).unwrap())
}

fn is_training_job(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "training_job")
}

#[test]
fn expansions() {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../tests/snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        insta::glob!("../tests/kinds", "*job.rs", |path| {
            insta::assert_snapshot!("expand", expand_file(path));
        });
    });
}
