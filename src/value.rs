//! The value model, after cty: typed null, bool, number, string, list, set, map, tuple, object,
//! **unknown** (typed, "known after apply"), and a sensitive mark.
//!
//! Invariants:
//! - unknown in → unknown out, wherever the result depends on the unknown input;
//! - objects and maps are ordered (`BTreeMap`), so every rendering is deterministic;
//! - sets hold their elements in canonical (sorted, deduplicated) order;
//! - numbers are arbitrary-precision decimals: integers beyond 2^53 stay exact;
//! - the stored form (`StoredValue`) has no unknown: `to_stored` refuses one.

use bigdecimal::{BigDecimal, Signed as _, Zero as _};
use cairn_state::StoredValue;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

pub(crate) mod binary512;
mod format;
pub(crate) mod map;
pub(crate) use format::{format_hcl, write_hcl};
pub use map::ValueMap;

/// A type, as a type constraint or as the type of a value. `Dynamic` is Terraform's `any`.
#[derive(Clone, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
pub enum Type {
    Dynamic,
    Bool,
    Number,
    String,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    Tuple(Vec<Type>),
    /// Attribute types, and which attributes are `optional(...)` in a type constraint (with
    /// their defaults, if any).
    /// (The map boxed: inline it made every `Type`, and so every `Value`, larger; see the
    /// `sizes` test.)
    Object(Box<BTreeMap<String, Type>>, OptionalAttrs),
}

/// The `optional(...)` attributes of an object type constraint, with their defaults: a map,
/// boxed only when not empty (it is empty in nearly every object type). Inline, it made every
/// `Type`, and so every `Value`, 16 bytes larger: a value's map node holds eleven values, and
/// the values of 10,000 resources held 5 MiB more for it. It reads, compares, prints and
/// serializes as the map it stands for.
// Boxed on purpose: an empty `BTreeMap` is 24 bytes inline, the box 8 (`None` when empty).
#[allow(clippy::box_collection)]
#[derive(Clone, Default)]
pub struct OptionalAttrs(Option<Box<BTreeMap<String, Option<Box<Value>>>>>);

type OptionalMap = BTreeMap<String, Option<Box<Value>>>;

impl std::ops::Deref for OptionalAttrs {
    type Target = OptionalMap;
    fn deref(&self) -> &OptionalMap {
        static EMPTY: OptionalMap = BTreeMap::new();
        self.0.as_deref().unwrap_or(&EMPTY)
    }
}

impl std::ops::DerefMut for OptionalAttrs {
    fn deref_mut(&mut self) -> &mut OptionalMap {
        self.0.get_or_insert_with(Default::default)
    }
}

impl From<OptionalMap> for OptionalAttrs {
    fn from(m: OptionalMap) -> Self {
        OptionalAttrs((!m.is_empty()).then(|| Box::new(m)))
    }
}

impl FromIterator<(String, Option<Box<Value>>)> for OptionalAttrs {
    fn from_iter<I: IntoIterator<Item = (String, Option<Box<Value>>)>>(iter: I) -> Self {
        OptionalMap::from_iter(iter).into()
    }
}

impl IntoIterator for OptionalAttrs {
    type Item = (String, Option<Box<Value>>);
    type IntoIter = std::collections::btree_map::IntoIter<String, Option<Box<Value>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.map(|m| *m).unwrap_or_default().into_iter()
    }
}

impl<'a> IntoIterator for &'a OptionalAttrs {
    type Item = (&'a String, &'a Option<Box<Value>>);
    type IntoIter = std::collections::btree_map::Iter<'a, String, Option<Box<Value>>>;
    fn into_iter(self) -> Self::IntoIter {
        (**self).iter()
    }
}

impl PartialEq for OptionalAttrs {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialOrd for OptionalAttrs {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        (**self).partial_cmp(&**other)
    }
}

impl fmt::Debug for OptionalAttrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for OptionalAttrs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for OptionalAttrs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        OptionalMap::deserialize(d).map(OptionalAttrs::from)
    }
}

