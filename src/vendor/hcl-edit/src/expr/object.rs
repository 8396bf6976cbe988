use crate::expr::Expression;
use crate::{Decor, Decorate, Decorated, Ident, RawString, Span};
use std::ops::{self, Range};
use vecmap::map::VecMap;

/// An owning iterator over the entries of an `Object`.
///
/// Values of this type are created by the [`into_iter`] method on [`Object`] (provided by the
/// [`IntoIterator`] trait). See its documentation for more.
///
/// [`into_iter`]: IntoIterator::into_iter
/// [`IntoIterator`]: core::iter::IntoIterator
pub type ObjectIntoIter = Box<dyn Iterator<Item = (ObjectKey, ObjectValue)>>;

/// An iterator over the entries of an `Object`.
///
/// Values of this type are created by the [`iter`] method on [`Object`]. See its documentation for
/// more.
///
/// [`iter`]: Object::iter
pub type ObjectIter<'a> = Box<dyn Iterator<Item = (&'a ObjectKey, &'a ObjectValue)> + 'a>;

/// A mutable iterator over the entries of an `Object`.
///
/// Values of this type are created by the [`iter_mut`] method on [`Object`]. See its documentation
/// for more.
///
/// [`iter_mut`]: Object::iter_mut
pub type ObjectIterMut<'a> = Box<dyn Iterator<Item = (ObjectKeyMut<'a>, &'a mut ObjectValue)> + 'a>;

/// Type representing a HCL object.
///
/// An object constructor may give the same key more than once (`{ a = 1, a = 2 }`); HCL
/// evaluates every item in order and the last one wins. The items are therefore kept as a list
/// in source order: the keyed accessors below answer for the last item with an equivalent key.
#[derive(Debug, Clone, Eq, Default)]
pub struct Object {
    items: Vec<(ObjectKey, ObjectValue)>,
    trailing: RawString,
    decor: Decor,
    span: Option<crate::repr::SpanRepr>,
}

impl Object {
    /// Constructs a new, empty `Object`.
    #[inline]
    pub fn new() -> Self {
        Object::default()
    }

    /// Constructs a new, empty `Object` with at least the specified capacity.
    #[inline]
    pub fn with_capacity(capacity: usize) -> Self {
        Object {
            items: Vec::with_capacity(capacity),
            ..Default::default()
        }
    }

    /// Returns `true` if the object contains no items.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Returns the number of items in the object, also referred to as its 'length'.
    ///
    /// Items with a repeated key count once each.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Clears the object, removing all items.
    #[inline]
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// The position of the last item whose key is equivalent to `key`.
    fn position(&self, key: &ObjectKey) -> Option<usize> {
        self.items.iter().rposition(|(k, _)| k == key)
    }

    /// Return `true` if an equivalent to `key` exists in the object.
    #[inline]
    pub fn contains_key(&self, key: &ObjectKey) -> bool {
        self.position(key).is_some()
    }

    /// Return a reference to the value stored for `key`, if it is present, else `None`.
    ///
    /// If the key is repeated, this is the value of its last item.
    #[inline]
    pub fn get(&self, key: &ObjectKey) -> Option<&ObjectValue> {
        self.position(key).map(|i| &self.items[i].1)
    }

    /// Return a mutable reference to the value stored for `key`, if it is present, else `None`.
    ///
    /// If the key is repeated, this is the value of its last item.
    #[inline]
    pub fn get_mut(&mut self, key: &ObjectKey) -> Option<&mut ObjectValue> {
        self.position(key).map(|i| &mut self.items[i].1)
    }

    /// Return references to the key-value pair stored for `key`, if it is present, else `None`.
    ///
    /// If the key is repeated, this is its last item.
    #[inline]
    pub fn get_key_value(&self, key: &ObjectKey) -> Option<(&ObjectKey, &ObjectValue)> {
        self.position(key).map(|i| {
            let (k, v) = &self.items[i];
            (k, v)
        })
    }

