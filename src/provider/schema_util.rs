//! Shared machinery of the built-in providers: a schema builder, conversion of configuration
//! objects to a schema's types, the one schema-driven `plan` every built-in resource uses, and
//! small validation helpers — so that each provider file only says what is special about it.
//!
//! The generic plan (`TypeSchema::plan`) follows what Terraform's SDK does for a resource:
//! - configured values are kept as they are (marks included): a plan must keep them;
//! - an unset argument with a default gets the default (before anything is compared, so a
//!   default never looks like a change);
//! - a `force_new` argument whose value differs from the prior state (or is unknown) forces
//!   replacement and is named in `requires_replace` (a prior null where the schema has a
//!   default counts as the default: the object predates the argument);
//! - computed attributes are unknown on create and on replace; on an in-place update they keep
//!   their prior value, unless one of the arguments declared with `changes_with` changed (then
//!   they are unknown: the provider will compute them again);
//! - optional + computed arguments left unset are unknown on create, and keep their prior value
//!   otherwise.
//!
//! Equality ignores sensitive marks and the types of nulls; an unknown is never equal to
//! anything (it may turn out to differ).

use super::{Planned, ProviderError, ProviderResult};
use crate::diag::{Diagnostic, Diagnostics};
use crate::schema::{Attribute, Block};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A resource type's or data source's schema, plus what the generic plan needs to know beyond
/// `Block`: defaults of optional arguments and which computed attributes change with which
/// arguments.
#[derive(Clone, Debug, Default)]
pub(crate) struct TypeSchema {
    pub(crate) block: Block,
    /// Values of optional arguments left unset.
    pub(crate) defaults: ValueMap,
    /// Computed attribute → the arguments whose change makes it unknown on an update.
    pub(crate) changes_with: BTreeMap<String, Vec<String>>,
    /// The attribute the builder added last; the modifiers apply to it.
    last: Option<String>,
}

impl TypeSchema {
    pub(crate) fn new(description: &str) -> TypeSchema {
        TypeSchema {
            block: Block {
                description: description.to_string(),
                ..Block::default()
            },
            ..Default::default()
        }
    }

    fn attr(mut self, name: &str, ty: Type, kind: (bool, bool, bool), description: &str) -> Self {
        let (required, optional, computed) = kind;
        self.block.attributes.insert(
            name.to_string(),
            Attribute {
                ty,
                required,
                optional,
                computed,
                force_new: false,
                sensitive: false,
                write_only: false,
                description: description.to_string(),
            },
        );
        self.last = Some(name.to_string());
        self
    }

    /// A required argument.
    pub(crate) fn required(self, name: &str, ty: Type, description: &str) -> Self {
        self.attr(name, ty, (true, false, false), description)
    }
    /// An optional argument (null when unset, unless it gets a `default`).
    pub(crate) fn optional(self, name: &str, ty: Type, description: &str) -> Self {
        self.attr(name, ty, (false, true, false), description)
    }
    /// An optional argument the provider computes when it is unset.
    pub(crate) fn optional_computed(self, name: &str, ty: Type, description: &str) -> Self {
        self.attr(name, ty, (false, true, true), description)
    }
    /// An attribute only the provider sets.
    pub(crate) fn computed(self, name: &str, ty: Type, description: &str) -> Self {
        self.attr(name, ty, (false, false, true), description)
    }

    fn last_attr(&mut self) -> Option<&mut Attribute> {
        let name = self.last.clone()?;
        self.block.attributes.get_mut(&name)
    }
    /// The last attribute forces replacement when it changes.
    pub(crate) fn force_new(mut self) -> Self {
        if let Some(a) = self.last_attr() {
            a.force_new = true;
        }
        self
    }
    /// The last attribute is sensitive.
    pub(crate) fn sensitive(mut self) -> Self {
        if let Some(a) = self.last_attr() {
            a.sensitive = true;
        }
        self
    }
    /// The last attribute's value when it is not configured. (Also makes it computed, as
    /// Terraform's SDKs do: the planned value is not the configured null.)
    pub(crate) fn default(mut self, value: Value) -> Self {
        if let Some(name) = self.last.clone() {
            if let Some(a) = self.last_attr() {
                a.computed = true;
            }
            self.defaults.insert(name, value);
        }
        self
    }
    /// The last (computed) attribute becomes unknown on an update that changes one of `inputs`.
    pub(crate) fn changes_with(mut self, inputs: &[&str]) -> Self {
        if let Some(name) = self.last.clone() {
            self.changes_with
                .insert(name, inputs.iter().map(|s| s.to_string()).collect());
        }
        self
    }

