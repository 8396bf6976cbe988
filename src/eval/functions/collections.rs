//! Collection functions: length, concat, merge, keys, values, lookup, element, index, flatten,
//! distinct, contains, range, zipmap, setproduct, setunion, setintersection, setsubtract,
//! slice, sort, reverse, chunklist, coalesce, coalescelist, compact, one, alltrue, anytrue,
//! transpose, sum, matchkeys.
//!
//! Several of these look only at the *shape* of a collection, so they give known results for
//! collections with unknown elements (`length`, `keys` of an object, `element` picking a known
//! element); each function's doc says what it does with unknowns.

use super::{
    arg_err, call_err, elem_type, elems_of, entries_of, int_arg, p, ret_arg0, Def, Fail,
    FunctionContext, Res, Ret, P,
};
use crate::eval::convert::{self, equals, friendly_name, unify};
use crate::value::ValueMap;
use crate::value::{Number, Type, Value};
use bigdecimal::BigDecimal;
use std::collections::BTreeMap;
use unicode_segmentation::UnicodeSegmentation;

const ANY: P = P::Any;

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "length",
        params: &[p("value", ANY).unknown().marked().dynamic_type()],
        variadic: None,
        ret: Ret::Fixed(P::Num),
        imp: length,
    },
    Def {
        name: "concat",
        params: &[],
        variadic: Some(p("seqs", ANY).inner_marks()),
        ret: Ret::From(super::ret_dynamic),
        imp: concat,
    },
    Def {
        name: "merge",
        params: &[],
        variadic: Some(p("maps", ANY).null().marked()),
        ret: Ret::From(super::ret_dynamic),
        imp: merge,
    },
    Def {
        name: "keys",
        params: &[p("inputMap", ANY).unknown().inner_marks()],
        variadic: None,
        ret: Ret::From(keys_ret),
        imp: keys,
    },
    Def {
        name: "values",
        params: &[p("mapping", ANY).inner_marks()],
        variadic: None,
        ret: Ret::From(values_ret),
        imp: values,
    },
    Def {
        name: "lookup",
        params: &[p("inputMap", ANY).unknown().inner_marks(), p("key", P::Str)],
        variadic: Some(p("default", ANY).null().unknown()),
        ret: Ret::From(lookup_ret),
        imp: lookup,
    },
    Def {
        name: "element",
        params: &[p("list", ANY).unknown().inner_marks(), p("index", P::Num)],
        variadic: None,
        ret: Ret::From(element_ret),
        imp: element,
    },
    Def {
        name: "index",
        params: &[p("list", ANY), p("value", ANY)],
        variadic: None,
        ret: Ret::Fixed(P::Num),
        imp: index,
    },
    Def {
        name: "flatten",
        params: &[p("list", ANY).inner_marks()],
        variadic: None,
        ret: Ret::From(super::ret_dynamic),
        imp: flatten,
    },
    Def {
        name: "distinct",
        params: &[p("list", P::List(&ANY))],
        variadic: None,
        ret: Ret::From(ret_arg0),
        imp: distinct,
    },
    Def {
        name: "contains",
        params: &[p("list", ANY), p("value", ANY).unknown()],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: contains,
    },
    Def {
        name: "range",
        params: &[],
        variadic: Some(p("params", P::Num)),
        ret: Ret::Fixed(P::List(&P::Num)),
        imp: range,
    },
    Def {
        name: "zipmap",
        params: &[p("keys", P::List(&P::Str)), p("values", ANY).inner_marks()],
        variadic: None,
        ret: Ret::From(super::ret_dynamic),
        imp: zipmap,
    },
    Def {
        name: "setproduct",
        params: &[],
        variadic: Some(p("sets", ANY)),
        ret: Ret::From(super::ret_dynamic),
        imp: setproduct,
    },
    Def {
        name: "setunion",
        params: &[p("first_set", P::Set(&ANY))],
        variadic: Some(p("other_sets", P::Set(&ANY))),
        ret: Ret::From(set_ret),
        imp: setunion,
    },
    Def {
        name: "setintersection",
        params: &[p("first_set", P::Set(&ANY))],
        variadic: Some(p("other_sets", P::Set(&ANY))),
        ret: Ret::From(set_ret),
        imp: setintersection,
    },
    Def {
        name: "setsubtract",
        params: &[p("a", P::Set(&ANY)), p("b", P::Set(&ANY))],
        variadic: None,
        ret: Ret::From(set_ret),
        imp: setsubtract,
    },
    Def {
        name: "slice",
        params: &[
            p("list", ANY).inner_marks(),
            p("start_index", P::Num),
            p("end_index", P::Num),
        ],
        variadic: None,
        ret: Ret::From(super::ret_dynamic),
        imp: slice,
    },
    Def {
        name: "sort",
        params: &[p("list", P::List(&P::Str))],
        variadic: None,
        ret: Ret::Fixed(P::List(&P::Str)),
        imp: sort,
    },
    Def {
        name: "reverse",
        params: &[p("list", ANY).inner_marks()],
        variadic: None,
        ret: Ret::From(reverse_ret),
        imp: reverse,
    },
    Def {
        name: "chunklist",
        params: &[p("list", P::List(&ANY)), p("size", P::Num)],
        variadic: None,
        ret: Ret::From(chunk_ret),
        imp: chunklist,
    },
    Def {
        name: "coalesce",
        params: &[],
        variadic: Some(p("vals", ANY).null().unknown()),
        ret: Ret::From(super::ret_dynamic),
        imp: coalesce,
    },
    Def {
        name: "coalescelist",
        params: &[],
        variadic: Some(p("vals", ANY).null().unknown()),
        ret: Ret::From(super::ret_dynamic),
        imp: coalescelist,
    },
    Def {
        name: "compact",
        params: &[p("list", P::List(&P::Str))],
        variadic: None,
        ret: Ret::Fixed(P::List(&P::Str)),
        imp: compact,
    },
    Def {
        name: "one",
        params: &[p("list", ANY)],
        variadic: None,
        ret: Ret::From(one_ret),
        imp: one,
    },
    Def {
        name: "alltrue",
        params: &[p("list", P::List(&P::Bool))],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: alltrue,
    },
    Def {
        name: "anytrue",
        params: &[p("list", P::List(&P::Bool))],
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: anytrue,
    },
    Def {
        name: "transpose",
        params: &[p("values", P::Map(&P::List(&P::Str)))],
        variadic: None,
        ret: Ret::Fixed(P::Map(&P::List(&P::Str))),
        imp: transpose,
    },
    Def {
        name: "sum",
        params: &[p("list", ANY)],
        variadic: None,
        ret: Ret::Fixed(P::Num),
        imp: sum,
    },
    Def {
        name: "matchkeys",
        params: &[
            p("values", P::List(&ANY)),
            p("keys", P::List(&ANY)),
            p("searchset", P::List(&ANY)),
        ],
        variadic: None,
        ret: Ret::From(ret_arg0),
        imp: matchkeys,
    },
];