impl Type {
    pub fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }
    pub(crate) fn set(t: Type) -> Type {
        Type::Set(Box::new(t))
    }
    pub fn map(t: Type) -> Type {
        Type::Map(Box::new(t))
    }
    pub fn object(attrs: impl IntoIterator<Item = (String, Type)>) -> Type {
        Type::Object(
            Box::new(attrs.into_iter().collect()),
            OptionalAttrs::default(),
        )
    }
}

impl fmt::Display for Type {
    /// Terraform's type-constraint syntax: `list(string)`, `object({a=number})`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dynamic => f.write_str("any"),
            Type::Bool => f.write_str("bool"),
            Type::Number => f.write_str("number"),
            Type::String => f.write_str("string"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Set(t) => write!(f, "set({t})"),
            Type::Map(t) => write!(f, "map({t})"),
            Type::Tuple(ts) => {
                f.write_str("tuple([")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str("])")
            }
            Type::Object(attrs, optional) => {
                f.write_str("object({")?;
                for (i, (k, t)) in attrs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if optional.contains_key(k) {
                        write!(f, "{k}=optional({t})")?;
                    } else {
                        write!(f, "{k}={t}")?;
                    }
                }
                f.write_str("})")
            }
        }
    }
}

/// An arbitrary-precision decimal number. Like cty's binary floats it has a negative zero
/// (`-0`, from `-0`, `0 * -1`, `tonumber("-0")`), which equals zero and compares as zero but
/// prints as `-0`: the second field, true only when the first is zero. Build with
/// `Number::new`; the arithmetic that keeps the sign of a zero is `neg`, `add`, `sub`, `mul`,
/// `div` and `rem`, with IEEE 754's rules, as Go's `big.Float` has them.
#[derive(Clone, Debug)]
// Boxed: a `BigDecimal` is 40 bytes, and inline it made every `Value` 48 bytes instead of
// 32 (most values are not numbers; see the `sizes` test).
pub struct Number(pub(crate) Box<BigDecimal>, bool);

impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        self.0 == other.0
    }
}
impl Eq for Number {}
impl std::hash::Hash for Number {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash(h)
    }
}
impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Number) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Number {
    fn cmp(&self, other: &Number) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// The bound on numbers, in every command: a number's decimal exponent (the power of ten of
/// its leading digit or of its last digit) lies within ±`MAX_EXPONENT`. Terraform's numbers
/// reach far beyond, but a configuration never needs them, and an exponent of a billion is
/// a gigabyte of digits to print (hostile input: `1e-99999999999`).
pub(crate) const MAX_EXPONENT: i64 = 100_000;

/// The bound on one string (bytes) and one collection (elements) that templates and functions
/// may build, in every command: hostile input (a template doubling a string eighty times,
/// `range(1e9)`) hits it and gets a diagnostic instead of exhausting memory.
pub(crate) const MAX_STRING_BYTES: usize = 16 << 20;
pub(crate) const MAX_ELEMENTS: usize = 1 << 20;

/// Whether a value stays within `MAX_STRING_BYTES` / `MAX_ELEMENTS` at its top level (a
/// value's parts were checked when they were built).
pub(crate) fn within_size_bounds(v: &Value) -> Result<(), String> {
    match v.unmarked() {
        Value::String(s) if s.len() > MAX_STRING_BYTES => Err(format!(
            "the result is a string of {} bytes, beyond the bound of {MAX_STRING_BYTES} bytes \
             that keeps hostile input from exhausting memory",
            s.len()
        )),
        Value::List(v) | Value::Set(v) | Value::Tuple(v) if v.len() > MAX_ELEMENTS => Err(format!(
            "the result has {} elements, beyond the bound of {MAX_ELEMENTS} elements that \
                 keeps hostile input from exhausting memory",
            v.len()
        )),
        _ => Ok(()),
    }
}

/// Why a number is refused: the bound it hit, for diagnostics.
pub(crate) fn number_range_error() -> String {
    format!(
        "numbers are bounded to decimal exponents between -{MAX_EXPONENT} and {MAX_EXPONENT}, \
         so that hostile input cannot exhaust memory; this one is beyond"
    )
}

impl Number {
    /// Whether a decimal is within the bound `MAX_EXPONENT`.
    pub(crate) fn in_range(d: &BigDecimal) -> bool {
        let (digits, scale) = d.as_bigint_and_exponent();
        if digits == 0.into() {
            return true;
        }
        // value = digits × 10^-scale: its last digit is at 10^-scale, its first at
        // 10^(len-1-scale).
        let len = digits.magnitude().bits() as f64 * std::f64::consts::LOG10_2;
        let last = -scale;
        let first = last.saturating_add(len as i64);
        (-MAX_EXPONENT..=MAX_EXPONENT).contains(&last)
            && (-MAX_EXPONENT..=MAX_EXPONENT).contains(&first)
    }

    pub(crate) fn new(d: BigDecimal) -> Number {
        Number(Box::new(d), false)
    }
    pub(crate) fn negative_zero() -> Number {
        Number(Box::new(BigDecimal::from(0)), true)
    }
    /// A zero with the sign `negative`, or `d` when it is not zero.
    pub(crate) fn signed(d: BigDecimal, negative: bool) -> Number {
        let neg_zero = negative && d.is_zero();
        Number(Box::new(d), neg_zero)
    }
    /// Whether this is `-0`.
    pub(crate) fn is_negative_zero(&self) -> bool {
        self.1
    }
    /// The sign bit, as a binary float has it: set for negatives and for `-0`.
    pub(crate) fn sign_bit(&self) -> bool {
        self.1 || self.0.is_negative()
    }
    pub(crate) fn from_i64(i: i64) -> Number {
        Number::new(BigDecimal::from(i))
    }
    pub(crate) fn from_f64(f: f64) -> Option<Number> {
        // Held as cty holds it (a float64 of 10^281 has 282 exact digits; cty's 512 bits keep
        // its shortest decimal), so that writing it out and reading it back is the identity.
        let d = binary512::canonical(BigDecimal::try_from(f).ok()?);
        Some(Number::signed(d, f.is_sign_negative()))
    }
    /// `-x`.
    pub(crate) fn neg(&self) -> Number {
        Number::signed(-(*self.0).clone(), !self.sign_bit())
    }
    /// `x + y`, rounded as cty rounds (`binary512::canonical`). An exact zero is `-0` only
    /// when both operands are `-0` (IEEE 754, rounding to nearest).
    pub(crate) fn add(&self, y: &Number) -> Number {
        let both_neg = self.1 && y.1;
        Number::signed(binary512::canonical(&*self.0 + &*y.0), both_neg)
    }
    /// `x - y`: `x + (-y)`.
    pub(crate) fn sub(&self, y: &Number) -> Number {
        self.add(&y.neg())
    }
    /// `x × y`: a zero takes the sign of the operands' signs combined.
    pub(crate) fn mul(&self, y: &Number) -> Number {
        let d = binary512::canonical(&*self.0 * &*y.0);
        Number::signed(d, self.sign_bit() != y.sign_bit())
    }
    /// `x / y`, for a `y` that is not zero.
    pub(crate) fn div(&self, y: &Number) -> Number {
        let d = binary512::divide(&self.0, &y.0);
        Number::signed(d, self.sign_bit() != y.sign_bit())
    }
    /// `x % y` as cty computes it, for a `y` that is not zero: `x - trunc(x / y) × y`, where
    /// the truncated quotient is an integer (never `-0`), so `-0 % 5` is `-0` and `-5 % 5` is 0.
    pub(crate) fn rem(&self, y: &Number) -> Number {
        Number::signed(binary512::canonical(&*self.0 % &*y.0), self.1)
    }
    /// The value as an integer, if it is one and fits.
    pub fn to_i64(&self) -> Option<i64> {
        use bigdecimal::ToPrimitive;
        if self.0.is_integer() {
            self.0.to_i64()
        } else {
            None
        }
    }
    pub(crate) fn to_f64(&self) -> f64 {
        use bigdecimal::ToPrimitive;
        match self.1 {
            true => -0.0,
            false => self.0.to_f64().unwrap_or(f64::NAN),
        }
    }
    pub(crate) fn is_integer(&self) -> bool {
        self.0.is_integer()
    }
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for Number {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let d = BigDecimal::from_str(s.trim()).map_err(|_| format!("{s:?} is not a number"))?;
        // A normalized zero or trailing zeros do not count against the bound (`1e5` is 1e5).
        let d = match Number::in_range(&d) {
            true => d,
            false => d.normalized(),
        };
        if !Number::in_range(&d) {
            return Err(format!("{s:?} is out of range: {}", number_range_error()));
        }
        // More digits than cty's 512 bits hold are rounded as cty rounds them on reading, so
        // the number read is the number written back (its `Display` is of that rounding).
        Ok(Number::signed(
            binary512::canonical(d),
            s.trim().starts_with('-'),
        ))
    }
}

impl fmt::Display for Number {
    /// Plain decimal notation without trailing zeros: `3`, `0.5`, `9007199254740993`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // At most cty's digits: a number read from elsewhere may carry more.
        if self.1 {
            return f.write_str("-0");
        }
        let n = binary512::canonical((*self.0).clone()).normalized();
        let (digits, scale) = n.as_bigint_and_exponent();
        if scale <= 0 {
            let mut s = digits.to_string();
            if digits != 0.into() {
                s.push_str(&"0".repeat((-scale) as usize));
            }
            f.write_str(&s)
        } else {
            let neg = digits < 0.into();
            let abs = digits.magnitude().to_string();
            let scale = scale as usize;
            let (int, frac) = if abs.len() > scale {
                (
                    abs[..abs.len() - scale].to_string(),
                    abs[abs.len() - scale..].to_string(),
                )
            } else {
                (
                    "0".to_string(),
                    format!("{}{}", "0".repeat(scale - abs.len()), abs),
                )
            };
            write!(f, "{}{}.{}", if neg { "-" } else { "" }, int, frac)
        }
    }
}

