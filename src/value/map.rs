//! `ValueMap`: the attributes of an object value or the elements of a map value, in key order.
//!
//! A sorted vector (ICU4X's `LiteMap`) behind the part of `BTreeMap`'s interface the engine
//! uses. Nearly every object has a handful of attributes, and a `BTreeMap`'s node has room for
//! eleven: about 800 bytes for an object of four attributes, once per copy of every value
//! (issue 31). Lookups are a binary search; inserting in key order appends, and building from an
//! iterator or extending sorts once, so a map of many elements costs no more than the tree did.
//! Only `insert` (and `entry`) of keys out of order moves the elements after it: code that
//! builds a large map in no particular order builds a `BTreeMap` and converts it (`From`).

use litemap::store::{StoreIterable, StoreIterableMut};
use litemap::LiteMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;

use super::Value;

#[derive(Clone, Default, PartialEq, PartialOrd)]
pub struct ValueMap(LiteMap<String, Value>);

impl ValueMap {
    pub const fn new() -> Self {
        ValueMap(LiteMap::new())
    }
    pub fn with_capacity(n: usize) -> Self {
        ValueMap(LiteMap::with_capacity(n))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&Value>
    where
        String: Borrow<Q>,
    {
        self.0.get(key)
    }
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut Value>
    where
        String: Borrow<Q>,
    {
        self.0.get_mut(key)
    }
    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        String: Borrow<Q>,
    {
        self.0.contains_key(key)
    }
    /// As `BTreeMap::insert`: the previous value of the key, if any.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        self.0.insert(key, value)
    }
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<Value>
    where
        String: Borrow<Q>,
    {
        self.0.remove(key)
    }
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut Value) -> bool) {
        let mut pairs = std::mem::take(&mut self.0).into_tuple_vec();
        pairs.retain_mut(|(k, v)| keep(k, v));
        self.0 = LiteMap::from_sorted_store_unchecked(pairs);
    }
    pub fn iter(&self) -> <&ValueMap as IntoIterator>::IntoIter {
        self.0.iter()
    }
    pub fn iter_mut(&mut self) -> <&mut ValueMap as IntoIterator>::IntoIter {
        self.0.iter_mut()
    }
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, v)| v)
    }
    pub fn into_keys(self) -> impl DoubleEndedIterator<Item = String> + ExactSizeIterator {
        self.0.into_tuple_vec().into_iter().map(|(k, _)| k)
    }
    pub fn into_values(self) -> impl DoubleEndedIterator<Item = Value> + ExactSizeIterator {
        self.0.into_tuple_vec().into_iter().map(|(_, v)| v)
    }
    pub fn first_key_value(&self) -> Option<(&String, &Value)> {
        self.0.first()
    }
    pub fn last_key_value(&self) -> Option<(&String, &Value)> {
        self.0.last()
    }
    /// As `BTreeMap::entry`.
    pub fn entry(&mut self, key: String) -> Entry<'_> {
        match self.0.find_index(&key) {
            Ok(index) => Entry::Occupied(OccupiedEntry { map: self, index }),
            Err(_) => Entry::Vacant(VacantEntry { map: self, key }),
        }
    }
    /// As `BTreeMap::append`: moves every element of `other` into `self` (`other`'s value
    /// wins for a key both have).
    pub fn append(&mut self, other: &mut ValueMap) {
        self.extend(std::mem::take(other));
    }
    fn value_at(&mut self, index: usize) -> &mut Value {
        let (_, v) = self
            .0
            .iter_mut()
            .nth(index)
            .expect("an entry's index is in bounds");
        v
    }
}

/// A key's place in a [`ValueMap`], as `btree_map::Entry`.
pub enum Entry<'a> {
    Occupied(OccupiedEntry<'a>),
    Vacant(VacantEntry<'a>),
}

pub struct OccupiedEntry<'a> {
    map: &'a mut ValueMap,
    index: usize,
}

pub struct VacantEntry<'a> {
    map: &'a mut ValueMap,
    key: String,
}

impl<'a> Entry<'a> {
    pub fn or_insert(self, default: Value) -> &'a mut Value {
        self.or_insert_with(|| default)
    }
    pub fn or_insert_with(self, default: impl FnOnce() -> Value) -> &'a mut Value {
        match self {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(default()),
        }
    }
    pub fn and_modify(self, f: impl FnOnce(&mut Value)) -> Self {
        match self {
            Entry::Occupied(mut e) => {
                f(e.get_mut());
                Entry::Occupied(e)
            }
            e => e,
        }
    }
}