fn num(i: usize) -> Value {
    Value::int(i as i64)
}

fn is_seq(v: &Value) -> bool {
    matches!(
        v.unmarked(),
        Value::List(_) | Value::Set(_) | Value::Tuple(_)
    ) || matches!(
        v.unmarked(),
        Value::Null(t) | Value::Unknown(t) if matches!(t, Type::List(_) | Type::Set(_) | Type::Tuple(_))
    )
}

/// `length(value)`: characters of a string, elements of a collection, attributes of an
/// object. Known for a list, map or tuple with unknown elements; unknown for an unknown value
/// (except a tuple or object, whose length is in its type) and for a set with unknown elements
/// (they may turn out equal). Sensitive only when the value itself is marked sensitive.
fn length(a: Vec<Value>, _: &FunctionContext) -> Res {
    let v = &a[0];
    let marked = v.is_sensitive();
    let mark = |r: Value| if marked { r.sensitive() } else { r };
    let r = match v.unmarked() {
        Value::String(s) => num(s.graphemes(true).count()),
        Value::List(e) | Value::Tuple(e) => num(e.len()),
        Value::Set(e) => {
            if e.iter().all(Value::is_wholly_known) {
                num(e.len())
            } else {
                Value::Unknown(Type::Number)
            }
        }
        Value::Map(m) | Value::Object(m) => num(m.len()),
        Value::Unknown(t) => match t {
            Type::Tuple(ts) => num(ts.len()),
            Type::Object(attrs, _) => num(attrs.len()),
            Type::Bool | Type::Number => {
                return Err(call_err(
                    "argument must be a string, a collection type, or a structural type",
                ))
            }
            _ => Value::Unknown(Type::Number),
        },
        _ => {
            return Err(call_err(
                "argument must be a string, a collection type, or a structural type",
            ))
        }
    };
    Ok(mark(r))
}

/// `concat(seqs...)`: a list when every argument is a list (of unifiable element types),
/// otherwise a tuple. Unknown argument → unknown result.
fn concat(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.is_empty() {
        return Err(call_err("at least one argument is required"));
    }
    for (i, v) in a.iter().enumerate() {
        if !matches!(v, Value::List(_) | Value::Tuple(_)) {
            return Err(arg_err(
                i,
                format!(
                    "all arguments must be lists or tuples; got {}",
                    friendly_name(&v.type_of(), false)
                ),
            ));
        }
    }
    let all_lists = a.iter().all(|v| matches!(v, Value::List(_)));
    if all_lists {
        let tys: Vec<Type> = a
            .iter()
            .filter(|v| !v.elements().is_some_and(|e| e.is_empty()))
            .map(|v| elem_type(&v.type_of()))
            .collect();
        if let Some(et) = unify(&tys) {
            let mut out = Vec::new();
            for v in a {
                for e in elems_of(v) {
                    out.push(convert::convert(e, &et).map_err(|e| call_err(e.to_string()))?);
                }
            }
            return Ok(Value::List(out));
        }
    }
    Ok(Value::Tuple(a.into_iter().flat_map(elems_of).collect()))
}

/// `merge(maps...)`: later arguments win; nulls are skipped. A map when every argument is a
/// map of one element type, otherwise an object. Unknown argument → unknown result.
/// Sensitive elements keep their marks; a sensitive argument makes the result sensitive.
fn merge(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut marked = false;
    let mut all_maps = true;
    let mut out = ValueMap::new();
    let mut tys = Vec::new();
    let any_arg = !a.is_empty();
    for v in a {
        marked |= v.is_sensitive();
        let v = v.unmarked().clone();
        match v {
            Value::Null(_) => {}
            Value::Map(m) => {
                if !m.is_empty() {
                    tys.push(elem_type(&Value::Map(m.clone()).type_of()));
                }
                out.extend(m);
            }
            Value::Object(m) => {
                all_maps = false;
                out.extend(m);
            }
            other => {
                return Err(call_err(format!(
                    "arguments must be maps or objects, got {}",
                    convert::quote(&friendly_name(&other.type_of(), false))
                )))
            }
        }
    }
    // A map only when every argument is a map and their element types are the same
    // (`merge(tomap({a=1}), tomap({b="x"}))` is an object, as in Terraform).
    let r = if any_arg && all_maps && tys.windows(2).all(|w| w[0] == w[1]) {
        Value::Map(out)
    } else {
        Value::Object(out)
    };
    Ok(if marked { r.sensitive() } else { r })
}

fn keys_ret(a: &[Value]) -> Type {
    match a.first().map(Value::type_of) {
        Some(Type::Object(attrs, _)) => Type::Tuple(vec![Type::String; attrs.len()]),
        _ => Type::list(Type::String),
    }
}

/// `keys(inputMap)`: sorted keys; a list for a map, a tuple for an object. An unknown object
/// still has known keys (they are in its type); an unknown map has unknown keys.
fn keys(a: Vec<Value>, _: &FunctionContext) -> Res {
    match &a[0] {
        Value::Map(m) => Ok(Value::List(
            m.keys().map(|k| Value::String(k.clone())).collect(),
        )),
        Value::Object(m) => Ok(Value::Tuple(
            m.keys().map(|k| Value::String(k.clone())).collect(),
        )),
        Value::Unknown(Type::Object(attrs, _)) => Ok(Value::Tuple(
            attrs.keys().map(|k| Value::String(k.clone())).collect(),
        )),
        Value::Unknown(Type::Map(_) | Type::Dynamic) => {
            Ok(Value::Unknown(Type::list(Type::String)))
        }
        _ => Err(arg_err(0, "must have map or object type")),
    }
}

