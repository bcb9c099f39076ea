//! The annotated spec struct: which field holds the replica specs and which the run policy,
//! their JSON names, and what the user already derived.
use proc_macro2::{Span, TokenStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Field, Fields, Ident, Item, ItemStruct, Lit, Meta, Path, Token};

use crate::args::Job;

/// A spec field the generated code reads.
#[derive(Clone, Debug)]
pub struct SpecField {
    pub ident: Ident,
    /// The field's JSON name (serde's camelCase of the ident, or its `rename`).
    pub json: String,
}

#[derive(Debug)]
pub struct Spec {
    /// The struct with the `#[kfop(...)]` field markers removed.
    pub item: ItemStruct,
    pub replica_specs: SpecField,
    pub run_policy: SpecField,
    /// Last path segments of the user's derives (`serde::Serialize` -> `Serialize`).
    pub derives: Vec<String>,
    pub has_rename_all: bool,
    pub has_serde_crate: bool,
    pub has_schemars_crate: bool,
}

impl Spec {
    pub fn derives(&self, name: &str) -> bool {
        self.derives.iter().any(|d| d == name)
    }
}

/// Which spec field a `#[kfop(...)]` marker designates.
#[derive(Clone, Copy)]
enum Marker {
    ReplicaSpecs,
    RunPolicy,
}

pub fn parse(item: TokenStream, job: &Job) -> syn::Result<Spec> {
    let mut item = match syn::parse2::<Item>(item)? {
        Item::Struct(s) => s,
        Item::Enum(e) => {
            let (enum_token, ident) = (e.enum_token, e.ident);
            return Err(syn::Error::new_spanned(
                quote::quote!(#enum_token #ident),
                "#[training_job] applies to the job's spec struct with named fields, not to an enum",
            ));
        }
        other => {
            return Err(syn::Error::new_spanned(
                other,
                "#[training_job] applies to the job's spec struct with named fields",
            ));
        }
    };
    let mut errors = Errors::default();
    let expected = format!("{}Spec", job.kind);
    if item.ident != expected {
        // kube-derive names the resource type after `kind`; the spec is `<Kind>Spec` as in
        // Kubeflow's Go API, which also catches a kind copied from another framework.
        errors.push(syn::Error::new(
            item.ident.span(),
            format!(
                "the spec struct of kind `{}` must be named `{expected}`; rename it",
                job.kind
            ),
        ));
    }
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        errors.push(syn::Error::new_spanned(
            &item.generics,
            "a training-job spec cannot be generic: a CRD has one concrete schema; remove the type parameters",
        ));
    }
    let struct_attrs = check_struct_attrs(&item.attrs, &mut errors);

    let Fields::Named(fields) = &mut item.fields else {
        return Err(errors.fail(syn::Error::new_spanned(
            &item.fields,
            "#[training_job] needs a struct with named fields (the spec's JSON properties), not a tuple or unit struct",
        )));
    };
    let mut replica_specs: Option<SpecField> = None;
    let mut marked_run_policy: Option<SpecField> = None;
    let mut named_run_policy: Option<SpecField> = None;
    for field in &mut fields.named {
        let markers = take_markers(field, &mut errors);
        let Some(ident) = field.ident.clone() else {
            continue;
        };
        // Only the fields the generated code reads need a single JSON name.
        if markers.is_empty() && ident != "run_policy" {
            continue;
        }
        let spec_field = SpecField {
            json: json_name(field, &ident, &mut errors),
            ident,
        };
        for (marker, span) in markers {
            let slot = match marker {
                Marker::ReplicaSpecs => &mut replica_specs,
                Marker::RunPolicy => &mut marked_run_policy,
            };
            match slot {
                Some(first) => errors.push(syn::Error::new(
                    span,
                    format!(
                        "a second #[kfop({})] field; `{}` is already marked: mark exactly one field",
                        marker.name(),
                        first.ident
                    ),
                )),
                None => *slot = Some(spec_field.clone()),
            }
        }
        if spec_field.ident == "run_policy" {
            named_run_policy = Some(spec_field);
        }
    }
    let no_replica_specs = || {
        syn::Error::new(
            item.ident.span(),
            "no replica specs field: mark the map of replica specs with #[kfop(replica_specs)], e.g. \
             `#[kfop(replica_specs)] pub pytorch_replica_specs: BTreeMap<String, ReplicaSpec>`",
        )
    };
    let no_run_policy = || {
        syn::Error::new(
            item.ident.span(),
            "no run policy field: add `#[serde(default)] pub run_policy: RunPolicy` \
             (or mark another RunPolicy field with #[kfop(run_policy)])",
        )
    };
    let run_policy = marked_run_policy.or(named_run_policy);
    let Some(replica_specs) = replica_specs else {
        if run_policy.is_none() {
            errors.push(no_run_policy());
        }
        return Err(errors.fail(no_replica_specs()));
    };
    let Some(run_policy) = run_policy else {
        return Err(errors.fail(no_run_policy()));
    };
    errors.finish()?;
    Ok(Spec {
        derives: derives(&item.attrs),
        has_rename_all: struct_attrs.rename_all,
        has_serde_crate: struct_attrs.serde_crate,
        has_schemars_crate: struct_attrs.schemars_crate,
        item,
        replica_specs,
        run_policy,
    })
}