impl<'a> OccupiedEntry<'a> {
    pub fn get(&self) -> &Value {
        self.map.0.get_indexed(self.index).expect("in bounds").1
    }
    pub fn get_mut(&mut self) -> &mut Value {
        self.map.value_at(self.index)
    }
    pub fn into_mut(self) -> &'a mut Value {
        self.map.value_at(self.index)
    }
    pub fn insert(&mut self, value: Value) -> Value {
        std::mem::replace(self.get_mut(), value)
    }
}

impl<'a> VacantEntry<'a> {
    pub fn insert(self, value: Value) -> &'a mut Value {
        let VacantEntry { map, key } = self;
        let index = match map.0.find_index(&key) {
            Ok(i) | Err(i) => i,
        };
        map.0.insert(key, value);
        map.value_at(index)
    }
}

impl std::fmt::Debug for ValueMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.0.iter()).finish()
    }
}

impl<Q: Ord + ?Sized> std::ops::Index<&Q> for ValueMap
where
    String: Borrow<Q>,
{
    type Output = Value;
    fn index(&self, key: &Q) -> &Value {
        self.get(key).expect("no entry found for key")
    }
}

impl FromIterator<(String, Value)> for ValueMap {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        // LiteMap sorts once (a later pair wins for a key twice, as a BTreeMap's collect);
        // the vector is then cut to its length: values live long, and most are small.
        let mut pairs = LiteMap::<String, Value>::from_iter(iter).into_tuple_vec();
        pairs.shrink_to_fit();
        ValueMap(LiteMap::from_sorted_store_unchecked(pairs))
    }
}

impl<const N: usize> From<[(String, Value); N]> for ValueMap {
    fn from(pairs: [(String, Value); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl Extend<(String, Value)> for ValueMap {
    /// As `BTreeMap::extend` (a later pair wins), sorting once rather than inserting each.
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        self.0.extend(iter)
    }
}

impl IntoIterator for ValueMap {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_tuple_vec().into_iter()
    }
}

type Pairs = Vec<(String, Value)>;

impl<'a> IntoIterator for &'a ValueMap {
    type Item = (&'a String, &'a Value);
    type IntoIter = <Pairs as StoreIterable<'a, String, Value>>::KeyValueIter;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut ValueMap {
    type Item = (&'a String, &'a mut Value);
    type IntoIter = <Pairs as StoreIterableMut<'a, String, Value>>::KeyValueIterMut;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

impl Serialize for ValueMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter())
    }
}

impl<'de> Deserialize<'de> for ValueMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs = std::collections::BTreeMap::<String, Value>::deserialize(d)?;
        Ok(pairs.into_iter().collect())
    }
}

impl From<std::collections::BTreeMap<String, Value>> for ValueMap {
    fn from(map: std::collections::BTreeMap<String, Value>) -> Self {
        // Already in key order, without duplicates.
        let mut pairs: Vec<_> = map.into_iter().collect();
        pairs.shrink_to_fit();
        ValueMap(LiteMap::from_sorted_store_unchecked(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::string(x)
    }

    #[test]
    fn keeps_key_order_and_the_later_value_as_a_btree_map_does() {
        let mut m: ValueMap = [
            ("b".into(), s("1")),
            ("a".into(), s("2")),
            ("b".into(), s("3")),
        ]
        .into_iter()
        .collect();
        assert_eq!(m.keys().cloned().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(m["b"], s("3"));
        assert_eq!(m.insert("a".into(), s("4")), Some(s("2")));
        assert_eq!(m.insert("0".into(), s("5")), None);
        m.extend([("z".into(), s("6")), ("a".into(), s("7"))]);
        let pairs: Vec<_> = m.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        assert_eq!(
            pairs,
            [("0", s("5")), ("a", s("7")), ("b", s("3")), ("z", s("6"))]
        );
        m.retain(|k, _| k != "a");
        assert_eq!(m.len(), 3);
        assert_eq!(m.remove("0"), Some(s("5")));
        assert!(!m.contains_key("0"));
    }

    #[test]
    fn entry_inserts_in_place_or_finds_the_value() {
        let mut m = ValueMap::from([("m".to_string(), s("1"))]);
        *m.entry("a".into()).or_insert_with(|| s("x")) = s("2");
        m.entry("m".into())
            .and_modify(|v| *v = s("3"))
            .or_insert(s("y"));
        assert!(matches!(m.entry("m".into()), Entry::Occupied(e) if *e.get() == s("3")));
        assert_eq!(
            m.into_iter().collect::<Vec<_>>(),
            [("a".into(), s("2")), ("m".into(), s("3"))]
        );
    }

    #[test]
    fn serializes_as_the_map_it_replaced() {
        let m = ValueMap::from([("b".to_string(), s("1")), ("a".to_string(), s("2"))]);
        let tree: std::collections::BTreeMap<String, Value> =
            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let json = serde_json::to_string(&tree).unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), json);
        let back: ValueMap = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }
}