    /// The configuration converted to this schema's types, with every attribute present (unset
    /// ones null) and defaults filled in.
    pub(crate) fn conform(&self, config: &Value) -> ProviderResult<ValueMap> {
        let mut out = conform_block(&self.block, config)?;
        for (name, default) in &self.defaults {
            if out.get(name).is_some_and(Value::is_null) {
                out.insert(name.clone(), default.clone());
            }
        }
        Ok(out)
    }

    /// The generic plan described in the module docs.
    pub(crate) fn plan(&self, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        let config = self.conform(config)?;
        let prior = match prior {
            Some(p) if !p.is_null() => Some(conform_block(&self.block, p)?),
            _ => None,
        };
        let is_argument = |a: &Attribute| a.required || a.optional;
        let mut requires_replace = Vec::new();
        let mut changed = BTreeSet::new();
        if let Some(prior) = &prior {
            for (name, attr) in &self.block.attributes {
                if !is_argument(attr) {
                    continue;
                }
                let (mut old, new) = (&prior[name], &config[name]);
                // A prior null where the schema has a default: the object predates the
                // argument (an older state); its default is what it has been using.
                if old.is_null() {
                    if let Some(d) = self.defaults.get(name) {
                        old = d;
                    }
                }
                // An unset optional+computed argument keeps the prior value: not a change.
                if attr.computed && new.is_null() && !self.defaults.contains_key(name) {
                    continue;
                }
                if !same(old, new) {
                    changed.insert(name.clone());
                    if attr.force_new {
                        requires_replace.push(name.clone());
                    }
                }
            }
        }
        let fresh = prior.is_none() || !requires_replace.is_empty();
        // Sized once: a map lives as long as its value, and most are small.
        let mut planned = ValueMap::with_capacity(self.block.attributes.len());
        for (name, attr) in &self.block.attributes {
            let configured = &config[name];
            let prior_value = prior.as_ref().map(|p| p[name].clone());
            let value = if is_argument(attr) && !configured.is_null() {
                configured.clone()
            } else if !attr.computed {
                Value::Null(attr.ty.clone())
            } else if fresh {
                Value::Unknown(attr.ty.clone())
            } else {
                let recompute = self
                    .changes_with
                    .get(name)
                    .is_some_and(|inputs| inputs.iter().any(|i| changed.contains(i)));
                match prior_value {
                    Some(v) if !recompute => v,
                    _ => Value::Unknown(attr.ty.clone()),
                }
            };
            planned.insert(name.clone(), value);
        }
        Ok(Planned {
            planned: Value::Object(planned),
            requires_replace,
            private: Vec::new(),
            warnings: Vec::new(),
        })
    }

    /// Type errors in a configuration, as diagnostics (for `validate`).
    pub(crate) fn check(&self, config: &Value) -> Diagnostics {
        check_block(&self.block, config)
    }
}

/// Type errors in a configuration against a schema block, as diagnostics (what
/// `Provider::validate` reports by default).
pub(crate) fn check_block(block: &Block, config: &Value) -> Diagnostics {
    match conform_block(block, config) {
        Ok(_) => Diagnostics::new(),
        Err(e) => Diagnostic::error("Invalid argument value", e.message).into(),
    }
}