/// A value. Unknown and null carry their type; everything else knows its own.
/// Serializable (unknowns included) so saved plans can carry planned values.
#[derive(Clone, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
pub enum Value {
    Null(Type),
    /// Not known until apply.
    Unknown(Type),
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Value>),
    /// Canonical order, no duplicates: build with `Value::set`.
    Set(Vec<Value>),
    Tuple(Vec<Value>),
    Map(ValueMap),
    Object(ValueMap),
    /// A value marked sensitive. Operations on it give sensitive results.
    Sensitive(Box<Value>),
}

/// `s` in Unicode Normalization Form C, as every cty string is (`cty.StringVal`).
pub(crate) fn nfc(s: String) -> String {
    use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization as _};
    if s.is_ascii() || is_nfc_quick(s.chars()) == IsNormalized::Yes {
        s
    } else {
        s.nfc().collect()
    }
}

impl Value {
    /// The value with every string in it (map keys included) in Unicode NFC.
    pub(crate) fn nfc(self) -> Value {
        let map =
            |m: ValueMap| -> ValueMap { m.into_iter().map(|(k, v)| (nfc(k), v.nfc())).collect() };
        match self {
            Value::String(s) => Value::String(nfc(s)),
            Value::List(xs) => Value::List(xs.into_iter().map(Value::nfc).collect()),
            Value::Tuple(xs) => Value::Tuple(xs.into_iter().map(Value::nfc).collect()),
            Value::Set(xs) => Value::set(xs.into_iter().map(Value::nfc).collect()),
            Value::Map(m) => Value::Map(map(m)),
            Value::Object(m) => Value::Object(map(m)),
            Value::Sensitive(v) => Value::Sensitive(Box::new(v.nfc())),
            v => v,
        }
    }

