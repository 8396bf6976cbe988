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
use std::sync::Arc;

use super::Value;

type Pairs = Vec<(String, Value)>;
type Inner = LiteMap<String, Value>;

/// The map's pairs, shared: a copy of a value shares its maps (an `Arc`'s count), and the
/// first change to a shared map copies it (`Arc::make_mut`). The engine copies values from one
/// place to the next (the walk's values, the plan's change, a provider's request), and a no-op
/// plan's planned value is its prior one: each such copy costs nothing. `None` is the empty
/// map (no allocation).
#[derive(Clone, Default)]
pub struct ValueMap(Option<Arc<Inner>>);

static EMPTY: Inner = LiteMap::new();

impl ValueMap {
    pub const fn new() -> Self {
        ValueMap(None)
    }
    pub fn with_capacity(n: usize) -> Self {
        ValueMap((n > 0).then(|| Arc::new(LiteMap::with_capacity(n))))
    }
    fn inner(&self) -> &Inner {
        self.0.as_deref().unwrap_or(&EMPTY)
    }
    fn inner_mut(&mut self) -> &mut Inner {
        Arc::make_mut(self.0.get_or_insert_with(Default::default))
    }
    /// The pairs, moved out when this is the map's only holder, else copied.
    fn into_pairs(self) -> Pairs {
        match self.0 {
            None => Vec::new(),
            Some(a) => Arc::try_unwrap(a)
                .unwrap_or_else(|a| (*a).clone())
                .into_tuple_vec(),
        }
    }
    /// From pairs in key order without duplicates, cut to their length.
    fn from_sorted(mut pairs: Pairs) -> Self {
        if pairs.is_empty() {
            return ValueMap(None);
        }
        pairs.shrink_to_fit();
        ValueMap(Some(Arc::new(LiteMap::from_sorted_store_unchecked(pairs))))
    }
    /// True when both are the same shared map (then they are equal without a look inside).
    pub fn ptr_eq(&self, other: &ValueMap) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
    pub fn len(&self) -> usize {
        self.inner().len()
    }
    pub fn is_empty(&self) -> bool {
        self.inner().is_empty()
    }
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&Value>
    where
        String: Borrow<Q>,
    {
        self.inner().get(key)
    }
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut Value>
    where
        String: Borrow<Q>,
    {
        if !self.contains_key(key) {
            return None;
        }
        self.inner_mut().get_mut(key)
    }
    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        String: Borrow<Q>,
    {
        self.inner().contains_key(key)
    }
    /// As `BTreeMap::insert`: the previous value of the key, if any.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        self.inner_mut().insert(key, value)
    }
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<Value>
    where
        String: Borrow<Q>,
    {
        if !self.contains_key(key) {
            return None;
        }
        self.inner_mut().remove(key)
    }
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut Value) -> bool) {
        let mut pairs = std::mem::take(self).into_pairs();
        pairs.retain_mut(|(k, v)| keep(k, v));
        *self = ValueMap::from_sorted(pairs);
    }
    pub fn iter(&self) -> <&ValueMap as IntoIterator>::IntoIter {
        self.inner().iter()
    }
    pub fn iter_mut(&mut self) -> <&mut ValueMap as IntoIterator>::IntoIter {
        self.inner_mut().iter_mut()
    }
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.iter().map(|(_, v)| v)
    }
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.iter_mut().map(|(_, v)| v)
    }
    pub fn into_keys(self) -> impl DoubleEndedIterator<Item = String> + ExactSizeIterator {
        self.into_pairs().into_iter().map(|(k, _)| k)
    }
    pub fn into_values(self) -> impl DoubleEndedIterator<Item = Value> + ExactSizeIterator {
        self.into_pairs().into_iter().map(|(_, v)| v)
    }
    pub fn first_key_value(&self) -> Option<(&String, &Value)> {
        self.inner().first()
    }
    pub fn last_key_value(&self) -> Option<(&String, &Value)> {
        self.inner().last()
    }
    /// As `BTreeMap::entry`.
    pub fn entry(&mut self, key: String) -> Entry<'_> {
        match self.inner().find_index(&key) {
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
            .inner_mut()
            .iter_mut()
            .nth(index)
            .expect("an entry's index is in bounds");
        v
    }
}

impl PartialEq for ValueMap {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.inner() == other.inner()
    }
}

impl PartialOrd for ValueMap {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        self.inner().partial_cmp(other.inner())
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
        self.map
            .inner()
            .get_indexed(self.index)
            .expect("in bounds")
            .1
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
        let index = match map.inner().find_index(&key) {
            Ok(i) | Err(i) => i,
        };
        map.inner_mut().insert(key, value);
        map.value_at(index)
    }
}

impl std::fmt::Debug for ValueMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
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
        ValueMap::from_sorted(LiteMap::<String, Value>::from_iter(iter).into_tuple_vec())
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
        self.inner_mut().extend(iter)
    }
}

impl IntoIterator for ValueMap {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_pairs().into_iter()
    }
}

impl<'a> IntoIterator for &'a ValueMap {
    type Item = (&'a String, &'a Value);
    type IntoIter = <Pairs as StoreIterable<'a, String, Value>>::KeyValueIter;
    fn into_iter(self) -> Self::IntoIter {
        self.inner().iter()
    }
}

impl<'a> IntoIterator for &'a mut ValueMap {
    type Item = (&'a String, &'a mut Value);
    type IntoIter = <Pairs as StoreIterableMut<'a, String, Value>>::KeyValueIterMut;
    fn into_iter(self) -> Self::IntoIter {
        self.inner_mut().iter_mut()
    }
}

impl Serialize for ValueMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
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
        ValueMap::from_sorted(map.into_iter().collect())
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
    fn a_copy_shares_the_map_until_one_of_them_changes() {
        let a = ValueMap::from([("k".to_string(), s("1"))]);
        let mut b = a.clone();
        assert!(a.ptr_eq(&b));
        b.insert("l".into(), s("2"));
        assert!(!a.ptr_eq(&b));
        assert_eq!(a.len(), 1);
        assert_eq!(b.len(), 2);
        assert!(ValueMap::new().is_empty());
        assert_eq!(ValueMap::new(), ValueMap::from([]));
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
