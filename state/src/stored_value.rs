//! The stored form of values: what state holds for attributes, data results and outputs.
//!
//! It has no "unknown": state never holds an unknown, by type. Numbers are kept as their exact
//! decimal text so arbitrary-precision values survive a round trip. Nulls lose their type (the
//! schema gives it back on load).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

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
    Map(ValueMap),
    Object(ValueMap),
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

/// The attributes of an object or the elements of a map: entries sorted by key, without
/// duplicates, in one allocation. A state holds one per object, most of them a handful of
/// attributes: a `BTreeMap` node takes room for eleven entries whatever the count (about 640
/// bytes), this takes the entries it has (issue 31). Read like a `BTreeMap`: `get`, `iter`
/// (in key order), `keys`, `values`, `len`; built from any iterator of entries (a later
/// duplicate key wins, as in `BTreeMap`), or from a `BTreeMap`. Serialized as a map, as the
/// `BTreeMap` it replaced was.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ValueMap(Box<[(String, StoredValue)]>);

impl ValueMap {
    pub fn new() -> ValueMap {
        ValueMap::default()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn index(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&StoredValue> {
        self.index(key).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut StoredValue> {
        self.index(key).ok().map(|i| &mut self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.index(key).is_ok()
    }

    /// Sets `key` (a new entry reallocates: build maps whole where you can).
    pub fn insert(&mut self, key: String, value: StoredValue) -> Option<StoredValue> {
        match self.index(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                let mut v = std::mem::take(&mut self.0).into_vec();
                v.insert(i, (key, value));
                self.0 = v.into_boxed_slice();
                None
            }
        }
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) -> Option<StoredValue> {
        let i = self.index(key).ok()?;
        let mut v = std::mem::take(&mut self.0).into_vec();
        let (_, value) = v.remove(i);
        self.0 = v.into_boxed_slice();
        Some(value)
    }

    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.iter())
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &StoredValue> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut StoredValue> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, v)| v)
    }

    /// Entries already sorted by key without duplicates (as the checkpoint and record
    /// decoders meet them) are taken as they are; anything else is sorted.
    pub(crate) fn from_vec(mut v: Vec<(String, StoredValue)>) -> ValueMap {
        if !v.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable: of equal keys the later stays last, and wins.
            v.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out: Vec<(String, StoredValue)> = Vec::with_capacity(v.len());
            for e in v {
                match out.last_mut() {
                    Some(last) if last.0 == e.0 => *last = e,
                    _ => out.push(e),
                }
            }
            v = out;
        }
        ValueMap(v.into_boxed_slice())
    }
}

/// The entries of a [`ValueMap`] in key order, as `(&key, &value)`.
#[derive(Clone)]
pub struct Iter<'a>(std::slice::Iter<'a, (String, StoredValue)>);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a StoredValue);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k, v))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a ValueMap {
    type Item = (&'a String, &'a StoredValue);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for ValueMap {
    type Item = (String, StoredValue);
    type IntoIter = std::vec::IntoIter<(String, StoredValue)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_vec().into_iter()
    }
}

impl FromIterator<(String, StoredValue)> for ValueMap {
    fn from_iter<I: IntoIterator<Item = (String, StoredValue)>>(iter: I) -> ValueMap {
        ValueMap::from_vec(iter.into_iter().collect())
    }
}

impl From<BTreeMap<String, StoredValue>> for ValueMap {
    fn from(m: BTreeMap<String, StoredValue>) -> ValueMap {
        ValueMap(m.into_iter().collect::<Vec<_>>().into_boxed_slice())
    }
}

impl<const N: usize> From<[(String, StoredValue); N]> for ValueMap {
    fn from(entries: [(String, StoredValue); N]) -> ValueMap {
        ValueMap::from_vec(entries.into())
    }
}

impl From<ValueMap> for BTreeMap<String, StoredValue> {
    fn from(m: ValueMap) -> BTreeMap<String, StoredValue> {
        m.into_iter().collect()
    }
}

impl fmt::Debug for ValueMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for ValueMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for ValueMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ValueMap, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = ValueMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<ValueMap, A::Error> {
                let mut v = Vec::with_capacity(a.size_hint().unwrap_or(0).min(4096));
                while let Some(entry) = a.next_entry::<String, StoredValue>()? {
                    v.push(entry);
                }
                Ok(ValueMap::from_vec(v))
            }
        }
        d.deserialize_map(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> StoredValue {
        StoredValue::String(v.into())
    }

    /// A `ValueMap` reads and builds as the `BTreeMap` it replaced: sorted, later duplicates
    /// win, the same serialized form.
    #[test]
    fn value_maps_behave_as_btree_maps() {
        let entries = vec![
            ("b".to_string(), s("1")),
            ("a".to_string(), s("2")),
            ("b".to_string(), s("3")),
            ("c".to_string(), s("4")),
        ];
        let map: ValueMap = entries.clone().into_iter().collect();
        let tree: BTreeMap<String, StoredValue> = entries.into_iter().collect();
        assert_eq!(
            map.iter().collect::<Vec<_>>(),
            tree.iter().collect::<Vec<_>>()
        );
        assert_eq!(map.get("b"), Some(&s("3")));
        assert_eq!(map.get("z"), None);
        assert_eq!(ValueMap::from(tree.clone()), map);
        assert_eq!(
            rmp_serde::to_vec_named(&map).unwrap(),
            rmp_serde::to_vec_named(&tree).unwrap()
        );
        let back: ValueMap =
            rmp_serde::from_slice(&rmp_serde::to_vec_named(&tree).unwrap()).unwrap();
        assert_eq!(back, map);
        assert_eq!(format!("{map:?}"), format!("{tree:?}"));
        let mut m = map.clone();
        assert_eq!(m.insert("0".into(), s("x")), None);
        assert_eq!(m.insert("a".into(), s("y")), Some(s("2")));
        assert_eq!(m.remove("c"), Some(s("4")));
        assert_eq!(
            m.keys().map(String::as_str).collect::<Vec<_>>(),
            ["0", "a", "b"]
        );
    }
}
