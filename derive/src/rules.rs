//! The kind's admission rules, from `kfop-crd-rules` (the generator the operator also uses for
//! kinds registered at run time, so both CRDs are equal).
//!
//! The spec's rules go into its schema through a schemars `transform` rather than kube's
//! `KubeSchema`/`#[x_kube(validation)]`: most of them belong to fields of kfop-runtime's types
//! (the replica spec inside the map, `runPolicy.schedulingPolicy.queue`), which attributes on the
//! user's struct cannot reach. Only the rules on `metadata.name` need the root schema, which
//! kube-derive builds itself: they go through `#[kube(validation)]`, whose `KubeSchema` expansion
//! names `schemars::Schema` unqualified (the expansion imports `kfop_runtime::__private::*` for
//! it, so the user need not depend on schemars).
use kfop_crd_rules::{RoleShape, Shape};
use proc_macro2::TokenStream;
use quote::quote;

use crate::args::Job;
use crate::spec::Spec;

/// What the rules need of the declaration.
pub fn shape(job: &Job, spec: &Spec) -> Shape {
    Shape {
        replica_specs: spec.replica_specs.json.clone(),
        run_policy: spec.run_policy.json.clone(),
        required_container: job.container_required.then(|| job.container.clone()),
        roles: job
            .roles
            .iter()
            .map(|r| RoleShape {
                name: r.name.clone(),
                master: r.master,
                required: r.required,
                default_replicas: r.default_replicas,
                min_replicas: r.min_replicas,
                max_replicas: r.max_replicas,
            })
            .collect(),
    }
}

/// The transform function that adds the shape's extensions to the spec's schema; it builds the
/// shape again at run time and hands it to the shared generator.
pub fn transform_fn(name: &syn::Ident, shape: &Shape) -> TokenStream {
    let Shape {
        replica_specs,
        run_policy,
        required_container,
        roles,
    } = shape;
    let container = match required_container {
        Some(c) => quote!(::std::option::Option::Some(::std::string::String::from(#c))),
        None => quote!(::std::option::Option::None),
    };
    let option = |value: Option<i32>| match value {
        Some(n) => quote!(::std::option::Option::Some(#n)),
        None => quote!(::std::option::Option::None),
    };
    let roles = roles.iter().map(|r| {
        let (name, master, required) = (&r.name, r.master, r.required);
        let (default, min, max) = (
            option(r.default_replicas),
            option(r.min_replicas),
            option(r.max_replicas),
        );
        quote! {
            crd_rules::RoleShape {
                name: ::std::string::String::from(#name),
                master: #master,
                required: #required,
                default_replicas: #default,
                min_replicas: #min,
                max_replicas: #max,
            }
        }
    });
    quote! {
        /// Adds the admission rules of `#[training_job]` to the spec's schema.
        fn #name(schema: &mut ::kfop_runtime::schemars::Schema) {
            use ::kfop_runtime::__private::crd_rules;
            let shape = crd_rules::Shape {
                replica_specs: ::std::string::String::from(#replica_specs),
                run_policy: ::std::string::String::from(#run_policy),
                required_container: #container,
                roles: ::std::vec![#(#roles),*],
            };
            crd_rules::extend_spec_schema(schema.ensure_object(), &shape);
        }
    }
}