    /// Return mutable references to the key-value pair stored for `key`, if it is present, else `None`.
    ///
    /// If the key is repeated, this is its last item.
    #[inline]
    pub fn get_key_value_mut<'a>(
        &'a mut self,
        key: &ObjectKey,
    ) -> Option<(ObjectKeyMut<'a>, &'a mut ObjectValue)> {
        self.position(key).map(|i| {
            let (k, v) = &mut self.items[i];
            (ObjectKeyMut::new(k), v)
        })
    }

    /// Insert a key-value pair into the object.
    ///
    /// If an equivalent key already exists in the object: the key remains and retains in its place
    /// in the order, its corresponding value is updated with `value` and the older value is
    /// returned inside `Some(_)`. If the key is repeated, its last item is updated.
    ///
    /// If no equivalent key existed in the object: the new key-value pair is inserted, last in
    /// order, and `None` is returned.
    #[inline]
    pub fn insert(
        &mut self,
        key: impl Into<ObjectKey>,
        value: impl Into<ObjectValue>,
    ) -> Option<ObjectValue> {
        let key = key.into();
        let value = value.into();
        match self.position(&key) {
            Some(i) => Some(std::mem::replace(&mut self.items[i].1, value)),
            None => {
                self.items.push((key, value));
                None
            }
        }
    }

    /// Append a key-value pair to the object, last in order, even if an equivalent key already
    /// exists (as an object constructor that repeats a key does; the last item wins when the
    /// object is evaluated).
    #[inline]
    pub fn push(&mut self, key: impl Into<ObjectKey>, value: impl Into<ObjectValue>) {
        self.items.push((key.into(), value.into()));
    }

    /// Remove the key-value pair equivalent to `key` and return its value.
    ///
    /// If the key is repeated, every item with it is removed and the last one's value returned.
    ///
    /// Like `Vec::remove`, the pair is removed by shifting all of the elements that follow it,
    /// preserving their relative order. **This perturbs the index of all of those elements!**
    #[inline]
    pub fn remove(&mut self, key: &ObjectKey) -> Option<ObjectValue> {
        self.remove_entry(key).map(|(_, v)| v)
    }

    /// Remove and return the key-value pair equivalent to `key`.
    ///
    /// If the key is repeated, every item with it is removed and the last one returned.
    ///
    /// Like `Vec::remove`, the pair is removed by shifting all of the elements that follow it,
    /// preserving their relative order. **This perturbs the index of all of those elements!**
    #[inline]
    pub fn remove_entry(&mut self, key: &ObjectKey) -> Option<(ObjectKey, ObjectValue)> {
        let mut last = None;
        while let Some(i) = self.position(key) {
            let entry = self.items.remove(i);
            last.get_or_insert(entry);
        }
        last
    }

    /// An iterator visiting all key-value pairs in insertion order. The iterator element type is
    /// `(&'a ObjectKey, &'a ObjectValue)`.
    #[inline]
    pub fn iter(&self) -> ObjectIter<'_> {
        Box::new(self.items.iter().map(|(k, v)| (k, v)))
    }

    /// An iterator visiting all key-value pairs in insertion order, with mutable references to the
    /// values. The iterator element type is `(ObjectKeyMut<'a>, &'a mut ObjectValue)`.
    #[inline]
    pub fn iter_mut(&mut self) -> ObjectIterMut<'_> {
        Box::new(
            self.items
                .iter_mut()
                .map(|(k, v)| (ObjectKeyMut::new(k), v)),
        )
    }

    /// Return a reference to raw trailing decor before the object's closing `}`.
    #[inline]
    pub fn trailing(&self) -> &RawString {
        &self.trailing
    }

    /// Set the raw trailing decor before the object's closing `}`.
    #[inline]
    pub fn set_trailing(&mut self, trailing: impl Into<RawString>) {
        self.trailing = trailing.into();
    }

    pub(crate) fn despan(&mut self, input: &str) {
        self.decor.despan(input);
        self.trailing.despan(input);

        for (key, value) in self.items.iter_mut() {
            key.despan(input);
            value.despan(input);
        }
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items && self.trailing == other.trailing
    }
}

impl From<VecMap<ObjectKey, ObjectValue>> for Object {
    fn from(items: VecMap<ObjectKey, ObjectValue>) -> Self {
        Object {
            items: items.into_iter().collect(),
            ..Default::default()
        }
    }
}

