//! The generated items: the spec struct with kube-derive's `CustomResource` and its attributes,
//! the schema transform, the replica-type enum and the `TrainingJob` impl.
use heck::ToSnakeCase;
use proc_macro2::{Literal, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{Ident, parse_quote};

use kfop_crd_rules::Shape;

use crate::args::{Job, Role, role_list};
use crate::rules;
use crate::spec::Spec;

pub fn expand(job: &Job, spec: Spec) -> TokenStream {
    let kind = Ident::new(&job.kind, Span::call_site());
    let transform = format_ident!("__kfop_{}_schema", spec.item.ident.to_string().to_snake_case());
    let shape = rules::shape(job, &spec);
    let transform_fn = rules::transform_fn(&transform, &shape);
    let replica_type = replica_type_enum(job, &spec.item.vis);
    let training_job = training_job_impl(job, &spec, &kind);
    let item = spec_struct(job, &spec, &shape, &transform);
    quote! {
        // The root's CEL rules make kube-derive name `schemars::Schema` unqualified.
        #[doc(hidden)]
        #[allow(unused_imports)]
        use ::kfop_runtime::__private::*;
        #item
        #transform_fn
        #replica_type
        #training_job
    }
}

/// The user's struct plus the derives kube needs (only those not already written), the serde
/// and schemars settings, and the `#[kube(...)]` attribute.
fn spec_struct(job: &Job, spec: &Spec, shape: &Shape, transform: &Ident) -> syn::ItemStruct {
    let mut item = spec.item.clone();
    let wanted: [(&str, syn::Path); 5] = [
        ("Clone", parse_quote!(::std::clone::Clone)),
        ("Debug", parse_quote!(::std::fmt::Debug)),
        ("Serialize", parse_quote!(::kfop_runtime::serde::Serialize)),
        ("Deserialize", parse_quote!(::kfop_runtime::serde::Deserialize)),
        ("JsonSchema", parse_quote!(::kfop_runtime::schemars::JsonSchema)),
    ];
    let missing = wanted
        .into_iter()
        .filter(|(name, _)| !spec.derives(name))
        .map(|(_, path)| path);
    // Derives go first so that their helper attributes (`serde`, `schemars`, `kube`) are known
    // wherever the user placed them.
    let mut attrs: Vec<syn::Attribute> = vec![parse_quote! {
        #[derive(::kfop_runtime::kube::CustomResource, #(#missing),*)]
    }];
    attrs.append(&mut item.attrs);
    if !spec.has_rename_all {
        attrs.push(parse_quote!(#[serde(rename_all = "camelCase")]));
    }
    if !spec.has_serde_crate {
        attrs.push(parse_quote!(#[serde(crate = "::kfop_runtime::serde")]));
    }
    if !spec.has_schemars_crate {
        attrs.push(parse_quote!(#[schemars(crate = "::kfop_runtime::schemars")]));
    }
    attrs.push(parse_quote!(#[schemars(transform = #transform)]));
    attrs.push(kube_attr(job, spec, shape));
    item.attrs = attrs;
    item
}

fn kube_attr(job: &Job, spec: &Spec, shape: &Shape) -> syn::Attribute {
    let Job {
        group,
        version,
        kind,
        plural,
        shortnames,
        categories,
        ..
    } = job;
    let scale = job.scale.as_ref().map(|role| {
        let [spec_path, status_path, selector_path] =
            kfop_crd_rules::scale_paths(&spec.replica_specs.json, role);
        quote! {
            scale(
                spec_replicas_path = #spec_path,
                status_replicas_path = #status_path,
                label_selector_path = #selector_path
            ),
        }
    });
    let doc = format!(
        " {}",
        kfop_crd_rules::description(kind, group, version, &job.framework)
    );
    let root_rules = kfop_crd_rules::root_rules(shape).into_iter().map(|r| {
        let (rule, message) = (&r.rule, &r.message);
        quote!(validation = ::kfop_runtime::kube::core::Rule::new(#rule).message(#message),)
    });
    let columns = kfop_crd_rules::PRINTER_COLUMNS
        .map(|(name, type_, path)| quote!(printcolumn(name = #name, type_ = #type_, json_path = #path)));
    // The root type gets the comparison and default the spec has.
    let root_derives = ["PartialEq", "Default"]
        .into_iter()
        .filter(|d| spec.derives(d))
        .map(|d| quote!(derive = #d,));
    parse_quote! {
        #[kube(
            group = #group,
            version = #version,
            kind = #kind,
            plural = #plural,
            doc = #doc,
            namespaced,
            status = "::kfop_runtime::api::JobStatus",
            #(shortname = #shortnames,)*
            #(category = #categories,)*
            #(#columns,)*
            #scale
            #(#root_derives)*
            #(#root_rules)*
            // kube-derive does not pass `crates` on to the root's schema with rules.
            attr = "x_kube(crates(kube_core = \"::kfop_runtime::kube::core\", schemars = \"::kfop_runtime::schemars\", serde = \"::kfop_runtime::serde\", serde_json = \"::kfop_runtime::serde_json\"))",
            crates(
                kube = "::kfop_runtime::kube",
                kube_core = "::kfop_runtime::kube::core",
                k8s_openapi = "::kfop_runtime::k8s_openapi",
                schemars = "::kfop_runtime::schemars",
                serde = "::kfop_runtime::serde",
                serde_json = "::kfop_runtime::serde_json"
            )
        )]
    }
}

fn role_tokens(role: &Role) -> TokenStream {
    let name = &role.name;
    let policy = Ident::new(role.restart_policy.as_str(), Span::call_site());
    let master = role.master.then(|| quote!(.master()));
    let replicas = role
        .default_replicas
        .map(Literal::i32_unsuffixed)
        .map(|n| quote!(.default_replicas(#n)));
    quote! {
        ::kfop_runtime::Role::new(#name, ::kfop_runtime::api::RestartPolicy::#policy) #master #replicas
    }
}

fn training_job_impl(job: &Job, spec: &Spec, kind: &Ident) -> TokenStream {
    let Job {
        controller,
        framework,
        container,
        port,
        ..
    } = job;
    let roles = job.roles.iter().map(role_tokens);
    let port = match port {
        Some((name, number)) => {
            let number = Literal::i32_unsuffixed(*number);
            quote!(::std::option::Option::Some(::kfop_runtime::FrameworkPort::new(#name, #number)))
        }
        None => quote!(::std::option::Option::None),
    };
    // Spanned at the fields, so a field of the wrong type is reported there.
    let (specs, run) = (&spec.replica_specs.ident, &spec.run_policy.ident);
    let replica_specs = quote_spanned!(specs.span()=> &self.spec.#specs);
    let run_policy = quote_spanned!(run.span()=> &self.spec.#run);
    quote! {
        impl ::kfop_runtime::TrainingJob for #kind {
            fn framework_info() -> &'static ::kfop_runtime::FrameworkInfo {
                static INFO: ::std::sync::LazyLock<::kfop_runtime::FrameworkInfo> =
                    ::std::sync::LazyLock::new(|| ::kfop_runtime::FrameworkInfo {
                        controller_name: ::std::string::String::from(#controller),
                        framework_name: ::std::string::String::from(#framework),
                        default_container: ::std::string::String::from(#container),
                        default_port: #port,
                        roles: ::std::vec![#(#roles),*],
                    });
                &INFO
            }

            fn replica_specs(
                &self,
            ) -> &::std::collections::BTreeMap<::std::string::String, ::kfop_runtime::api::ReplicaSpec> {
                #replica_specs
            }

            fn run_policy(&self) -> &::kfop_runtime::api::RunPolicy {
                #run_policy
            }

            fn status(&self) -> ::std::option::Option<&::kfop_runtime::api::JobStatus> {
                self.status.as_ref()
            }
        }
    }
}

/// `<Kind>ReplicaType`: the roles as an enum, written with Kubeflow's names and parsed in any
/// letter case (Kubeflow normalises `worker` to `Worker`).
fn replica_type_enum(job: &Job, vis: &syn::Visibility) -> TokenStream {
    let kind = &job.kind;
    let name = format_ident!("{kind}ReplicaType");
    let error = format_ident!("Parse{kind}ReplicaTypeError");
    let variants: Vec<Ident> = job
        .roles
        .iter()
        .map(|r| Ident::new(&r.name, Span::call_site()))
        .collect();
    let names = job.roles.iter().map(|r| r.name.as_str());
    let count = Literal::usize_unsuffixed(variants.len());
    let doc = format!(" The replica types (roles) of a {kind}.");
    let error_doc = format!(" A string that names no {kind} replica type.");
    let expected = format!("; expected one of {} (any letter case)", role_list(&job.roles));
    let unknown = format!("unknown {kind} replica type `{{}}`{expected}");
    quote! {
        #[doc = #doc]
        #[derive(
            ::std::clone::Clone, ::std::marker::Copy, ::std::fmt::Debug, ::std::cmp::PartialEq,
            ::std::cmp::Eq, ::std::hash::Hash, ::std::cmp::PartialOrd, ::std::cmp::Ord,
            ::kfop_runtime::serde::Serialize, ::kfop_runtime::serde::Deserialize,
        )]
        #[serde(crate = "::kfop_runtime::serde", try_from = "::std::string::String")]
        #vis enum #name {
            #(#variants),*
        }

        impl #name {
            /// Every replica type, in declaration order.
            pub const ALL: [Self; #count] = [#(Self::#variants),*];

            /// The Kubeflow name, e.g. `Worker`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    #(Self::#variants => #names,)*
                }
            }
        }

        impl ::std::fmt::Display for #name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for #name {
            type Err = #error;

            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|r| r.as_str().eq_ignore_ascii_case(s))
                    .ok_or_else(|| #error(::std::string::String::from(s)))
            }
        }

        impl ::std::convert::TryFrom<::std::string::String> for #name {
            type Error = #error;

            fn try_from(s: ::std::string::String) -> ::std::result::Result<Self, Self::Error> {
                s.parse()
            }
        }

        #[doc = #error_doc]
        #[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq, ::std::cmp::Eq)]
        #vis struct #error(pub ::std::string::String);

        impl ::std::fmt::Display for #error {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::write!(f, #unknown, self.0)
            }
        }

        impl ::std::error::Error for #error {}
    }
}