/// Converts an object to the block's attribute types. Missing attributes become typed nulls;
/// attributes the block does not have are dropped (the engine has already reported them).
pub(crate) fn conform_block(block: &Block, value: &Value) -> ProviderResult<ValueMap> {
    let attrs = match value.unmarked() {
        Value::Object(m) | Value::Map(m) => Some(m),
        Value::Null(_) | Value::Unknown(_) => None,
        other => {
            return Err(ProviderError(format!(
                "expected an object, got {}",
                other.type_of()
            )))
        }
    };
    let whole_unknown = value.is_unknown();
    let mut out = ValueMap::with_capacity(block.attributes.len());
    for (name, attr) in &block.attributes {
        let v = match attrs.and_then(|m| m.get(name)) {
            Some(v) => convert(v, &attr.ty).map_err(|e| {
                ProviderError(format!(
                    "Inappropriate value for attribute \"{name}\": {e}."
                ))
            })?,
            None if whole_unknown => Value::Unknown(attr.ty.clone()),
            None => Value::Null(attr.ty.clone()),
        };
        out.insert(name.clone(), v);
    }
    Ok(out)
}

/// Converts a value to a type the way Terraform converts arguments: numbers and bools to
/// strings and back, tuples to lists and sets, objects to maps. Marks, nulls and unknowns are
/// kept (typed).
pub(crate) fn convert(v: &Value, ty: &Type) -> Result<Value, String> {
    let what = |t: &Type| match t {
        Type::List(e) => format!("list of {e} required"),
        Type::Set(e) => format!("set of {e} required"),
        Type::Map(e) => format!("map of {e} required"),
        t => format!("{t} required"),
    };
    Ok(match v {
        Value::Sensitive(inner) => convert(inner, ty)?.sensitive(),
        Value::Null(_) => Value::Null(ty.clone()),
        Value::Unknown(_) => Value::Unknown(ty.clone()),
        _ if *ty == Type::Dynamic => v.clone(),
        _ => match (ty, v) {
            (Type::String, Value::String(_)) => v.clone(),
            (Type::String, Value::Number(n)) => Value::String(n.to_string()),
            (Type::String, Value::Bool(b)) => Value::String(b.to_string()),
            (Type::Number, Value::Number(_)) => v.clone(),
            (Type::Number, Value::String(s)) => Value::Number(s.parse().map_err(|_| what(ty))?),
            (Type::Bool, Value::Bool(_)) => v.clone(),
            (Type::Bool, Value::String(s)) if s == "true" || s == "false" => {
                Value::Bool(s == "true")
            }
            (Type::List(e), Value::List(xs) | Value::Tuple(xs) | Value::Set(xs)) => {
                Value::List(xs.iter().map(|x| convert(x, e)).collect::<Result<_, _>>()?)
            }
            (Type::Set(e), Value::List(xs) | Value::Tuple(xs) | Value::Set(xs)) => {
                Value::set(xs.iter().map(|x| convert(x, e)).collect::<Result<_, _>>()?)
            }
            (Type::Map(e), Value::Map(m) | Value::Object(m)) => Value::Map(
                m.iter()
                    .map(|(k, x)| Ok((k.clone(), convert(x, e)?)))
                    .collect::<Result<_, String>>()?,
            ),
            (Type::Object(attrs, _), Value::Map(m) | Value::Object(m)) => Value::Object(
                attrs
                    .iter()
                    .map(|(k, t)| {
                        let x = m.get(k).cloned().unwrap_or(Value::Null(t.clone()));
                        Ok((k.clone(), convert(&x, t)?))
                    })
                    .collect::<Result<_, String>>()?,
            ),
            (Type::Tuple(ts), Value::List(xs) | Value::Tuple(xs)) if ts.len() == xs.len() => {
                Value::Tuple(
                    xs.iter()
                        .zip(ts)
                        .map(|(x, t)| convert(x, t))
                        .collect::<Result<_, _>>()?,
                )
            }
            _ => return Err(what(ty)),
        },
    })
}

/// Equality for plan decisions: ignores marks and the types of nulls; unknown is never equal.
pub fn same(a: &Value, b: &Value) -> bool {
    let (a, b) = (a.unmarked(), b.unmarked());
    match (a, b) {
        (Value::Unknown(_), _) | (_, Value::Unknown(_)) => false,
        (Value::Null(_), Value::Null(_)) => true,
        (
            Value::List(x) | Value::Tuple(x) | Value::Set(x),
            Value::List(y) | Value::Tuple(y) | Value::Set(y),
        ) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Map(x) | Value::Object(x), Value::Map(y) | Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kp, p), (kq, q))| kp == kq && same(p, q))
        }
        (Value::Number(x), Value::Number(y)) => x.0 == y.0,
        _ => a == b,
    }
}

