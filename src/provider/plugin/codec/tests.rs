//! The wire codec: fixed bytes from cty's encoder, and the round trip of random values of
//! random types (with nulls and unknowns at every depth).

use super::*;
use crate::provider::schema_util::same;
use proptest::prelude::*;

fn obj(attrs: &[(&str, Type)]) -> Type {
    Type::object(attrs.iter().map(|(k, t)| (k.to_string(), t.clone())))
}

#[test]
fn bytes_as_cty_writes_them() {
    let ty = obj(&[("id", Type::String), ("n", Type::Number), ("b", Type::Bool)]);
    let v = Value::object([
        ("id", Value::Unknown(Type::String)),
        ("n", Value::int(1)),
        ("b", Value::Null(Type::Bool)),
    ]);
    let bytes = encode(&v, &ty).unwrap();
    // fixmap 3: "b" nil, "id" ext0, "n" 1 (keys in the type's order)
    assert_eq!(
        bytes,
        vec![0x83, 0xa1, b'b', 0xc0, 0xa2, b'i', b'd', 0xd4, 0x00, 0x00, 0xa1, b'n', 0x01]
    );
    assert_eq!(decode(&bytes, &ty).unwrap(), v);
}

#[test]
fn refined_unknowns_and_any_extension_decode_as_unknown() {
    // ext 12 with a refinement map {1: true} (not null), as Terraform >= 1.6 sends.
    let refined = vec![0xc7, 0x03, 0x0c, 0x81, 0x01, 0xc3];
    assert_eq!(
        decode(&refined, &Type::String).unwrap(),
        Value::Unknown(Type::String)
    );
    assert_eq!(
        decode(&[0xd4, 0x05, 0x00], &Type::Number).unwrap(),
        Value::Unknown(Type::Number)
    );
}

#[test]
fn big_numbers_stay_exact() {
    let big: Number = "123456789012345678901234567890.5".parse().unwrap();
    let bytes = encode(&Value::Number(big.clone()), &Type::Number).unwrap();
    assert_eq!(decode(&bytes, &Type::Number).unwrap(), Value::Number(big));
    let f = encode(&Value::Number("0.5".parse().unwrap()), &Type::Number).unwrap();
    assert_eq!(f[0], 0xcb, "0.5 is a float64");
    let u = encode(
        &Value::Number("18446744073709551615".parse().unwrap()),
        &Type::Number,
    )
    .unwrap();
    assert_eq!(u[0], 0xcf, "u64::MAX is a uint64");
}

#[test]
fn dynamic_values_carry_their_type() {
    let v = Value::List(vec![Value::string("a")]);
    let bytes = encode(&v, &Type::Dynamic).unwrap();
    let back = decode(&bytes, &Type::Dynamic).unwrap();
    assert_eq!(back, v);
    let json = decode_json(
        br#"{"value": ["a"], "type": ["list", "string"]}"#,
        &Type::Dynamic,
    )
    .unwrap();
    assert_eq!(json, v);
}

#[test]
fn wrong_shapes_are_errors_with_a_path() {
    let ty = obj(&[("tags", Type::map(Type::String))]);
    let e = encode(&Value::object([("tags", Value::Bool(true))]), &ty).unwrap_err();
    assert_eq!(e, "at tags: a map is required");
    let e = encode(&Value::object([("nope", Value::Bool(true))]), &ty).unwrap_err();
    assert!(e.contains("unsupported attribute \"nope\""), "{e}");
}

#[test]
fn type_json_round_trips() {
    for t in [
        r#""string""#,
        r#"["list",["set","number"]]"#,
        r#"["object",{"a":"bool","b":["map","dynamic"]}]"#,
        r#"["object",{"a":"bool"},["a"]]"#,
        r#"["tuple",["string","number"]]"#,
    ] {
        let j: serde_json::Value = serde_json::from_str(t).unwrap();
        assert_eq!(type_to_json(&type_from_json(&j).unwrap()), j);
    }
}

fn arb_type() -> impl Strategy<Value = Type> {
    let leaf = prop_oneof![
        Just(Type::String),
        Just(Type::Number),
        Just(Type::Bool),
        Just(Type::Dynamic),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(Type::list),
            inner.clone().prop_map(Type::set),
            inner.clone().prop_map(Type::map),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Type::Tuple),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4).prop_map(Type::object),
        ]
    })
}

fn arb_number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i64>().prop_map(Number::from_i64),
        (-1e12f64..1e12).prop_filter_map("finite", Number::from_f64),
        "[1-9][0-9]{20,30}(\\.[0-9]{1,5})?".prop_map(|s| s.parse().unwrap()),
    ]
}

/// A value of type `ty`: null or unknown anywhere, else a known value of that type.
fn arb_value(ty: Type) -> BoxedStrategy<Value> {
    let known: BoxedStrategy<Value> = match ty.clone() {
        Type::String => ".{0,6}".prop_map(Value::string).boxed(),
        Type::Number => arb_number().prop_map(Value::Number).boxed(),
        Type::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Type::Dynamic => prop_oneof![
            ".{0,4}".prop_map(Value::string),
            arb_number().prop_map(Value::Number),
            prop::collection::vec("[a-z]{0,3}".prop_map(Value::string), 0..3).prop_map(Value::List),
        ]
        .boxed(),
        Type::List(et) => prop::collection::vec(arb_value(*et), 0..3)
            .prop_map(Value::List)
            .boxed(),
        Type::Set(et) => prop::collection::vec(arb_value(*et), 0..3)
            .prop_map(Value::set)
            .boxed(),
        Type::Map(et) => prop::collection::btree_map("[a-z]{0,3}", arb_value(*et), 0..3)
            .prop_map(|m| Value::Map(m.into()))
            .boxed(),
        Type::Tuple(ets) => ets
            .into_iter()
            .map(arb_value)
            .collect::<Vec<_>>()
            .prop_map(Value::Tuple)
            .boxed(),
        Type::Object(attrs, _) => attrs
            .into_iter()
            .map(|(k, t)| arb_value(t).prop_map(move |v| (k.clone(), v)))
            .collect::<Vec<_>>()
            .prop_map(|kv| Value::Object(kv.into_iter().collect()))
            .boxed(),
    };
    prop_oneof![
        1 => Just(Value::Null(ty.clone())),
        1 => Just(Value::Unknown(ty.clone())),
        6 => known,
    ]
    .boxed()
}

/// Equal as values of the wire: nulls and unknowns compared without their types (a dynamic
/// null or unknown has no type on the wire), everything else exactly.
fn wire_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null(_), Value::Null(_)) | (Value::Unknown(_), Value::Unknown(_)) => true,
        (Value::List(x), Value::List(y))
        | (Value::Set(x), Value::Set(y))
        | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| wire_eq(a, b))
        }
        (Value::Map(x), Value::Map(y)) | (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, a), (kb, b))| ka == kb && wire_eq(a, b))
        }
        _ => a == b || same(a, b),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trip_against_the_schema_type(
        (ty, v) in arb_type().prop_flat_map(|t| (Just(t.clone()), arb_value(t)))
    ) {
        let bytes = encode(&v, &ty).unwrap();
        let back = decode(&bytes, &ty).unwrap();
        prop_assert!(wire_eq(&v, &back), "{v:?}\n!=\n{back:?}");
        // Encoding the decoded value gives the same bytes.
        prop_assert_eq!(encode(&back, &ty).unwrap(), bytes);
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..40), ty in arb_type()) {
        let _ = decode(&bytes, &ty);
    }
}