    pub fn null() -> Value {
        Value::Null(Type::Dynamic)
    }
    pub fn unknown() -> Value {
        Value::Unknown(Type::Dynamic)
    }
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }
    pub(crate) fn int(i: i64) -> Value {
        Value::Number(Number::from_i64(i))
    }
    pub fn object(attrs: impl IntoIterator<Item = (impl Into<String>, Value)>) -> Value {
        Value::Object(attrs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
    /// A set: sorts and deduplicates its elements.
    pub(crate) fn set(mut elems: Vec<Value>) -> Value {
        elems.sort_by(canonical_cmp);
        elems.dedup();
        Value::Set(elems)
    }
    pub(crate) fn sensitive(self) -> Value {
        match self {
            v @ Value::Sensitive(_) => v,
            v => Value::Sensitive(Box::new(v)),
        }
    }

    /// The value without its sensitive mark (only the top level).
    pub(crate) fn unmarked(&self) -> &Value {
        match self {
            Value::Sensitive(v) => v.unmarked(),
            v => v,
        }
    }
    /// Removes sensitive marks everywhere, reporting whether there were any.
    pub(crate) fn deep_unmark(self) -> (Value, bool) {
        let mut marked = false;
        let v = self.map_deep(&mut |v| match v {
            Value::Sensitive(inner) => {
                marked = true;
                *inner
            }
            v => v,
        });
        (v, marked)
    }
    pub(crate) fn is_sensitive(&self) -> bool {
        matches!(self, Value::Sensitive(_))
    }
    /// True when any part of the value is sensitive.
    pub(crate) fn contains_sensitive(&self) -> bool {
        match self {
            Value::Sensitive(_) => true,
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => {
                v.iter().any(Value::contains_sensitive)
            }
            Value::Map(m) | Value::Object(m) => m.values().any(Value::contains_sensitive),
            _ => false,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.unmarked(), Value::Null(_))
    }
    /// True when this value itself is unknown (not when only a part of it is).
    pub fn is_unknown(&self) -> bool {
        matches!(self.unmarked(), Value::Unknown(_))
    }
    /// True when no part of the value is unknown.
    pub fn is_wholly_known(&self) -> bool {
        match self {
            Value::Unknown(_) => false,
            Value::Sensitive(v) => v.is_wholly_known(),
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => {
                v.iter().all(Value::is_wholly_known)
            }
            Value::Map(m) | Value::Object(m) => m.values().all(Value::is_wholly_known),
            _ => true,
        }
    }
    /// Paths (`a.b[0]`) of every unknown inside the value, for messages and `after_unknown`.
    pub(crate) fn unknown_paths(&self) -> Vec<String> {
        fn walk(v: &Value, path: &mut String, out: &mut Vec<String>) {
            match v {
                Value::Unknown(_) => out.push(path.clone()),
                Value::Sensitive(v) => walk(v, path, out),
                Value::List(v) | Value::Set(v) | Value::Tuple(v) => {
                    for (i, e) in v.iter().enumerate() {
                        let len = path.len();
                        path.push_str(&format!("[{i}]"));
                        walk(e, path, out);
                        path.truncate(len);
                    }
                }
                Value::Map(m) | Value::Object(m) => {
                    for (k, e) in m {
                        let len = path.len();
                        if path.is_empty() {
                            path.push_str(k);
                        } else if k
                            .chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
                        {
                            path.push('.');
                            path.push_str(k);
                        } else {
                            path.push_str(&format!("[{}]", cairn_state::quote(k)));
                        }
                        walk(e, path, out);
                        path.truncate(len);
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(self, &mut String::new(), &mut out);
        out
    }

    pub fn as_str(&self) -> Option<&str> {
        match self.unmarked() {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self.unmarked() {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_number(&self) -> Option<&Number> {
        match self.unmarked() {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }
    /// Attribute or map element `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self.unmarked() {
            Value::Object(m) | Value::Map(m) => m.get(name),
            _ => None,
        }
    }
    /// The elements of a list, set or tuple.
    pub fn elements(&self) -> Option<&[Value]> {
        match self.unmarked() {
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }
    /// The attributes of an object or the elements of a map.
    pub fn attributes(&self) -> Option<&ValueMap> {
        match self.unmarked() {
            Value::Object(m) | Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The type of this value (collections take the type of their first element).
    pub(crate) fn type_of(&self) -> Type {
        match self {
            Value::Null(t) | Value::Unknown(t) => t.clone(),
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(v) => Type::list(v.first().map(Value::type_of).unwrap_or(Type::Dynamic)),
            Value::Set(v) => Type::set(v.first().map(Value::type_of).unwrap_or(Type::Dynamic)),
            Value::Tuple(v) => Type::Tuple(v.iter().map(Value::type_of).collect()),
            Value::Map(m) => Type::map(
                m.values()
                    .next()
                    .map(Value::type_of)
                    .unwrap_or(Type::Dynamic),
            ),
            Value::Object(m) => Type::object(m.iter().map(|(k, v)| (k.clone(), v.type_of()))),
            Value::Sensitive(v) => v.type_of(),
        }
    }

    /// Applies `f` bottom-up to every value inside this one, and then to this one.
    pub(crate) fn map_deep(self, f: &mut impl FnMut(Value) -> Value) -> Value {
        let v = match self {
            Value::List(v) => Value::List(v.into_iter().map(|e| e.map_deep(f)).collect()),
            Value::Set(v) => Value::set(v.into_iter().map(|e| e.map_deep(f)).collect()),
            Value::Tuple(v) => Value::Tuple(v.into_iter().map(|e| e.map_deep(f)).collect()),
            Value::Map(m) => Value::Map(m.into_iter().map(|(k, e)| (k, e.map_deep(f))).collect()),
            Value::Object(m) => {
                Value::Object(m.into_iter().map(|(k, e)| (k, e.map_deep(f))).collect())
            }
            Value::Sensitive(v) => Value::Sensitive(Box::new(v.map_deep(f))),
            v => v,
        };
        f(v)
    }

    /// The stored form. Fails (with the path of the first unknown) when any part is unknown.
    pub fn to_stored(&self) -> Result<StoredValue, String> {
        if let Some(p) = self.unknown_paths().first() {
            return Err(format!(
                "value is not known{}",
                if p.is_empty() {
                    String::new()
                } else {
                    format!(" at {p}")
                }
            ));
        }
        Ok(self.to_stored_lossy())
    }

    fn to_stored_lossy(&self) -> StoredValue {
        match self {
            Value::Null(_) | Value::Unknown(_) => StoredValue::Null,
            Value::Bool(b) => StoredValue::Bool(*b),
            Value::Number(n) => StoredValue::Number(n.to_string()),
            Value::String(s) => StoredValue::String(s.clone()),
            Value::List(v) => StoredValue::List(v.iter().map(Value::to_stored_lossy).collect()),
            Value::Set(v) => StoredValue::Set(v.iter().map(Value::to_stored_lossy).collect()),
            Value::Tuple(v) => StoredValue::Tuple(v.iter().map(Value::to_stored_lossy).collect()),
            Value::Map(m) => StoredValue::Map(
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_stored_lossy()))
                    .collect(),
            ),
            Value::Object(m) => StoredValue::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_stored_lossy()))
                    .collect(),
            ),
            Value::Sensitive(v) => StoredValue::Sensitive(Box::new(v.to_stored_lossy())),
        }
    }

    pub fn from_stored(s: &StoredValue) -> Value {
        match s {
            StoredValue::Null => Value::null(),
            StoredValue::Bool(b) => Value::Bool(*b),
            StoredValue::Number(n) => n
                .parse()
                .map(Value::Number)
                .unwrap_or_else(|_| Value::String(n.clone())),
            StoredValue::String(s) => Value::String(s.clone()),
            StoredValue::List(v) => Value::List(v.iter().map(Value::from_stored).collect()),
            StoredValue::Set(v) => Value::set(v.iter().map(Value::from_stored).collect()),
            StoredValue::Tuple(v) => Value::Tuple(v.iter().map(Value::from_stored).collect()),
            StoredValue::Map(m) => Value::Map(
                m.iter()
                    .map(|(k, v)| (k.clone(), Value::from_stored(v)))
                    .collect(),
            ),
            StoredValue::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), Value::from_stored(v)))
                    .collect(),
            ),
            StoredValue::Sensitive(v) => Value::from_stored(v).sensitive(),
        }
    }

    /// Plain JSON (as `jsonencode` and `output -json` write it). Unknowns become null; callers
    /// that care check `is_wholly_known` first.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null(_) | Value::Unknown(_) => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Number(n) => {
                let text = n.to_string();
                serde_json::from_str::<J>(&text).unwrap_or(J::String(text))
            }
            Value::String(s) => J::String(s.clone()),
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => {
                J::Array(v.iter().map(Value::to_json).collect())
            }
            Value::Map(m) | Value::Object(m) => {
                J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Value::Sensitive(v) => v.to_json(),
        }
    }

    /// From plain JSON: arrays become tuples and objects become objects, as `jsondecode` does.
    pub(crate) fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::null(),
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => n
                .to_string()
                .parse()
                .map(Value::Number)
                .unwrap_or(Value::null()),
            J::String(s) => Value::String(s.clone()),
            J::Array(a) => Value::Tuple(a.iter().map(Value::from_json).collect()),
            J::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            ),
        }
    }
}