fn values_ret(a: &[Value]) -> Type {
    match a.first().map(Value::type_of) {
        Some(Type::Object(attrs, _)) => Type::Tuple(attrs.values().cloned().collect()),
        Some(Type::Map(e)) => Type::list(*e),
        _ => Type::Dynamic,
    }
}

/// `values(mapping)`: values in key order; a list for a map, a tuple for an object. Unknown →
/// unknown.
fn values(a: Vec<Value>, _: &FunctionContext) -> Res {
    match a.into_iter().next().unwrap_or(Value::null()) {
        Value::Map(m) => Ok(Value::List(m.into_values().collect())),
        Value::Object(m) => Ok(Value::Tuple(m.into_values().collect())),
        _ => Err(call_err("values() requires a map as the first argument")),
    }
}

fn lookup_ret(a: &[Value]) -> Type {
    match (
        a.first().map(Value::type_of),
        a.get(1).and_then(Value::as_str),
    ) {
        (Some(Type::Object(attrs, _)), Some(k)) if attrs.contains_key(k) => attrs[k].clone(),
        (Some(Type::Map(e)), _) => *e,
        _ => Type::Dynamic,
    }
}

/// `lookup(inputMap, key, default)`: the element at `key`, else `default` (converted to the
/// map's element type). Unknown map → unknown, unless it is an object whose type says the
/// attribute is there (then unknown of that type) or a known object with a known attribute.
/// A map with unknown elements still gives known results for known keys.
fn lookup(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.len() > 3 {
        return Err(call_err(format!(
            "lookup() takes two or three arguments, got {}",
            a.len()
        )));
    }
    let mut it = a.into_iter();
    let map = it.next().unwrap_or(Value::null());
    let key = it.next().unwrap_or(Value::null());
    let default = it.next();
    let key = key.as_str().unwrap_or_default().to_string();
    if let Value::Unknown(t) = &map {
        return Ok(Value::Unknown(lookup_ret(&[
            Value::Unknown(t.clone()),
            Value::String(key),
        ])));
    }
    let is_map = matches!(map, Value::Map(_));
    let elem_ty = elem_type(&map.type_of());
    let entries = match map {
        Value::Map(m) | Value::Object(m) => m,
        _ => return Err(arg_err(0, "lookup() requires a map as the first argument")),
    };
    if let Some(v) = entries.get(&key) {
        return Ok(v.clone());
    }
    match default {
        Some(d) => {
            if is_map && elem_ty != Type::Dynamic {
                convert::convert(d, &elem_ty).map_err(|_| {
                    arg_err(
                        2,
                        "the default value must have the same type as the map elements",
                    )
                })
            } else {
                Ok(d)
            }
        }
        None if is_map => Err(arg_err(
            0,
            format!("the given map has no key {}", convert::quote(&key)),
        )),
        None => Err(arg_err(
            0,
            format!("the given object has no attribute {}", convert::quote(&key)),
        )),
    }
}

fn element_ret(a: &[Value]) -> Type {
    match a.first().map(Value::type_of) {
        Some(Type::List(e)) => *e,
        Some(Type::Tuple(ts)) => match a.get(1).and_then(Value::as_number).and_then(Number::to_i64)
        {
            Some(i) if !ts.is_empty() && i >= 0 => ts[i as usize % ts.len()].clone(),
            _ => Type::Dynamic,
        },
        _ => Type::Dynamic,
    }
}

/// `element(list, index)`: the element at `index` modulo the length. A list with unknown
/// elements gives the chosen element (known or not); an unknown list → unknown.
fn element(a: Vec<Value>, _: &FunctionContext) -> Res {
    let idx = int_arg(1, &a[1], "index")?;
    let list = &a[0];
    if let Value::Unknown(_) = list {
        return Ok(Value::Unknown(element_ret(&a)));
    }
    let elems = match list {
        Value::List(e) | Value::Tuple(e) => e,
        Value::Set(_) => {
            return Err(call_err(format!(
                "cannot read elements from {}",
                friendly_name(&list.type_of(), false)
            )))
        }
        other => {
            return Err(call_err(format!(
                "cannot read elements from {}",
                friendly_name(&other.type_of(), false)
            )))
        }
    };
    if elems.is_empty() {
        return Err(call_err("cannot use element function with an empty list"));
    }
    if idx < 0 {
        return Err(call_err(
            "cannot use element function with a negative index",
        ));
    }
    Ok(elems[idx as usize % elems.len()].clone())
}

/// `index(list, value)`: the first index of `value`. Unknown list or value → unknown; an
/// unknown element before a match makes the answer unknown.
fn index(a: Vec<Value>, _: &FunctionContext) -> Res {
    let elems = match &a[0] {
        Value::List(e) | Value::Tuple(e) => e,
        _ => return Err(call_err("argument must be a list or tuple")),
    };
    for (i, e) in elems.iter().enumerate() {
        match equals(e, &a[1]) {
            Value::Bool(true) => return Ok(num(i)),
            Value::Bool(false) => {}
            _ => return Ok(Value::Unknown(Type::Number)),
        }
    }
    Err(call_err("item not found"))
}

/// `flatten(list)`: nested lists, sets and tuples made into one flat sequence (a tuple).
/// Unknown nested sequences make the result unknown; unknown leaves are kept.
fn flatten(a: Vec<Value>, _: &FunctionContext) -> Res {
    /// Appends the leaves of `v` to `out` (sensitive when a sequence around them was); false
    /// when a nested sequence is unknown.
    fn walk(v: Value, marked: bool, out: &mut Vec<Value>) -> bool {
        match v {
            Value::List(e) | Value::Set(e) | Value::Tuple(e) => {
                for x in e {
                    if !walk(x, marked, out) {
                        return false;
                    }
                }
                true
            }
            Value::Unknown(Type::List(_) | Type::Set(_) | Type::Tuple(_) | Type::Dynamic) => false,
            Value::Sensitive(inner) if is_seq(&inner) => walk(*inner, true, out),
            other => {
                out.push(if marked { other.sensitive() } else { other });
                true
            }
        }
    }
    let list = a.into_iter().next().unwrap_or(Value::null());
    if !is_seq(&list) {
        return Err(call_err("can only flatten lists, sets and tuples"));
    }
    let mut out = Vec::new();
    if !walk(list, false, &mut out) {
        return Ok(Value::Unknown(Type::Dynamic));
    }
    Ok(Value::Tuple(out))
}