impl<K, V> Extend<(K, V)> for Object
where
    K: Into<ObjectKey>,
    V: Into<ObjectValue>,
{
    fn extend<I>(&mut self, iterable: I)
    where
        I: IntoIterator<Item = (K, V)>,
    {
        let iter = iterable.into_iter();
        let reserve = if self.is_empty() {
            iter.size_hint().0
        } else {
            (iter.size_hint().0 + 1) / 2
        };
        self.items.reserve(reserve);
        iter.for_each(|(k, v)| {
            self.insert(k, v);
        });
    }
}

impl<K, V> FromIterator<(K, V)> for Object
where
    K: Into<ObjectKey>,
    V: Into<ObjectValue>,
{
    fn from_iter<I>(iterable: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
    {
        let iter = iterable.into_iter();
        let lower = iter.size_hint().0;
        let mut object = Object::with_capacity(lower);
        object.extend(iter);
        object
    }
}

impl IntoIterator for Object {
    type Item = (ObjectKey, ObjectValue);
    type IntoIter = ObjectIntoIter;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.items.into_iter())
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a ObjectKey, &'a ObjectValue);
    type IntoIter = ObjectIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Object {
    type Item = (ObjectKeyMut<'a>, &'a mut ObjectValue);
    type IntoIter = ObjectIterMut<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

/// Represents an object key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectKey {
    /// Represents an unquoted identifier used as object key.
    Ident(Decorated<Ident>),
    /// Any valid HCL expression can be an object key.
    Expression(Expression),
}

impl ObjectKey {
    /// Returns `true` if the object key is an identifier.
    pub fn is_ident(&self) -> bool {
        self.as_ident().is_some()
    }

    /// If the object key is an identifier, returns a reference to it, otherwise `None`.
    pub fn as_ident(&self) -> Option<&Ident> {
        match self {
            ObjectKey::Ident(value) => Some(value.value()),
            ObjectKey::Expression(_) => None,
        }
    }

    /// Returns `true` if the object key is an expression.
    pub fn is_expr(&self) -> bool {
        self.as_expr().is_some()
    }

    /// If the object key is an expression, returns a reference to it, otherwise `None`.
    pub fn as_expr(&self) -> Option<&Expression> {
        match self {
            ObjectKey::Expression(value) => Some(value),
            ObjectKey::Ident(_) => None,
        }
    }

    pub(crate) fn despan(&mut self, input: &str) {
        match self {
            ObjectKey::Ident(ident) => ident.decor_mut().despan(input),
            ObjectKey::Expression(expr) => expr.despan(input),
        }
    }
}

impl From<Decorated<Ident>> for ObjectKey {
    fn from(ident: Decorated<Ident>) -> Self {
        ObjectKey::Ident(ident)
    }
}

impl From<Ident> for ObjectKey {
    fn from(ident: Ident) -> Self {
        ObjectKey::from(Decorated::new(ident))
    }
}

impl From<Expression> for ObjectKey {
    fn from(expr: Expression) -> Self {
        ObjectKey::Expression(expr)
    }
}

/// Allows mutable access to the surrounding [`Decor`] of an [`ObjectKey`] but not to its value.
///
/// This type wraps the object key in the iterator returned by [`Object::iter_mut`].
#[derive(Debug, Eq, PartialEq)]
pub struct ObjectKeyMut<'k> {
    key: &'k mut ObjectKey,
}

impl<'k> ObjectKeyMut<'k> {
    pub(crate) fn new(key: &'k mut ObjectKey) -> ObjectKeyMut<'k> {
        ObjectKeyMut { key }
    }

    /// Returns an immutable reference to the wrapped `ObjectKey`.
    pub fn get(&self) -> &ObjectKey {
        self.key
    }
}

impl ops::Deref for ObjectKeyMut<'_> {
    type Target = ObjectKey;

    fn deref(&self) -> &Self::Target {
        self.get()
    }
}