/// Carries the sensitive marks of `from`'s top-level attributes onto `to`'s. Providers see
/// and return unmarked values; what the configuration marked sensitive (say, from a
/// sensitive variable) stays marked in the plan, in state and after refresh.
pub(crate) fn carry_marks(from: &Value, to: Value) -> Value {
    // Nearly always nothing to carry: `to` is then returned as it came, not copied.
    let Some(marks) = from.attributes() else {
        return to;
    };
    if !marks.values().any(Value::contains_sensitive) {
        return to;
    }
    let mut attrs = match to {
        Value::Object(attrs) => attrs,
        other => return other,
    };
    for (k, v) in marks {
        if v.contains_sensitive() {
            if let Some(t) = attrs.remove(k) {
                attrs.insert(k.clone(), t.deep_unmark().0.sensitive());
            }
        }
    }
    Value::Object(attrs)
}

/// The canonical order of values in a set: by kind, then by content.
pub(crate) fn canonical_cmp(a: &Value, b: &Value) -> std::cmp::Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Bool(_) => 0,
            Value::Number(_) => 1,
            Value::String(_) => 2,
            Value::List(_) | Value::Set(_) | Value::Tuple(_) => 3,
            Value::Map(_) | Value::Object(_) => 4,
            Value::Null(_) => 5,
            Value::Unknown(_) => 6,
            Value::Sensitive(_) => 7,
        }
    }
    use std::cmp::Ordering;
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => x.cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Sensitive(x), Value::Sensitive(y)) => canonical_cmp(x, y),
        (
            Value::List(x) | Value::Set(x) | Value::Tuple(x),
            Value::List(y) | Value::Set(y) | Value::Tuple(y),
        ) => {
            for (p, q) in x.iter().zip(y) {
                let o = canonical_cmp(p, q);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Map(x) | Value::Object(x), Value::Map(y) | Value::Object(y)) => {
            for ((kp, p), (kq, q)) in x.iter().zip(y) {
                let o = kp.cmp(kq).then_with(|| canonical_cmp(p, q));
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_exactly() {
        for s in [
            "3",
            "0.5",
            "-0.25",
            "9007199254740993",
            "100",
            "0",
            "1.000001",
        ] {
            assert_eq!(s.parse::<Number>().unwrap().to_string(), s);
        }
        assert_eq!("1.50".parse::<Number>().unwrap().to_string(), "1.5");
        assert_eq!("1e3".parse::<Number>().unwrap().to_string(), "1000");
    }

    #[test]
    fn stored_form_has_no_unknowns() {
        let v = Value::object([("a", Value::int(1)), ("b", Value::unknown())]);
        assert_eq!(v.to_stored().unwrap_err(), "value is not known at b");
        let v = Value::object([("a", Value::int(1)), ("s", Value::string("x").sensitive())]);
        assert_eq!(Value::from_stored(&v.to_stored().unwrap()), v);
    }

    #[test]
    fn sets_are_canonical() {
        let s = Value::set(vec![
            Value::string("b"),
            Value::string("a"),
            Value::string("b"),
        ]);
        assert_eq!(s, Value::Set(vec![Value::string("a"), Value::string("b")]));
    }
}

/// The sizes every value and type of a large plan pay (issue 31): a `Value` was 48 bytes (a
/// number's `BigDecimal` inline, and an object type's map), so every attribute of every object
/// cost 16 bytes more, and every planned change 120 more.
#[cfg(test)]
mod sizes {
    #[test]
    fn values_types_and_changes_stay_small() {
        use std::mem::size_of;
        assert_eq!(size_of::<super::Number>(), 16);
        assert_eq!(size_of::<super::Type>(), 24);
        assert_eq!(size_of::<super::Value>(), 32);
        assert!(size_of::<crate::plan::Change>() <= 272);
    }
}