// ------------------------------------------------------------------------------------------
// Reading attributes out of a conformed object.

/// A known string attribute (marks ignored); `None` when null or unknown.
pub(crate) fn get_str<'a>(obj: &'a ValueMap, name: &str) -> Option<&'a str> {
    obj.get(name).and_then(|v| v.as_str())
}

/// A known integer attribute; `None` when null, unknown or not an integer.
pub(crate) fn get_i64(obj: &ValueMap, name: &str) -> Option<i64> {
    obj.get(name)
        .and_then(|v| v.as_number())
        .and_then(|n| n.to_i64())
}

/// A known bool attribute; `None` when null or unknown.
pub(crate) fn get_bool(obj: &ValueMap, name: &str) -> Option<bool> {
    obj.get(name).and_then(|v| v.as_bool())
}

/// A required string attribute of a wholly known configuration (apply, read_data).
pub(crate) fn need_str<'a>(obj: &'a ValueMap, name: &str) -> ProviderResult<&'a str> {
    get_str(obj, name).ok_or_else(|| ProviderError(format!("argument \"{name}\" must be set")))
}

/// True when the attribute is set to a known, non-null value or is unknown (it may be set).
pub(crate) fn is_set_or_unknown(obj: &ValueMap, name: &str) -> bool {
    obj.get(name).is_some_and(|v| !v.is_null())
}

// ------------------------------------------------------------------------------------------
// Validation helpers: each returns diagnostics with a summary and a detail saying what to do.

/// Exactly one of `names` must be set. Unknown counts as set.
pub(crate) fn exactly_one_of(obj: &ValueMap, names: &[&str]) -> Diagnostics {
    let set: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| is_set_or_unknown(obj, n))
        .collect();
    let list = names.join(", ");
    match set.len() {
        1 => Diagnostics::new(),
        0 => Diagnostic::error(
            "Invalid attribute combination",
            format!("Exactly one of these arguments must be set: {list}. None is."),
        )
        .into(),
        _ => Diagnostic::error(
            "Invalid attribute combination",
            format!(
                "Exactly one of these arguments must be set: {list}. These are all set: {}.",
                set.join(", ")
            ),
        )
        .into(),
    }
}

/// A known integer attribute must lie in `min..=max` (unset and unknown pass).
pub(crate) fn int_in_range(obj: &ValueMap, name: &str, min: i64, max: Option<i64>) -> Diagnostics {
    let Some(v) = obj.get(name).filter(|v| !v.is_null() && !v.is_unknown()) else {
        return Diagnostics::new();
    };
    let n = v.as_number();
    let ok = n
        .and_then(|n| n.to_i64())
        .is_some_and(|i| i >= min && max.is_none_or(|m| i <= m));
    if ok {
        return Diagnostics::new();
    }
    let shown = n.map(|n| n.to_string()).unwrap_or_default();
    let range = match max {
        Some(m) => format!("a whole number between {min} and {m}"),
        None => format!("a whole number of at least {min}"),
    };
    Diagnostic::error(
        "Invalid attribute value",
        format!("Argument \"{name}\" must be {range}, got: {shown}."),
    )
    .into()
}

/// An error diagnostic for an unknown type name (the engine normally catches these first).
pub(crate) fn unknown_type(package: &str, kind: &str, type_: &str) -> ProviderError {
    ProviderError(format!(
        "{package}: the provider has no {kind} type \"{type_}\""
    ))
}

/// `validate`'s answer for a type the package does not have.
pub(crate) fn unsupported_type(package: &str, type_: &str) -> Diagnostics {
    Diagnostic::error(
        "Unsupported type",
        unknown_type(package, "such", type_).message,
    )
    .into()
}

/// Fills the computed attributes of a data source's result object: configured arguments kept,
/// `computed` values from the provider, everything else null.
pub(crate) fn data_result(schema: &TypeSchema, config: &ValueMap, computed: ValueMap) -> Value {
    let mut out = ValueMap::new();
    for (name, attr) in &schema.block.attributes {
        let v = computed
            .get(name)
            .cloned()
            .or_else(|| config.get(name).filter(|v| !v.is_null()).cloned())
            .unwrap_or_else(|| Value::Null(attr.ty.clone()));
        out.insert(name.clone(), v);
    }
    Value::Object(out)
}