impl Decorate for ObjectKeyMut<'_> {
    fn decor(&self) -> &Decor {
        self.key.decor()
    }

    fn decor_mut(&mut self) -> &mut Decor {
        self.key.decor_mut()
    }
}

impl Span for ObjectKeyMut<'_> {
    fn span(&self) -> Option<Range<usize>> {
        self.key.span()
    }
}

/// Represents the assignment operator between an object key and its value.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum ObjectValueAssignment {
    /// Colon (`:`) assignment operator.
    Colon,
    /// Equals (`=`) assignment operator.
    #[default]
    Equals,
}

/// Represents the character that terminates an object value.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum ObjectValueTerminator {
    /// No terminator.
    None,
    /// Newline terminated.
    Newline,
    /// Comma terminated.
    #[default]
    Comma,
}

/// Represents an object value together with it's assignment operator and value terminator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectValue {
    expr: Expression,
    assignment: ObjectValueAssignment,
    terminator: ObjectValueTerminator,
}

impl ObjectValue {
    /// Creates a new `ObjectValue` for an expression.
    pub fn new(expr: impl Into<Expression>) -> ObjectValue {
        ObjectValue {
            expr: expr.into(),
            assignment: ObjectValueAssignment::default(),
            terminator: ObjectValueTerminator::default(),
        }
    }

    /// Returns a reference to the object value's [`Expression`].
    pub fn expr(&self) -> &Expression {
        &self.expr
    }

    /// Returns a mutable reference to the object value's [`Expression`].
    pub fn expr_mut(&mut self) -> &mut Expression {
        &mut self.expr
    }

    /// Converts the object value into an [`Expression`].
    pub fn into_expr(self) -> Expression {
        self.expr
    }

    /// Returns the object value assignment operator.
    pub fn assignment(&self) -> ObjectValueAssignment {
        self.assignment
    }

    /// Sets the object value assignment operator.
    pub fn set_assignment(&mut self, sep: ObjectValueAssignment) {
        self.assignment = sep;
    }

    /// Returns the object value terminator.
    pub fn terminator(&self) -> ObjectValueTerminator {
        self.terminator
    }

    /// Sets the object value terminator.
    pub fn set_terminator(&mut self, terminator: ObjectValueTerminator) {
        self.terminator = terminator;
    }

    pub(crate) fn despan(&mut self, input: &str) {
        self.expr.despan(input);
    }
}

impl From<Expression> for ObjectValue {
    fn from(expr: Expression) -> Self {
        ObjectValue::new(expr)
    }
}

decorate_impl!(Object);
span_impl!(Object);
forward_decorate_impl!(ObjectKey => { Ident, Expression });
forward_span_impl!(ObjectKey => { Ident, Expression });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Array;
    use pretty_assertions::assert_eq;

    #[test]
    fn object_access() {
        // Ident key.
        let mut obj = Object::new();
        let mut key = ObjectKey::from(Ident::new("foo"));
        key.decorate(("/* prefix */", "/* suffix */"));

        let value = ObjectValue::from(Expression::from("bar"));

        obj.insert(key.clone(), value.clone());

        assert_eq!(obj.get(&key), Some(&value));

        key.decor_mut().clear();

        assert_eq!(obj.get(&key), Some(&value));

        let (key, _) = obj.remove_entry(&key).unwrap();
        assert_eq!(key.decor().prefix(), Some(&RawString::from("/* prefix */")));
        assert_eq!(key.decor().suffix(), Some(&RawString::from("/* suffix */")));

        // Expression key.
        let mut array = Array::new();
        array.push("foo");
        let mut key = ObjectKey::from(Expression::from(array));
        key.decorate(("/* prefix */", "/* suffix */"));

        let value = ObjectValue::from(Expression::from("bar"));

        obj.insert(key.clone(), value.clone());

        assert_eq!(obj.get(&key), Some(&value));

        key.decor_mut().clear();

        assert_eq!(obj.get(&key), Some(&value));

        let (key, _) = obj.remove_entry(&key).unwrap();
        assert_eq!(key.decor().prefix(), Some(&RawString::from("/* prefix */")));
        assert_eq!(key.decor().suffix(), Some(&RawString::from("/* suffix */")));
    }
}
