//! `cairn metadata functions -json`: every built-in function's signature, in the document
//! `terraform metadata functions -json` prints (`format_version` "1.0", `function_signatures`
//! keyed by name, each with `description`, `return_type`, `parameters` and
//! `variadic_parameter`), and every function again under `core::`, as Terraform lists them.
//!
//! Decisions:
//! - The signatures are the library's own (`eval::functions::signatures`): parameter names,
//!   types and nullability are what the evaluator checks calls against, so the document
//!   cannot drift from the functions.
//! - Without `-json`, Terraform's error and exit 1 (the command has no human form).

use super::args::MetadataFunctionsArgs;
use super::output::Exit;
use super::Context;
use crate::eval::functions::{signatures, SigParam, Signature};
use crate::provider::schema_json::{go_json, type_json};
use serde_json::{json, Map, Value as J};

pub(crate) fn functions(ctx: &Context, a: &MetadataFunctionsArgs) -> Exit {
    if !a.json {
        ctx.err(
            "The `cairn metadata functions` command requires the `-json` flag.\n\n\
             Usage: cairn metadata functions -json\n\n  Prints out a json representation of \
             the available function signatures.\n",
        );
        return Exit::Error;
    }
    ctx.out(&format!("{}\n", go_json(&document())));
    Exit::Ok
}

/// The whole document (see the module docs).
fn document() -> J {
    let mut all: Vec<(String, J)> = Vec::new();
    for (name, sig) in signatures() {
        let j = signature_json(&sig);
        all.push((format!("core::{name}"), j.clone()));
        all.push((name.to_string(), j));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let mut doc = Map::new();
    doc.insert("format_version".into(), json!("1.0"));
    doc.insert(
        "function_signatures".into(),
        J::Object(all.into_iter().collect()),
    );
    J::Object(doc)
}

fn signature_json(s: &Signature) -> J {
    let mut out = Map::new();
    if !s.description.is_empty() {
        out.insert("description".into(), json!(s.description));
    }
    out.insert("return_type".into(), type_json(&s.ret));
    if !s.params.is_empty() {
        out.insert(
            "parameters".into(),
            J::Array(s.params.iter().map(param_json).collect()),
        );
    }
    if let Some(v) = &s.variadic {
        out.insert("variadic_parameter".into(), param_json(v));
    }
    J::Object(out)
}

fn param_json(p: &SigParam) -> J {
    let mut out = Map::new();
    out.insert("name".into(), json!(p.name));
    if !p.description.is_empty() {
        out.insert("description".into(), json!(p.description));
    }
    if p.nullable {
        out.insert("is_nullable".into(), json!(true));
    }
    out.insert("type".into(), type_json(&p.ty));
    J::Object(out)
}