/// Deep-unmarked, wholly-known check for apply/read_data inputs.
pub(crate) fn require_known(v: &Value, what: &str) -> ProviderResult<()> {
    match v.unknown_paths().first() {
        None => Ok(()),
        Some(p) => Err(ProviderError(format!(
            "{what} holds an unknown value at {}",
            if p.is_empty() { "the top level" } else { p }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TypeSchema {
        TypeSchema::new("test")
            .required("name", Type::String, "")
            .force_new()
            .optional("value", Type::String, "")
            .optional("mode", Type::String, "")
            .default(Value::string("0777"))
            .optional_computed("zone", Type::String, "")
            .computed("id", Type::String, "")
            .computed("out", Type::String, "")
            .changes_with(&["value"])
    }

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::object(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())))
    }

    fn s(x: &str) -> Value {
        Value::string(x)
    }

    fn unk() -> Value {
        Value::Unknown(Type::String)
    }

    #[test]
    fn create_keeps_config_defaults_and_unknown_computed() {
        let p = schema()
            .plan(None, &obj(&[("name", s("a")), ("value", Value::int(3))]))
            .unwrap();
        assert_eq!(
            p.planned,
            obj(&[
                ("id", unk()),
                ("mode", s("0777")),
                ("name", s("a")),
                ("out", unk()),
                ("value", s("3")),
                ("zone", unk()),
            ])
        );
        assert!(p.requires_replace.is_empty());
    }

    #[test]
    fn update_keeps_computed_unless_inputs_change() {
        let prior = obj(&[
            ("id", s("a-1")),
            ("mode", s("0777")),
            ("name", s("a")),
            ("out", s("a/1")),
            ("value", s("1")),
            ("zone", s("z")),
        ]);
        let same_cfg = obj(&[("name", s("a")), ("value", s("1"))]);
        let p = schema().plan(Some(&prior), &same_cfg).unwrap();
        assert_eq!(p.planned, prior);
        let changed = obj(&[("name", s("a")), ("value", s("2"))]);
        let p = schema().plan(Some(&prior), &changed).unwrap();
        assert_eq!(p.planned.get("out"), Some(&unk()));
        assert_eq!(p.planned.get("id"), Some(&s("a-1")));
        assert_eq!(p.planned.get("zone"), Some(&s("z")));
        let mut older = prior.attributes().cloned().unwrap_or_default();
        older.insert("mode".into(), Value::null());
        let p = schema()
            .plan(Some(&Value::Object(older)), &same_cfg)
            .unwrap();
        assert!(
            p.requires_replace.is_empty(),
            "a missing defaulted attribute is not a change"
        );
        assert_eq!(p.planned, prior);
        let renamed = obj(&[("name", s("b")), ("value", s("1"))]);
        let p = schema().plan(Some(&prior), &renamed).unwrap();
        assert_eq!(p.requires_replace, vec!["name".to_string()]);
        assert_eq!(p.planned.get("id"), Some(&unk()));
        let unknown_name = obj(&[("name", unk()), ("value", s("1"))]);
        let p = schema().plan(Some(&prior), &unknown_name).unwrap();
        assert_eq!(p.requires_replace, vec!["name".to_string()]);
    }

    #[test]
    fn conversion_errors_name_the_attribute() {
        let e = schema()
            .plan(None, &obj(&[("name", Value::List(vec![]))]))
            .unwrap_err();
        assert_eq!(
            e.message,
            "Inappropriate value for attribute \"name\": string required."
        );
    }

    #[test]
    fn exactly_one_of_reports_none_and_many() {
        let m = schema().conform(&obj(&[("name", s("a"))])).unwrap();
        assert!(exactly_one_of(&m, &["name", "value"]).is_empty());
        assert_eq!(exactly_one_of(&m, &["value", "zone"]).error_count(), 1);
        let m = schema()
            .conform(&obj(&[("name", s("a")), ("value", unk())]))
            .unwrap();
        let d = exactly_one_of(&m, &["name", "value"]);
        assert!(d.0[0].detail.contains("These are all set: name, value"));
    }
}
