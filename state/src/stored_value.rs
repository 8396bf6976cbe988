//! The stored form of values: what state holds for attributes, data results and outputs.
//!
//! It has no "unknown": state never holds an unknown, by type. Numbers are kept as their exact
//! decimal text so arbitrary-precision values survive a round trip. Nulls lose their type (the
//! schema gives it back on load).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredValue {
    Null,
    Bool(bool),
    /// Exact decimal text, e.g. `"3"`, `"-0.5"`, `"9007199254740993"`.
    Number(String),
    String(String),
    List(Vec<StoredValue>),
    /// Elements in canonical order, without duplicates.
    Set(Vec<StoredValue>),
    Tuple(Vec<StoredValue>),
    Map(BTreeMap<String, StoredValue>),
    Object(BTreeMap<String, StoredValue>),
    /// A value marked sensitive.
    Sensitive(Box<StoredValue>),
}

impl StoredValue {
    /// Attribute `name` of an object or map value.
    pub fn get(&self, name: &str) -> Option<&StoredValue> {
        match self {
            StoredValue::Object(m) | StoredValue::Map(m) => m.get(name),
            StoredValue::Sensitive(v) => v.get(name),
            _ => None,
        }
    }

    /// The value as plain JSON (sensitivity dropped, numbers as JSON numbers where they fit).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            StoredValue::Null => J::Null,
            StoredValue::Bool(b) => J::Bool(*b),
            StoredValue::Number(n) => {
                if let Ok(i) = n.parse::<i64>() {
                    J::from(i)
                } else if let Some(f) = n.parse::<f64>().ok().and_then(serde_json::Number::from_f64)
                {
                    J::Number(f)
                } else {
                    J::String(n.clone())
                }
            }
            StoredValue::String(s) => J::String(s.clone()),
            StoredValue::List(v) | StoredValue::Set(v) | StoredValue::Tuple(v) => {
                J::Array(v.iter().map(|x| x.to_json()).collect())
            }
            StoredValue::Map(m) | StoredValue::Object(m) => {
                J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            StoredValue::Sensitive(v) => v.to_json(),
        }
    }

    /// Best-effort reading of plain JSON: arrays become tuples, objects become objects.
    pub fn from_json(j: &serde_json::Value) -> StoredValue {
        use serde_json::Value as J;
        match j {
            J::Null => StoredValue::Null,
            J::Bool(b) => StoredValue::Bool(*b),
            J::Number(n) => StoredValue::Number(n.to_string()),
            J::String(s) => StoredValue::String(s.clone()),
            J::Array(a) => StoredValue::Tuple(a.iter().map(StoredValue::from_json).collect()),
            J::Object(o) => StoredValue::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), StoredValue::from_json(v)))
                    .collect(),
            ),
        }
    }
}
