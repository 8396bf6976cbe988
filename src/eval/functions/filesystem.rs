//! filesystem functions (being written).

use super::Def;

pub(super) const DEFS: &[Def] = &[];

/// Evaluates a template: `(source, variables) -> value or message`. Set once by the evaluator.
pub type TemplateEvaluator = fn(
    &str,
    &std::collections::BTreeMap<String, crate::value::Value>,
) -> Result<crate::value::Value, String>;
/// The template evaluator `templatefile` uses.
pub static TEMPLATE_EVALUATOR: std::sync::OnceLock<TemplateEvaluator> = std::sync::OnceLock::new();