impl Marker {
    fn name(self) -> &'static str {
        match self {
            Self::ReplicaSpecs => "replica_specs",
            Self::RunPolicy => "run_policy",
        }
    }
}

/// Collects errors so that one expansion reports every problem.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// All errors so far plus `error`.
    fn fail(self, error: syn::Error) -> syn::Error {
        match self.0 {
            Some(mut all) => {
                all.combine(error);
                all
            }
            None => error,
        }
    }

    fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

#[derive(Default)]
struct StructAttrs {
    rename_all: bool,
    serde_crate: bool,
    schemars_crate: bool,
}

/// Checks the struct-level attributes: the derive owns `#[kube]` and `CustomResource`, and the
/// JSON names must stay Kubeflow's camelCase.
fn check_struct_attrs(attrs: &[Attribute], errors: &mut Errors) -> StructAttrs {
    let mut found = StructAttrs::default();
    for attr in attrs {
        if attr.path().is_ident("kube") {
            errors.push(syn::Error::new_spanned(
                attr,
                "remove this #[kube(...)]: #[training_job] generates the kube attributes from its own arguments",
            ));
        }
        if attr.path().is_ident("derive")
            && derive_paths(attr)
                .iter()
                .any(|p| last_ident(p) == "CustomResource")
        {
            errors.push(syn::Error::new_spanned(
                attr,
                "remove CustomResource from this derive: #[training_job] derives it",
            ));
        }
        let serde = attr.path().is_ident("serde");
        if !serde && !attr.path().is_ident("schemars") {
            continue;
        }
        for meta in nested_metas(attr) {
            if meta.path().is_ident("crate") {
                if serde {
                    found.serde_crate = true;
                } else {
                    found.schemars_crate = true;
                }
            }
            if serde && meta.path().is_ident("rename_all") {
                found.rename_all = true;
                if string_value(&meta).as_deref() != Some("camelCase") {
                    errors.push(syn::Error::new_spanned(
                        &meta,
                        "training-job specs keep Kubeflow's camelCase JSON names: use rename_all = \"camelCase\" or remove it",
                    ));
                }
            }
        }
    }
    found
}

/// Removes the `#[kfop(...)]` markers from a field, returning what they mark.
fn take_markers(field: &mut Field, errors: &mut Errors) -> Vec<(Marker, Span)> {
    let mut markers = Vec::new();
    field.attrs.retain(|attr| {
        if !attr.path().is_ident("kfop") {
            return true;
        }
        let parsed = attr.parse_nested_meta(|meta| {
            let marker = if meta.path.is_ident("replica_specs") {
                Marker::ReplicaSpecs
            } else if meta.path.is_ident("run_policy") {
                Marker::RunPolicy
            } else {
                return Err(
                    meta.error("unknown #[kfop] marker: use #[kfop(replica_specs)] or #[kfop(run_policy)]")
                );
            };
            markers.push((marker, meta.path.span()));
            Ok(())
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
        false
    });
    markers
}

/// The JSON name serde gives the field under `rename_all = "camelCase"`, or its `rename`.
fn json_name(field: &Field, ident: &Ident, errors: &mut Errors) -> String {
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("serde")) {
        for meta in nested_metas(attr) {
            if meta.path().is_ident("rename") {
                match string_value(&meta) {
                    Some(name) => return name,
                    None => errors.push(syn::Error::new_spanned(
                        &meta,
                        "use a single `rename = \"name\"` on this field: the generated schema rules need one JSON name",
                    )),
                }
            }
        }
    }
    camel_case(&ident.to_string())
}

/// serde's `camelCase` rename rule for a field, as serde implements it (the schema paths and CEL
/// rules must name exactly what serde writes).
fn camel_case(field: &str) -> String {
    let field = field.strip_prefix("r#").unwrap_or(field);
    let mut pascal = String::with_capacity(field.len());
    let mut capitalize = true;
    for ch in field.chars() {
        if ch == '_' {
            capitalize = true;
        } else if capitalize {
            pascal.push(ch.to_ascii_uppercase());
            capitalize = false;
        } else {
            pascal.push(ch);
        }
    }
    let mut chars = pascal.chars();
    chars
        .next()
        .map(|first| first.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

fn nested_metas(attr: &Attribute) -> Vec<Meta> {
    attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
        .map(|p| p.into_iter().collect())
        .unwrap_or_default()
}

fn string_value(meta: &Meta) -> Option<String> {
    match meta {
        Meta::NameValue(nv) => match &nv.value {
            Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}

fn derive_paths(attr: &Attribute) -> Vec<Path> {
    attr.parse_args_with(Punctuated::<Path, Token![,]>::parse_terminated)
        .map(|p| p.into_iter().collect())
        .unwrap_or_default()
}

fn last_ident(path: &Path) -> String {
    path.segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default()
}

fn derives(attrs: &[Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .flat_map(derive_paths)
        .map(|p| last_ident(&p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::camel_case;

    #[test]
    fn camel_case_matches_serde() {
        assert_eq!(camel_case("pytorch_replica_specs"), "pytorchReplicaSpecs");
        assert_eq!(camel_case("tf_replica_specs"), "tfReplicaSpecs");
        assert_eq!(camel_case("run_policy"), "runPolicy");
        assert_eq!(camel_case("r#type"), "type");
        assert_eq!(camel_case("nproc_per_node"), "nprocPerNode");
    }
}