/// `distinct(list)`: first occurrences, in order. Unknown elements → unknown list.
fn distinct(a: Vec<Value>, _: &FunctionContext) -> Res {
    let list = a.into_iter().next().unwrap_or(Value::null());
    if !list.is_wholly_known() {
        return Ok(Value::Unknown(list.type_of()));
    }
    let mut out: Vec<Value> = Vec::new();
    for e in elems_of(list) {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    Ok(Value::List(out))
}

/// `contains(list, value)`: true as soon as a known element equals `value`; unknown when no
/// element is equal but some comparison was unknown.
fn contains(a: Vec<Value>, _: &FunctionContext) -> Res {
    let elems = match &a[0] {
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => e,
        _ => return Err(call_err("argument must be list, tuple, or set")),
    };
    let mut unknown = false;
    for e in elems {
        match equals(e, &a[1]) {
            Value::Bool(true) => return Ok(Value::Bool(true)),
            Value::Bool(false) => {}
            _ => unknown = true,
        }
    }
    Ok(if unknown {
        Value::Unknown(Type::Bool)
    } else {
        Value::Bool(false)
    })
}

/// `range(limit)`, `range(start, limit)`, `range(start, limit, step)`: at most 1024 numbers.
/// Unknown → unknown list.
fn range(a: Vec<Value>, _: &FunctionContext) -> Res {
    let n = |v: &Value| v.as_number().map(|n| (*n.0).clone()).unwrap_or_default();
    let zero = BigDecimal::from(0);
    let (start, limit, step) = match a.len() {
        1 => (zero.clone(), n(&a[0]), None),
        2 => (n(&a[0]), n(&a[1]), None),
        3 => (n(&a[0]), n(&a[1]), Some(n(&a[2]))),
        _ => return Err(call_err("must have one, two, or three arguments")),
    };
    let start_negative_zero = a.len() > 1 && a[0].as_number().is_some_and(Number::is_negative_zero);
    let step = match step {
        Some(s) => {
            if s < zero && limit > start {
                return Err(arg_err(
                    2,
                    "end must be less than start when step is negative",
                ));
            }
            if s > zero && limit < start {
                return Err(arg_err(
                    2,
                    "end must be greater than start when step is positive",
                ));
            }
            s
        }
        None if limit < start => BigDecimal::from(-1),
        None => BigDecimal::from(1),
    };
    let mut out = Vec::new();
    let mut x = start;
    let up = step > zero;
    // `range(-0, 1)` starts at `-0`, as cty's does.
    let mut first_negative_zero = start_negative_zero;
    while (up && x < limit) || (!up && x > limit) || (step == zero && x != limit) {
        if out.len() >= 1024 {
            return Err(call_err(
                "more than 1024 values were generated; either decrease the difference \
                 between start and end or use a smaller step",
            ));
        }
        out.push(Value::Number(
            match std::mem::take(&mut first_negative_zero) {
                true => Number::negative_zero(),
                false => Number::new(x.normalized()),
            },
        ));
        x += &step;
    }
    Ok(Value::List(out))
}

/// `zipmap(keys, values)`: a map (values a list) or an object (values a tuple). Unknown →
/// unknown.
fn zipmap(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut it = a.into_iter();
    let keys = elems_of(it.next().unwrap_or(Value::null()));
    let vals = it.next().unwrap_or(Value::null());
    let is_tuple = matches!(vals, Value::Tuple(_));
    let vals = match vals {
        Value::List(e) | Value::Tuple(e) => e,
        _ => return Err(call_err("values argument must be a list or tuple value")),
    };
    if keys.len() != vals.len() {
        return Err(call_err(format!(
            "number of keys ({}) does not match number of values ({})",
            keys.len(),
            vals.len()
        )));
    }
    if keys.iter().any(|k| !k.is_wholly_known()) {
        return Ok(Value::Unknown(Type::Dynamic));
    }
    // Pairs in the lists' order (a later key wins), sorted once.
    let mut m = Vec::new();
    for (i, (k, v)) in keys.into_iter().zip(vals).enumerate() {
        match k.as_str() {
            Some(k) => {
                m.push((k.to_string(), v));
            }
            None => return Err(arg_err(0, format!("element {i} is null"))),
        }
    }
    let m: ValueMap = m.into_iter().collect();
    Ok(if is_tuple {
        Value::Object(m)
    } else {
        Value::Map(m)
    })
}

/// `setproduct(sets...)`: every combination, as tuples; a set if any argument is a set,
/// otherwise a list. Unknown elements → unknown result.
fn setproduct(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.len() < 2 {
        return Err(call_err("at least two arguments are required"));
    }
    let any_set = a.iter().any(|v| matches!(v, Value::Set(_)));
    for (i, v) in a.iter().enumerate() {
        if !is_seq(v) {
            return Err(arg_err(i, "a set or a list is required"));
        }
    }
    if a.iter().any(|v| !v.is_wholly_known()) {
        return Ok(Value::Unknown(Type::Dynamic));
    }
    let mut combos: Vec<Vec<Value>> = vec![Vec::new()];
    for v in a {
        let elems = elems_of(v);
        let mut next = Vec::new();
        for c in &combos {
            for e in &elems {
                let mut c = c.clone();
                c.push(e.clone());
                next.push(c);
            }
        }
        combos = next;
    }
    let out: Vec<Value> = combos.into_iter().map(Value::Tuple).collect();
    Ok(if any_set {
        Value::set(out)
    } else {
        Value::List(out)
    })
}

fn set_ret(a: &[Value]) -> Type {
    let tys: Vec<Type> = a.iter().map(|v| elem_type(&v.type_of())).collect();
    Type::set(unify(&tys).unwrap_or(Type::Dynamic))
}

/// Converts set arguments to one common element type.
fn unify_sets(a: Vec<Value>) -> Result<Vec<Vec<Value>>, Fail> {
    let tys: Vec<Type> = a
        .iter()
        .filter(|v| !v.elements().is_some_and(|e| e.is_empty()))
        .map(|v| elem_type(&v.type_of()))
        .collect();
    let et =
        unify(&tys).ok_or_else(|| call_err("given sets must all have compatible element types"))?;
    a.into_iter()
        .map(|v| {
            elems_of(v)
                .into_iter()
                .map(|e| convert::convert(e, &et).map_err(|e| call_err(e.to_string())))
                .collect()
        })
        .collect()
}

/// `setunion(sets...)`: unknown elements anywhere → unknown set.
fn setunion(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.iter().any(|v| !v.is_wholly_known()) {
        return Ok(Value::Unknown(set_ret(&a)));
    }
    Ok(Value::set(unify_sets(a)?.into_iter().flatten().collect()))
}

/// `setintersection(sets...)`: unknown elements anywhere → unknown set.
fn setintersection(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.iter().any(|v| !v.is_wholly_known()) {
        return Ok(Value::Unknown(set_ret(&a)));
    }
    let mut sets = unify_sets(a)?.into_iter();
    let first = sets.next().unwrap_or_default();
    let rest: Vec<Vec<Value>> = sets.collect();
    Ok(Value::set(
        first
            .into_iter()
            .filter(|e| rest.iter().all(|s| s.contains(e)))
            .collect(),
    ))
}

/// `setsubtract(a, b)`: unknown elements anywhere → unknown set.
fn setsubtract(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.iter().any(|v| !v.is_wholly_known()) {
        return Ok(Value::Unknown(set_ret(&a)));
    }
    let mut sets = unify_sets(a)?.into_iter();
    let first = sets.next().unwrap_or_default();
    let second = sets.next().unwrap_or_default();
    Ok(Value::set(
        first.into_iter().filter(|e| !second.contains(e)).collect(),
    ))
}

/// `slice(list, start_index, end_index)`: elements from start up to (not including) end.
/// Unknown → unknown.
fn slice(a: Vec<Value>, _: &FunctionContext) -> Res {
    let start = int_arg(1, &a[1], "start index")?;
    let end = int_arg(2, &a[2], "end index")?;
    let is_tuple = matches!(a[0], Value::Tuple(_));
    let elems = match &a[0] {
        Value::List(e) | Value::Tuple(e) => e,
        _ => return Err(arg_err(0, "must be a list or tuple value")),
    };
    if start < 0 {
        return Err(arg_err(1, "start index must not be less than zero"));
    }
    if end > elems.len() as i64 {
        return Err(arg_err(
            2,
            "end index must not be greater than the length of the list",
        ));
    }
    if start > end {
        return Err(arg_err(1, "start index must not be greater than end index"));
    }
    let part = elems[start as usize..end as usize].to_vec();
    Ok(if is_tuple {
        Value::Tuple(part)
    } else {
        Value::List(part)
    })
}

/// `sort(list)`: strings in lexical (byte) order. Unknown elements → unknown list.
fn sort(a: Vec<Value>, _: &FunctionContext) -> Res {
    let list = a.into_iter().next().unwrap_or(Value::null());
    if !list.is_wholly_known() {
        return Ok(Value::Unknown(Type::list(Type::String)));
    }
    let mut items = Vec::new();
    for (i, e) in elems_of(list).into_iter().enumerate() {
        match e.as_str() {
            Some(s) => items.push(s.to_string()),
            None => {
                return Err(call_err(format!(
                    "given list element {i} is null; a null string cannot be sorted"
                )))
            }
        }
    }
    items.sort();
    Ok(Value::List(items.into_iter().map(Value::String).collect()))
}

fn reverse_ret(a: &[Value]) -> Type {
    match a.first().map(Value::type_of) {
        Some(Type::Tuple(mut ts)) => {
            ts.reverse();
            Type::Tuple(ts)
        }
        Some(Type::List(e) | Type::Set(e)) => Type::list(*e),
        _ => Type::Dynamic,
    }
}

/// `reverse(list)`: a list (sets come out as lists) or a tuple. Unknown → unknown.
fn reverse(a: Vec<Value>, _: &FunctionContext) -> Res {
    match a.into_iter().next().unwrap_or(Value::null()) {
        Value::List(mut e) | Value::Set(mut e) => {
            e.reverse();
            Ok(Value::List(e))
        }
        Value::Tuple(mut e) => {
            e.reverse();
            Ok(Value::Tuple(e))
        }
        other => Err(arg_err(
            0,
            format!(
                "can only reverse list or tuple values, not {}",
                friendly_name(&other.type_of(), false)
            ),
        )),
    }
}

fn chunk_ret(a: &[Value]) -> Type {
    Type::list(a.first().map(Value::type_of).unwrap_or(Type::Dynamic))
}

/// `chunklist(list, size)`: lists of `size` elements (the last may be shorter); size 0 gives
/// the whole list as one chunk. Unknown → unknown.
fn chunklist(a: Vec<Value>, _: &FunctionContext) -> Res {
    let size = int_arg(1, &a[1], "size")?;
    if size < 0 {
        return Err(call_err("the size argument must be positive"));
    }
    let elems = elems_of(a.into_iter().next().unwrap_or(Value::null()));
    if elems.is_empty() {
        return Ok(Value::List(Vec::new()));
    }
    if size == 0 {
        return Ok(Value::List(vec![Value::List(elems)]));
    }
    Ok(Value::List(
        elems
            .chunks(size as usize)
            .map(|c| Value::List(c.to_vec()))
            .collect(),
    ))
}

/// `coalesce(vals...)`: the first argument that is neither null nor an empty string, converted
/// to the arguments' common type. An unknown argument reached before a result makes the result
/// unknown; arguments after the result do not matter.
fn coalesce(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.is_empty() {
        return Err(call_err("all arguments must have the same type"));
    }
    let tys: Vec<Type> = a
        .iter()
        .filter(|v| !matches!(v.unmarked(), Value::Null(Type::Dynamic)))
        .map(Value::type_of)
        .collect();
    let ty = unify(&tys).ok_or_else(|| call_err("all arguments must have the same type"))?;
    for v in a {
        if v.is_unknown() {
            return Ok(Value::Unknown(ty));
        }
        if v.is_null() || v.as_str() == Some("") {
            continue;
        }
        return convert::convert(v, &ty).map_err(|e| call_err(e.to_string()));
    }
    Err(call_err("no non-null, non-empty-string arguments"))
}

/// `coalescelist(vals...)`: the first non-empty list or tuple. An unknown argument reached
/// before a result makes the result unknown.
fn coalescelist(a: Vec<Value>, _: &FunctionContext) -> Res {
    if a.is_empty() {
        return Err(call_err("at least one argument is required"));
    }
    if a.iter()
        .any(|v| !v.is_unknown() && (!is_seq(v) || v.is_null()))
    {
        return Err(call_err("coalescelist arguments must be lists or tuples"));
    }
    for v in a {
        if v.is_unknown() {
            return Ok(Value::Unknown(Type::Dynamic));
        }
        if v.elements().is_some_and(|e| !e.is_empty()) {
            return Ok(v);
        }
    }
    Err(call_err("no non-null arguments"))
}

/// `compact(list)`: drops null and empty strings. Unknown elements → unknown list.
fn compact(a: Vec<Value>, _: &FunctionContext) -> Res {
    let list = a.into_iter().next().unwrap_or(Value::null());
    if !list.is_wholly_known() {
        return Ok(Value::Unknown(Type::list(Type::String)));
    }
    Ok(Value::List(
        elems_of(list)
            .into_iter()
            .filter(|e| !e.is_null() && e.as_str() != Some(""))
            .collect(),
    ))
}

fn one_ret(a: &[Value]) -> Type {
    match a.first().map(Value::type_of) {
        Some(Type::List(e) | Type::Set(e)) => *e,
        Some(Type::Tuple(ts)) if ts.len() == 1 => ts[0].clone(),
        _ => Type::Dynamic,
    }
}

/// `one(list)`: null for an empty collection, the element for a one-element one, else an
/// error. Unknown → unknown of the element type.
fn one(a: Vec<Value>, _: &FunctionContext) -> Res {
    let list = a.into_iter().next().unwrap_or(Value::null());
    let ty = one_ret(std::slice::from_ref(&list));
    if matches!(list, Value::Set(_)) && !list.is_wholly_known() {
        return Ok(Value::Unknown(ty));
    }
    if !is_seq(&list) {
        return Err(arg_err(
            0,
            "must be a list, set, or tuple value with either zero or one elements",
        ));
    }
    let mut e = elems_of(list);
    match e.len() {
        0 => Ok(Value::Null(ty)),
        1 => Ok(e.remove(0)),
        _ => Err(arg_err(
            0,
            "must be a list, set, or tuple value with either zero or one elements",
        )),
    }
}

/// `alltrue(list)`: false if any element is false or null; unknown if an element is unknown
/// and none is false.
fn alltrue(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut unknown = false;
    for e in elems_of(a.into_iter().next().unwrap_or(Value::null())) {
        match e.unmarked() {
            Value::Unknown(_) => unknown = true,
            Value::Bool(true) => {}
            _ => return Ok(Value::Bool(false)),
        }
    }
    Ok(if unknown {
        Value::Unknown(Type::Bool)
    } else {
        Value::Bool(true)
    })
}

/// `anytrue(list)`: true if any element is true; unknown if an element is unknown and none is
/// true.
fn anytrue(a: Vec<Value>, _: &FunctionContext) -> Res {
    let mut unknown = false;
    for e in elems_of(a.into_iter().next().unwrap_or(Value::null())) {
        match e.unmarked() {
            Value::Unknown(_) => unknown = true,
            Value::Bool(true) => return Ok(Value::Bool(true)),
            _ => {}
        }
    }
    Ok(if unknown {
        Value::Unknown(Type::Bool)
    } else {
        Value::Bool(false)
    })
}

/// `transpose(map)`: swaps keys and values of a map of lists of strings. Unknown elements →
/// unknown map.
fn transpose(a: Vec<Value>, _: &FunctionContext) -> Res {
    let m = a.into_iter().next().unwrap_or(Value::null());
    if !m.is_wholly_known() {
        return Ok(Value::Unknown(Type::map(Type::list(Type::String))));
    }
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (k, list) in entries_of(m) {
        for v in elems_of(list) {
            match v.as_str() {
                Some(s) => out
                    .entry(s.to_string())
                    .or_default()
                    .push(Value::String(k.clone())),
                None => return Err(arg_err(0, "input must not contain null list elements")),
            }
        }
    }
    Ok(Value::Map(
        out.into_iter().map(|(k, v)| (k, Value::List(v))).collect(),
    ))
}

/// `sum(list)`: the exact sum of numbers (strings convert). Unknown elements → unknown.
fn sum(a: Vec<Value>, _: &FunctionContext) -> Res {
    let list = a.into_iter().next().unwrap_or(Value::null());
    if !is_seq(&list) {
        return Err(arg_err(0, "cannot sum noniterable"));
    }
    if !list.is_wholly_known() {
        return Ok(Value::Unknown(Type::Number));
    }
    let elems = elems_of(list);
    if elems.is_empty() {
        return Err(arg_err(0, "cannot sum an empty list"));
    }
    // From the first element, as cty sums (`sum([-0])` is `-0`).
    let mut total: Option<Number> = None;
    for e in elems {
        if e.is_null() {
            return Err(arg_err(
                0,
                "argument must be list, set, or tuple of number values",
            ));
        }
        match convert::convert(e, &Type::Number) {
            Ok(Value::Number(n)) => {
                total = Some(match total {
                    Some(t) => t.add(&n),
                    None => n,
                })
            }
            _ => {
                return Err(arg_err(
                    0,
                    "argument must be list, set, or tuple of number values",
                ))
            }
        }
    }
    let total = total.unwrap_or_else(|| Number::from_i64(0));
    let normalized = Number::new(total.0.normalized());
    Ok(Value::Number(match total.is_negative_zero() {
        true => total,
        false => normalized,
    }))
}

/// `matchkeys(values, keys, searchset)`: the elements of `values` whose corresponding `keys`
/// element is in `searchset`. Unknown elements → unknown list.
fn matchkeys(a: Vec<Value>, _: &FunctionContext) -> Res {
    let ty = a[0].type_of();
    if a.iter().any(|v| !v.is_wholly_known()) {
        return Ok(Value::Unknown(ty));
    }
    let mut it = a.into_iter();
    let values = elems_of(it.next().unwrap_or(Value::null()));
    let keys = elems_of(it.next().unwrap_or(Value::null()));
    let search = elems_of(it.next().unwrap_or(Value::null()));
    if values.len() != keys.len() {
        return Err(call_err("length of keys and values should be equal"));
    }
    Ok(Value::List(
        values
            .into_iter()
            .zip(keys)
            .filter(|(_, k)| search.iter().any(|s| equals(s, k) == Value::Bool(true)))
            .map(|(v, _)| v)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::value::{Type, Value};

    fn set(v: Vec<Value>) -> Value {
        Value::set(v)
    }

    #[test]
    fn shapes() {
        check("length", vec![s("e\u{301}a")], n(2));
        check("length", vec![obj(vec![("a", n(1))])], n(1));
        check("length", vec![tup(vec![unk(Type::String), n(1)])], n(2));
        check(
            "length",
            vec![unk(Type::list(Type::String))],
            unk(Type::Number),
        );
        check("length", vec![unk(Type::Tuple(vec![Type::String]))], n(1));
        check("length", vec![tup(vec![s("a").sensitive()])], n(1));
        check("length", vec![strs(&["a"]).sensitive()], n(1).sensitive());
        check_err(
            "length",
            vec![n(1)],
            "Call to function \"length\" failed: argument must be a string, a collection type, \
             or a structural type.",
        );
        check(
            "keys",
            vec![obj(vec![("b", n(1)), ("a", s("x"))])],
            strs(&["a", "b"]),
        );
        check("keys", vec![map(vec![("b", n(1))])], slist(&["b"]));
        check(
            "keys",
            vec![unk(Type::object([("z".into(), Type::String)]))],
            strs(&["z"]),
        );
        check(
            "values",
            vec![obj(vec![("b", n(1)), ("a", s("x"))])],
            tup(vec![s("x"), n(1)]),
        );
    }

    #[test]
    fn marks_stay_on_the_parts_they_were_on() {
        // Each expectation checked with `terraform console` (1.11).
        let one_secret = || tup(vec![n(1).sensitive(), n(2)]);
        check(
            "lookup",
            vec![obj(vec![("a", n(1).sensitive()), ("b", n(2))]), s("b")],
            n(2),
        );
        check("element", vec![one_secret(), n(1)], n(2));
        check(
            "concat",
            vec![one_secret(), tup(vec![n(3)])],
            tup(vec![n(1).sensitive(), n(2), n(3)]),
        );
        check(
            "keys",
            vec![obj(vec![("a", n(1).sensitive())])],
            strs(&["a"]),
        );
        check(
            "keys",
            vec![obj(vec![("a", n(1))]).sensitive()],
            strs(&["a"]).sensitive(),
        );
        check(
            "values",
            vec![obj(vec![("a", n(1).sensitive())])],
            tup(vec![n(1).sensitive()]),
        );
        check(
            "flatten",
            vec![tup(vec![
                tup(vec![n(1).sensitive()]),
                tup(vec![n(2)]).sensitive(),
            ])],
            tup(vec![n(1).sensitive(), n(2).sensitive()]),
        );
        check("slice", vec![one_secret(), n(1), n(2)], tup(vec![n(2)]));
        check(
            "reverse",
            vec![one_secret()],
            tup(vec![n(2), n(1).sensitive()]),
        );
        check(
            "zipmap",
            vec![strs(&["a", "b"]), one_secret()],
            obj(vec![("a", n(1).sensitive()), ("b", n(2))]),
        );
        check("index", vec![one_secret(), n(2)], n(1).sensitive());
        check("contains", vec![one_secret(), n(2)], b(true).sensitive());
        check("length", vec![s("abc").sensitive()], n(3).sensitive());
    }

    #[test]
    fn concat_and_merge() {
        check(
            "concat",
            vec![strs(&["a"]), tup(vec![n(1)])],
            tup(vec![s("a"), n(1)]),
        );
        check(
            "concat",
            vec![slist(&["a"]), slist(&["b"])],
            slist(&["a", "b"]),
        );
        check_err(
            "concat",
            vec![set(vec![s("a")])],
            "Invalid value for \"seqs\" parameter: all arguments must be lists or tuples; got \
             set of string.",
        );
        check(
            "merge",
            vec![
                obj(vec![("a", n(1))]),
                obj(vec![("b", s("x"))]),
                Value::null(),
            ],
            obj(vec![("a", n(1)), ("b", s("x"))]),
        );
        check(
            "merge",
            vec![map(vec![("a", n(1))]), map(vec![("b", n(2)), ("a", n(3))])],
            map(vec![("a", n(3)), ("b", n(2))]),
        );
        check_err(
            "merge",
            vec![obj(vec![("a", n(1))]), s("x")],
            "Call to function \"merge\" failed: arguments must be maps or objects, got \
             \"string\".",
        );
        check(
            "merge",
            vec![obj(vec![("a", s("s").sensitive())]), obj(vec![("b", n(1))])],
            obj(vec![("a", s("s").sensitive()), ("b", n(1))]),
        );
        check(
            "merge",
            vec![unk(Type::Dynamic), obj(vec![])],
            unk(Type::Dynamic),
        );
    }

    #[test]
    fn lookup_element_index() {
        check(
            "lookup",
            vec![obj(vec![("a", n(1))]), s("b"), s("x")],
            s("x"),
        );
        check("lookup", vec![map(vec![("a", n(1))]), s("b"), s("7")], n(7));
        check(
            "lookup",
            vec![map(vec![("a", unk(Type::Number)), ("b", n(2))]), s("b")],
            n(2),
        );
        check_err(
            "lookup",
            vec![obj(vec![("a", n(1))]), s("b")],
            "Invalid value for \"inputMap\" parameter: the given object has no attribute \"b\".",
        );
        check("element", vec![strs(&["a", "b"]), n(5)], s("b"));
        check(
            "element",
            vec![tup(vec![s("a"), unk(Type::String)]), n(0)],
            s("a"),
        );
        check_err(
            "element",
            vec![tup(vec![]), n(0)],
            "Call to function \"element\" failed: cannot use element function with an empty \
             list.",
        );
        check("index", vec![strs(&["a", "b"]), s("b")], n(1));
        check_err(
            "index",
            vec![strs(&["a"]), s("b")],
            "Call to function \"index\" failed: item not found.",
        );
        check(
            "contains",
            vec![tup(vec![unk(Type::String), s("a")]), s("a")],
            b(true),
        );
        check(
            "contains",
            vec![tup(vec![unk(Type::String)]), s("a")],
            unk(Type::Bool),
        );
        check("contains", vec![strs(&["b"]), s("a")], b(false));
    }

    #[test]
    fn sequences() {
        check("range", vec![n(3)], list(vec![n(0), n(1), n(2)]));
        check("range", vec![n(1), n(0)], list(vec![n(1)]));
        check(
            "range",
            vec![n(0), n(1), num("0.25")],
            list(vec![n(0), num("0.25"), num("0.5"), num("0.75")]),
        );
        check_err(
            "range",
            vec![n(0), n(1), n(-1)],
            "Invalid value for \"params\" parameter: end must be less than start when step is \
             negative.",
        );
        check_err(
            "range",
            vec![n(2000)],
            "Call to function \"range\" failed: more than 1024 values were generated; either \
             decrease the difference between start and end or use a smaller step.",
        );
        check(
            "flatten",
            vec![tup(vec![
                tup(vec![n(1), tup(vec![n(2)])]),
                n(3),
                set(vec![n(4)]),
            ])],
            tup(vec![n(1), n(2), n(3), n(4)]),
        );
        check(
            "flatten",
            vec![tup(vec![unk(Type::list(Type::Number))])],
            unk(Type::Dynamic),
        );
        check(
            "distinct",
            vec![tup(vec![n(1), s("1"), n(2)])],
            slist(&["1", "2"]),
        );
        check(
            "slice",
            vec![tup(vec![n(1), n(2), n(3)]), n(1), n(3)],
            tup(vec![n(2), n(3)]),
        );
        check_err(
            "slice",
            vec![tup(vec![n(1), n(2), n(3)]), n(1), n(5)],
            "Invalid value for \"end_index\" parameter: end index must not be greater than the \
             length of the list.",
        );
        check(
            "sort",
            vec![tup(vec![n(3), n(1), n(11)])],
            slist(&["1", "11", "3"]),
        );
        check(
            "reverse",
            vec![set(vec![n(2), n(1)])],
            list(vec![n(2), n(1)]),
        );
        check(
            "chunklist",
            vec![tup(vec![n(1), n(2), n(3)]), n(2)],
            list(vec![list(vec![n(1), n(2)]), list(vec![n(3)])]),
        );
        check(
            "chunklist",
            vec![tup(vec![n(1), n(2), n(3)]), n(0)],
            list(vec![list(vec![n(1), n(2), n(3)])]),
        );
        check(
            "compact",
            vec![tup(vec![s("a"), s(""), Value::null()])],
            slist(&["a"]),
        );
        check("one", vec![tup(vec![])], Value::Null(Type::Dynamic));
        check("one", vec![slist(&["a"])], s("a"));
        check_err(
            "one",
            vec![tup(vec![n(1), n(2)])],
            "Invalid value for \"list\" parameter: must be a list, set, or tuple value with \
             either zero or one elements.",
        );
    }

    #[test]
    fn maps_and_sets() {
        check(
            "zipmap",
            vec![strs(&["a", "b"]), tup(vec![n(1), s("x")])],
            obj(vec![("a", n(1)), ("b", s("x"))]),
        );
        check_err(
            "zipmap",
            vec![strs(&["a"]), tup(vec![n(1), n(2)])],
            "Call to function \"zipmap\" failed: number of keys (1) does not match number of \
             values (2).",
        );
        check(
            "setproduct",
            vec![strs(&["a"]), tup(vec![n(1), n(2)])],
            list(vec![tup(vec![s("a"), n(1)]), tup(vec![s("a"), n(2)])]),
        );
        check(
            "setunion",
            vec![tup(vec![n(1)]), strs(&["a"])],
            set(vec![s("1"), s("a")]),
        );
        check(
            "setintersection",
            vec![tup(vec![n(1), n(2)]), tup(vec![n(2)])],
            set(vec![n(2)]),
        );
        check(
            "setsubtract",
            vec![tup(vec![n(1), n(2)]), tup(vec![n(2)])],
            set(vec![n(1)]),
        );
        check(
            "transpose",
            vec![obj(vec![("a", strs(&["1", "2"])), ("b", strs(&["2"]))])],
            map(vec![("1", slist(&["a"])), ("2", slist(&["a", "b"]))]),
        );
        check(
            "matchkeys",
            vec![strs(&["i-1", "i-2"]), strs(&["a", "b"]), strs(&["b"])],
            slist(&["i-2"]),
        );
    }

    #[test]
    fn coalescing_and_booleans() {
        check("coalesce", vec![s(""), Value::null(), s("b")], s("b"));
        check("coalesce", vec![n(1), s("a")], s("1"));
        check("coalesce", vec![s("a"), unk(Type::String)], s("a"));
        check(
            "coalesce",
            vec![unk(Type::String), s("a")],
            unk(Type::String),
        );
        check_err(
            "coalesce",
            vec![Value::null(), s("")],
            "Call to function \"coalesce\" failed: no non-null, non-empty-string arguments.",
        );
        check(
            "coalescelist",
            vec![tup(vec![]), strs(&["a"])],
            strs(&["a"]),
        );
        check("alltrue", vec![tup(vec![b(true), Value::null()])], b(false));
        check(
            "alltrue",
            vec![tup(vec![b(true), unk(Type::Bool)])],
            unk(Type::Bool),
        );
        check("anytrue", vec![tup(vec![Value::null()])], b(false));
        check(
            "anytrue",
            vec![tup(vec![unk(Type::Bool), b(true)])],
            b(true),
        );
        check("sum", vec![tup(vec![n(1), s("2")])], n(3));
        check("sum", vec![tup(vec![num("0.1"), num("0.2")])], num("0.3"));
        check(
            "sum",
            vec![tup(vec![num("9007199254740993"), n(1)])],
            num("9007199254740994"),
        );
        check_err(
            "sum",
            vec![tup(vec![])],
            "Invalid value for \"list\" parameter: cannot sum an empty list.",
        );
    }
}
