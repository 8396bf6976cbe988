//! Test helpers shared by the built-in providers' unit tests: building configuration objects
//! and driving a configured provider through plan → apply as the engine does.

use super::{ApplyRequest, Configured, Planned, Provider};
use crate::value::Value;
use std::sync::Arc;

pub(crate) fn s(x: &str) -> Value {
    Value::string(x)
}

pub(crate) fn obj(pairs: &[(&str, Value)]) -> Value {
    Value::object(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())))
}

pub(crate) fn map(pairs: &[(&str, &str)]) -> Value {
    Value::Map(pairs.iter().map(|(k, v)| (k.to_string(), s(v))).collect())
}

/// A string attribute of an object (panics in tests when missing).
pub(crate) fn attr<'a>(v: &'a Value, name: &str) -> &'a str {
    v.get(name)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("attribute {name} is not a known string in {v:?}"))
}

pub(crate) async fn configure(p: &dyn Provider) -> Arc<dyn Configured> {
    p.configure(&obj(&[])).await.expect("configure")
}

/// Plans a create and applies it; returns the plan and the new state.
pub(crate) async fn create(p: &dyn Configured, type_: &str, config: &Value) -> (Planned, Value) {
    let planned = p.plan(type_, None, config).expect("plan");
    let r = p
        .apply(ApplyRequest::Create {
            type_: type_.into(),
            planned: planned.planned.clone(),
            token: "tok".into(),
        })
        .await;
    assert_eq!(r.error, None, "create of {type_} failed");
    (planned, r.new_state.expect("new state"))
}

/// Asserts that every value the plan knew is in the new state (the engine's contract check).
pub(crate) fn assert_agrees(planned: &Value, new: &Value) {
    let (Some(p), Some(n)) = (planned.attributes(), new.attributes()) else {
        panic!("not objects: {planned:?} {new:?}");
    };
    for (k, v) in p {
        if v.is_wholly_known() {
            assert!(
                super::schema_util::same(v, &n[k]),
                "{k}: planned {v:?}, got {:?}",
                n[k]
            );
        }
    }
    assert!(new.is_wholly_known(), "apply left unknowns: {new:?}");
}
