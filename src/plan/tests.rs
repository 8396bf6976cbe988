//! Golden tests of the plan views: each test builds a `Plan` and compares its human text
//! (colour off, width 80) and its JSON with `fixtures/golden/plan/NAME.txt` / `NAME.json`.
//! `UPDATE_EXPECT=1 cargo test --lib plan::` rewrites the files.

use super::json::plan_json;
use super::render::render_plan;
use super::*;
use crate::addr::{ProviderAddr, ResourceInstanceAddr};
use crate::value::{Type, Value};
use std::path::PathBuf;

/// Renders `plan` both ways and compares with the golden files.
fn check_render(name: &str, plan: &Plan) {
    let text = render_plan(
        plan,
        &RenderOptions {
            color: false,
            width: 80,
        },
    );
    assert!(!text.contains('\x1b'), "colour off must not emit escapes");
    let json = serde_json::to_string_pretty(&plan_json(plan)).expect("JSON serializes") + "\n";
    check_golden(&format!("{name}.txt"), &text);
    check_golden(&format!("{name}.json"), &json);
}

fn check_golden(file: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/golden/plan")
        .join(file);
    expect_test::expect_file![path].assert_eq(actual);
}

// ---- builders -------------------------------------------------------------------------

fn addr(s: &str) -> ResourceInstanceAddr {
    s.parse().expect("test address")
}

fn provider(s: &str) -> ProviderAddr {
    s.parse().expect("test provider address")
}

fn s(x: &str) -> Value {
    Value::string(x)
}

fn n(i: i64) -> Value {
    Value::int(i)
}

fn unknown() -> Value {
    Value::Unknown(Type::String)
}

fn obj<const N: usize>(attrs: [(&str, Value); N]) -> Value {
    Value::object(attrs)
}

fn map<const N: usize>(attrs: [(&str, Value); N]) -> Value {
    Value::Map(attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn list<const N: usize>(elems: [Value; N]) -> Value {
    Value::List(elems.into())
}

/// A `sim_thing` as the provider reports it.
fn thing(name: &str, id: &str, value: Option<&str>) -> Value {
    obj([
        ("id", s(id)),
        ("name", s(name)),
        ("value", value.map(s).unwrap_or(Value::Null(Type::String))),
        ("out", s(&format!("{name}/{}", value.unwrap_or("-")))),
    ])
}

fn change(a: &str, action: Action, before: Option<Value>, after: Option<Value>) -> Change {
    let addr = addr(a);
    let provider =
        ProviderAddr::default_for(addr.resource.module.without_keys(), addr.resource.package());
    Change {
        addr,
        provider: provider.into(),
        action,
        before,
        after,
        replace_paths: vec![],
        reason: None,
        sensitive_attrs: vec![],
        diff_unavailable: false,
        importing: None,
        deposed: None,
    }
}

fn output(name: &str, action: Action, before: Option<Value>, after: Option<Value>) -> OutputChange {
    OutputChange {
        name: name.into(),
        action,
        before,
        after,
        sensitive: false,
    }
}

fn plan(mode: PlanMode, changes: Vec<Change>) -> Plan {
    let applyable = changes.iter().any(|c| c.action != Action::NoOp);
    Plan {
        mode,
        base_seq: 7,
        workspace: None,
        check_findings: Vec::new(),
        config_hash: "h".into(),
        changes,
        provider_changes: vec![],
        outputs: vec![],
        drift: vec![],
        refreshed_meta: Vec::new(),
        data_reads: vec![],
        dropped_data: vec![],
        variables: Default::default(),
        request: Default::default(),
        warnings: vec![],
        applyable,
        errored: false,
        graph: None,
        moves: vec![],
        shapes: BTreeMap::new(),
        sources: BTreeMap::new(),
    }
}

// ---- tests ----------------------------------------------------------------------------

#[test]
fn create_with_nested_values_and_unknowns() {
    let mut c = change(
        "sim_thing.a",
        Action::Create,
        None,
        Some(obj([
            ("id", unknown()),
            ("name", s("a")),
            ("value", s("hello \"world\"\nline two")),
            ("out", unknown()),
            ("tags", map([("env", s("dev")), ("team name", s("infra"))])),
            ("ports", list([n(80), n(443)])),
            ("empty", list([])),
            ("nothing", Value::Null(Type::String)),
            (
                "settings",
                obj([
                    ("enabled", Value::Bool(true)),
                    ("ratio", Value::Number("0.25".parse().expect("number"))),
                    ("later", unknown()),
                    (
                        "rules",
                        list([obj([("port", n(22)), ("cidr", s("10.0.0.0/8"))])]),
                    ),
                ]),
            ),
        ])),
    );
    c.provider = provider("provider[\"sim\"].east").into();
    let mut c2 = change(
        "module.net[\"a\"].sim_thing.web[0]",
        Action::Create,
        None,
        Some(obj([
            ("id", unknown()),
            ("name", s("web")),
            ("out", unknown()),
        ])),
    );
    c2.addr = addr("module.net[\"a\"].sim_thing.web[0]");
    let mut p = plan(PlanMode::Normal, vec![c2, c]);
    p.outputs = vec![output("web_id", Action::Create, None, Some(unknown()))];
    check_render("create", &p);
}

#[test]
fn update_hides_unchanged_attributes_and_shows_nested_diffs() {
    let before = obj([
        ("id", s("a-1")),
        ("name", s("a")),
        ("value", s("v1")),
        ("out", s("a/v1")),
        ("description", s("same")),
        ("size", n(3)),
        ("tags", map([("env", s("dev")), ("team", s("x"))])),
        ("labels", map([("a", s("1")), ("b", s("2")), ("c", s("3"))])),
        (
            "ports",
            list([n(1), n(2), n(3), n(4), n(5), n(6), n(7), n(8)]),
        ),
        ("zones", Value::set(vec![s("a"), s("b"), s("c")])),
        ("pair", Value::Tuple(vec![s("x"), n(1)])),
        (
            "rules",
            list([
                obj([("port", n(22)), ("proto", s("tcp")), ("note", s("ssh"))]),
                obj([("port", n(80)), ("proto", s("tcp")), ("note", s("web"))]),
            ]),
        ),
    ]);
    let after = obj([
        ("id", s("a-1")),
        ("name", s("a")),
        ("value", s("v2")),
        ("out", unknown()),
        ("description", s("same")),
        ("size", n(3)),
        ("tags", map([("env", s("prod")), ("team", s("x"))])),
        (
            "labels",
            map([("a", s("1")), ("b", s("two")), ("c", s("3")), ("d", s("4"))]),
        ),
        (
            "ports",
            list([n(1), n(2), n(3), n(40), n(5), n(6), n(7), n(8)]),
        ),
        ("zones", Value::set(vec![s("a"), s("c"), s("d")])),
        ("pair", Value::Tuple(vec![s("x"), n(2)])),
        (
            "rules",
            list([
                obj([("port", n(22)), ("proto", s("tcp")), ("note", s("ssh"))]),
                obj([("port", n(8080)), ("proto", s("tcp")), ("note", s("web"))]),
            ]),
        ),
    ]);
    let p = plan(
        PlanMode::Normal,
        vec![change(
            "sim_thing.a",
            Action::Update,
            Some(before),
            Some(after),
        )],
    );
    check_render("update", &p);
}

#[test]
fn replace_in_both_orders_marks_forcing_attributes() {
    let mut dtc = change(
        "sim_thing.a",
        Action::DeleteThenCreate,
        Some(thing("a", "a-1", Some("v"))),
        Some(obj([
            ("id", unknown()),
            ("name", s("b")),
            ("value", s("v")),
            ("out", unknown()),
        ])),
    );
    dtc.replace_paths = vec!["name".into()];
    dtc.reason = Some(Box::new(Reason::ReplaceBecauseCannotUpdate));
    let mut cbd = change(
        "sim_thing.c[\"k\"]",
        Action::CreateThenDelete,
        Some(obj([
            ("id", s("c-1")),
            ("name", s("c")),
            ("settings", obj([("zone", s("z1")), ("size", n(1))])),
        ])),
        Some(obj([
            ("id", unknown()),
            ("name", s("c")),
            ("settings", obj([("zone", s("z2")), ("size", n(1))])),
        ])),
    );
    cbd.replace_paths = vec!["settings.zone".into()];
    cbd.reason = Some(Box::new(Reason::ReplaceByRequest));
    let mut tainted = change(
        "sim_thing.t",
        Action::DeleteThenCreate,
        Some(thing("t", "t-1", None)),
        Some(obj([
            ("id", unknown()),
            ("name", s("t")),
            ("out", unknown()),
        ])),
    );
    tainted.reason = Some(Box::new(Reason::ReplaceBecauseTainted));
    let mut moved = change(
        "sim_thing.r",
        Action::DeleteThenCreate,
        Some(thing("r", "r-1", None)),
        Some(obj([
            ("id", unknown()),
            ("name", s("r")),
            ("out", unknown()),
        ])),
    );
    moved.reason = Some(Box::new(Reason::ReplaceBecauseProviderChanged {
        provider: provider("provider[\"sim\"].east"),
        from: None,
    }));
    moved.provider = provider("provider[\"sim\"].east").into();
    let mut p = plan(PlanMode::Normal, vec![dtc, cbd, tainted, moved]);
    p.provider_changes = vec![
        ProviderChange {
            addr: provider("provider[\"sim\"].east"),
            action: Action::DeleteThenCreate,
            before: Some(obj([("region", s("us")), ("latency_ms", n(0))])),
            after: Some(obj([("region", s("eu")), ("latency_ms", n(0))])),
            is_default: false,
        },
        ProviderChange {
            addr: provider("provider[\"sim\"].west"),
            action: Action::Create,
            before: None,
            after: Some(obj([("region", s("west"))])),
            is_default: false,
        },
    ];
    check_render("replace", &p);
}

#[test]
fn delete_says_why() {
    let mut gone = change(
        "sim_thing.gone",
        Action::Delete,
        Some(thing("gone", "gone-1", Some("x"))),
        None,
    );
    gone.reason = Some(Box::new(Reason::DeleteBecauseNoResourceConfig));
    let mut idx = change(
        "sim_thing.many[2]",
        Action::Delete,
        Some(thing("m2", "m2-1", None)),
        None,
    );
    idx.reason = Some(Box::new(Reason::DeleteBecauseCountIndex));
    let mut key = change(
        "sim_thing.each[\"b\"]",
        Action::Delete,
        Some(thing("b", "b-1", None)),
        None,
    );
    key.reason = Some(Box::new(Reason::DeleteBecauseEachKey));
    let mut module = change(
        "module.old.sim_thing.x",
        Action::Delete,
        Some(thing("x", "x-1", None)),
        None,
    );
    module.reason = Some(Box::new(Reason::DeleteBecauseNoModule));
    // A deposed object left by a create-before-destroy whose create failed part-way.
    let mut deposed = change(
        "sim_thing.gone",
        Action::Delete,
        Some(thing("gone", "gone-0", Some("x"))),
        None,
    );
    deposed.deposed = Some("4444c658".into());
    let mut p = plan(PlanMode::Normal, vec![gone, deposed, idx, key, module]);
    p.provider_changes = vec![ProviderChange {
        addr: provider("module.old.provider[\"sim\"]"),
        action: Action::Delete,
        before: Some(obj([])),
        after: None,
        is_default: true,
    }];
    p.outputs = vec![output("gone_id", Action::Delete, Some(s("gone-1")), None)];
    check_render("delete", &p);
}

#[test]
fn deferred_reads_name_their_reason_and_chain() {
    let upd = change(
        "sim_thing.a",
        Action::Update,
        Some(thing("a", "a-1", Some("v1"))),
        Some(obj([
            ("id", s("a-1")),
            ("name", s("a")),
            ("value", s("v2")),
            ("out", unknown()),
        ])),
    );
    let new = change(
        "sim_thing.b",
        Action::Create,
        None,
        Some(obj([
            ("id", unknown()),
            ("name", s("b")),
            ("out", unknown()),
        ])),
    );
    let mut pending = change(
        "data.sim_lookup.x",
        Action::Read,
        None,
        Some(obj([("key", s("k1")), ("result", unknown())])),
    );
    pending.reason = Some(Box::new(Reason::ReadBecauseDependencyPending {
        dependency: addr("sim_thing.a"),
        action: Action::Update,
        via: vec!["local.k".into()],
    }));
    let mut config = change(
        "data.sim_lookup.y",
        Action::Read,
        None,
        Some(obj([("key", unknown()), ("result", unknown())])),
    );
    config.reason = Some(Box::new(Reason::ReadBecauseConfigUnknown {
        value: "key".into(),
        chain: vec![
            "local.k".into(),
            "module.m.output.id".into(),
            "sim_thing.b.id".into(),
        ],
    }));
    let mut direct = change(
        "module.m.data.sim_lookup.z",
        Action::Read,
        None,
        Some(obj([("key", unknown()), ("result", unknown())])),
    );
    direct.reason = Some(Box::new(Reason::ReadBecauseConfigUnknown {
        value: "key".into(),
        chain: vec!["sim_thing.b.id".into()],
    }));
    let mut p = plan(PlanMode::Normal, vec![upd, new, pending, config, direct]);
    p.data_reads = vec![DataRead {
        addr: addr("data.sim_lookup.now"),
        provider: provider("provider[\"sim\"]"),
        config: obj([("key", s("k0"))]),
        result: obj([("key", s("k0")), ("result", s("r0"))]),
        before: None,
    }];
    check_render("deferred_reads", &p);
}

#[test]
fn drift_comes_first_then_the_plan() {
    let mut p = plan(
        PlanMode::Normal,
        vec![change(
            "sim_thing.a",
            Action::Update,
            Some(thing("a", "a-1", Some("by hand"))),
            Some(obj([
                ("id", s("a-1")),
                ("name", s("a")),
                ("value", s("v1")),
                ("out", unknown()),
            ])),
        )],
    );
    p.drift = vec![
        Drift {
            addr: addr("sim_thing.gone"),
            before: thing("gone", "gone-1", None),
            after: None,
        },
        Drift {
            addr: addr("sim_thing.a"),
            before: thing("a", "a-1", Some("v1")),
            after: Some(thing("a", "a-1", Some("by hand"))),
        },
    ];
    check_render("drift", &p);
}

#[test]
fn sensitive_values_are_hidden_in_text_and_marked_in_json() {
    let mut c = change(
        "sim_thing.s",
        Action::Update,
        Some(obj([
            ("id", s("s-1")),
            ("name", s("s")),
            ("password", s("old-secret")),
            ("token", s("same-secret")),
            (
                "config",
                obj([("key", s("k")), ("secret", s("x").sensitive())]),
            ),
        ])),
        Some(obj([
            ("id", s("s-1")),
            ("name", s("s")),
            ("password", s("new-secret")),
            ("token", s("same-secret")),
            (
                "config",
                obj([("key", s("k2")), ("secret", s("y").sensitive())]),
            ),
        ])),
    );
    c.sensitive_attrs = vec!["password".into(), "token".into()];
    let mut created = change(
        "sim_thing.n",
        Action::Create,
        None,
        Some(obj([
            ("id", unknown()),
            ("name", s("n")),
            ("password", s("p").sensitive()),
        ])),
    );
    created.sensitive_attrs = vec!["password".into()];
    let mut p = plan(PlanMode::Normal, vec![c, created]);
    let mut o = output("secret", Action::Update, Some(s("a")), Some(s("b")));
    o.sensitive = true;
    p.outputs = vec![o];
    check_render("sensitive", &p);
}

#[test]
fn outputs_only() {
    let mut p = plan(PlanMode::Normal, vec![]);
    p.outputs = vec![
        output("same", Action::NoOp, Some(s("x")), Some(s("x"))),
        output("greeting", Action::Update, Some(s("hi")), Some(s("hello"))),
        output(
            "ids",
            Action::Create,
            None,
            Some(Value::Tuple(vec![s("a-1"), unknown()])),
        ),
        output(
            "settings",
            Action::Update,
            Some(obj([("a", n(1)), ("b", n(2))])),
            Some(obj([("a", n(1)), ("b", n(3))])),
        ),
        output("old", Action::Delete, Some(Value::Bool(true)), None),
    ];
    p.applyable = true;
    check_render("outputs_only", &p);
}

#[test]
fn no_changes() {
    let mut p = plan(
        PlanMode::Normal,
        vec![change(
            "sim_thing.a",
            Action::NoOp,
            Some(thing("a", "a-1", None)),
            Some(thing("a", "a-1", None)),
        )],
    );
    p.outputs = vec![output("id", Action::NoOp, Some(s("a-1")), Some(s("a-1")))];
    check_render("no_changes", &p);
}

#[test]
fn no_changes_after_drift() {
    let mut p = plan(PlanMode::Normal, vec![]);
    p.drift = vec![Drift {
        addr: addr("sim_thing.a"),
        before: thing("a", "a-1", Some("v1")),
        after: Some(thing("a", "a-1", Some("v2"))),
    }];
    check_render("no_changes_after_drift", &p);
}

#[test]
fn destroy_plan() {
    let a = change(
        "sim_thing.a",
        Action::Delete,
        Some(thing("a", "a-1", Some("x"))),
        None,
    );
    let b = change(
        "module.m[0].sim_thing.b",
        Action::Delete,
        Some(thing("b", "b-1", None)),
        None,
    );
    let mut p = plan(PlanMode::Destroy, vec![a, b]);
    p.outputs = vec![output("id", Action::Delete, Some(s("a-1")), None)];
    check_render("destroy", &p);
    check_render("destroy_nothing", &plan(PlanMode::Destroy, vec![]));
}

#[test]
fn read_only_shows_drift_data_results_and_outputs() {
    let mut p = plan(PlanMode::ReadOnly, vec![]);
    p.drift = vec![Drift {
        addr: addr("sim_thing.a"),
        before: thing("a", "a-1", Some("v1")),
        after: Some(thing("a", "a-1", Some("v2"))),
    }];
    let read = |a: &str, before: Option<&str>, after: &str| DataRead {
        addr: addr(a),
        provider: provider("provider[\"sim\"]"),
        config: obj([("key", s("k"))]),
        result: obj([("key", s("k")), ("result", s(after))]),
        before: before.map(|b| obj([("key", s("k")), ("result", s(b))])),
    };
    p.data_reads = vec![
        read("data.sim_lookup.same", Some("r"), "r"),
        read("data.sim_lookup.changed", Some("r1"), "r2"),
        read("data.sim_lookup.first", None, "r"),
    ];
    p.outputs = vec![output(
        "out",
        Action::Update,
        Some(s("a/v1")),
        Some(s("a/v2")),
    )];
    p.warnings = vec![
        "Data source configuration is not known\nThe configuration of data.sim_lookup.later depends on values that are not known, so it keeps its previous result.".into(),
    ];
    p.applyable = true;
    check_render("read_only", &p);

    let mut quiet = plan(PlanMode::ReadOnly, vec![]);
    quiet.data_reads = vec![read("data.sim_lookup.same", Some("r"), "r")];
    check_render("read_only_no_changes", &quiet);
}

#[test]
fn colour_marks_symbols_only_when_asked() {
    let p = plan(
        PlanMode::Normal,
        vec![change(
            "sim_thing.a",
            Action::Create,
            None,
            Some(obj([("name", s("a"))])),
        )],
    );
    let text = render_plan(
        &p,
        &RenderOptions {
            color: true,
            width: 80,
        },
    );
    assert!(text.contains("\x1b[32m+\x1b[0m name = \"a\""), "{text}");
    assert!(text.contains("\x1b[1mPlan:\x1b[0m 1 to add"), "{text}");
}

#[test]
fn replace_paths_become_steps() {
    for (path, expect) in [
        ("name", r#"["name"]"#),
        ("settings.zone", r#"["settings","zone"]"#),
        ("rules[0].port", r#"["rules",0,"port"]"#),
        (r#"tags["a.b"]"#, r#"["tags","a.b"]"#),
    ] {
        assert_eq!(json::path_steps(path).to_string(), expect, "{path}");
    }
}

// ---- the state view (`cairn show` without a plan file) ---------------------------------

fn check_state(name: &str, state: &cairn_state::Snapshot) {
    let text = render::render_state(
        state,
        &RenderOptions {
            color: false,
            width: 80,
        },
        &Default::default(),
    );
    assert!(!text.contains('\x1b'), "colour off must not emit escapes");
    check_golden(&format!("{name}.txt"), &text);
}

fn stored(v: &Value) -> cairn_state::StoredValue {
    v.to_stored().expect("test values are known")
}

#[test]
fn state_view() {
    use cairn_state::{
        DataObject, OutputValue, ProviderInstance, ProviderRef, ResourceInstance, ResourceObject,
        Snapshot,
    };
    let east = provider("provider[\"sim\"].east");
    let pref = ProviderRef::new(east.clone(), "p1".into());
    let object = |v: Value, tainted: bool| ResourceObject {
        attrs: stored(&v),
        deps: vec![],
        provider: pref.clone(),
        create_token: None,
        tainted,
        meta: Default::default(),
    };
    let mut st = Snapshot::new();
    st.providers.insert(
        east.clone(),
        ProviderInstance {
            addr: east.clone(),
            id: "p1".into(),
            config: stored(&obj([
                ("region", s("us")),
                ("store", Value::Null(Type::String)),
            ])),
            is_default: false,
        },
    );
    st.resources.insert(
        addr("sim_thing.a"),
        ResourceInstance {
            current: Some(object(
                obj([
                    ("id", s("a-1")),
                    ("name", s("a")),
                    ("value", Value::Null(Type::String)),
                    ("tags", map([("env", s("dev"))])),
                    ("ports", list([n(80), n(443)])),
                    ("password", s("hunter2").sensitive()),
                ]),
                false,
            )),
            deposed: Default::default(),
        },
    );
    st.resources.insert(
        addr("module.m.sim_thing.b[0]"),
        ResourceInstance {
            current: Some(object(thing("b", "b-2", None), true)),
            deposed: [("d1".to_string(), object(thing("b", "b-1", None), false))].into(),
        },
    );
    st.data.insert(
        addr("data.sim_lookup.x"),
        DataObject {
            attrs: stored(&obj([("key", s("k")), ("result", s("r"))])),
            provider: pref.clone(),
        },
    );
    st.outputs.insert(
        "id".into(),
        OutputValue {
            value: stored(&s("a-1")),
            sensitive: false,
        },
    );
    st.outputs.insert(
        "secret".into(),
        OutputValue {
            value: stored(&s("x")),
            sensitive: true,
        },
    );
    check_state("state", &st);
    check_state("state_empty", &Snapshot::new());
}

#[test]
fn unknown_provider_configuration_and_errored_plans() {
    let mut c = change(
        "sim_thing.late",
        Action::Create,
        None,
        Some(obj([("name", s("late")), ("value", unknown())])),
    );
    c.provider = provider("provider[\"sim\"].late").into();
    c.reason = Some(Box::new(Reason::ProviderConfigUnknown {
        provider: provider("provider[\"sim\"].late"),
    }));
    c.diff_unavailable = true;
    let mut u = change(
        "sim_thing.other",
        Action::Update,
        Some(thing("other", "o-1", Some("a"))),
        Some(obj([
            ("id", s("o-1")),
            ("name", s("other")),
            ("value", s("b")),
            ("out", unknown()),
        ])),
    );
    u.provider = provider("provider[\"sim\"].late").into();
    u.diff_unavailable = true;
    let mut p = plan(PlanMode::Normal, vec![c, u]);
    p.variables = [
        ("region".to_string(), s("us")),
        ("token".to_string(), s("t").sensitive()),
    ]
    .into();
    p.provider_changes = vec![ProviderChange {
        addr: provider("provider[\"sim\"].late"),
        action: Action::Update,
        before: Some(obj([("region", s("us")), ("latency_ms", n(0))])),
        after: Some(obj([("region", unknown()), ("latency_ms", n(5))])),
        is_default: false,
    }];
    p.errored = true;
    p.applyable = false;
    check_render("unknown_provider_errored", &p);
}

// ---- properties over random values -----------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null(Type::String)),
            Just(unknown()),
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::int),
            "[a-c\"\\\\\n]{0,3}".prop_map(Value::string),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Tuple),
                proptest::collection::btree_map("[a-d]|x y", inner.clone(), 0..4)
                    .prop_map(|m| Value::Object(m.into())),
                proptest::collection::btree_map("[a-d]", inner.clone(), 0..4)
                    .prop_map(|m| Value::Map(m.into())),
                inner.prop_map(Value::sensitive),
            ]
        })
    }

    fn known(v: Value) -> Value {
        v.map_deep(&mut |v| match v {
            Value::Unknown(_) => s("was unknown"),
            v => v,
        })
    }

    /// The JSON at a path written as `Value::unknown_paths` writes it.
    fn at<'j>(j: &'j serde_json::Value, path: &str) -> Option<&'j serde_json::Value> {
        let steps = json::path_steps(path);
        let mut cur = j;
        for step in steps.as_array()? {
            cur = match step {
                serde_json::Value::Number(n) => cur.get(n.as_u64()? as usize)?,
                serde_json::Value::String(k) => cur.get(k.as_str())?,
                _ => return None,
            };
        }
        Some(cur)
    }

    proptest! {
        #[test]
        fn rendering_never_panics_and_json_marks_every_unknown(
            before in proptest::collection::btree_map("[a-e]", arb_value(), 0..5),
            after in proptest::collection::btree_map("[a-e]", arb_value(), 0..5),
        ) {
            let before = known(Value::Object(before.into()));
            let after = Value::Object(after.into());
            let p = plan(
                PlanMode::Normal,
                vec![change("sim_thing.a", Action::Update, Some(before), Some(after.clone()))],
            );
            let opts = RenderOptions { color: false, width: 80 };
            let text = render_plan(&p, &opts);
            prop_assert_eq!(&text, &render_plan(&p, &opts), "deterministic");
            let j = plan_json(&p);
            let change = &j["resource_changes"][0]["change"];
            for path in after.unknown_paths() {
                prop_assert_eq!(at(&change["after_unknown"], &path), Some(&serde_json::json!(true)), "{}", path);
            }
        }

        #[test]
        fn equal_values_show_no_change_lines(
            v in proptest::collection::btree_map("[a-e]", arb_value(), 0..5),
        ) {
            let v = known(Value::Object(v.into()));
            let p = plan(
                PlanMode::Normal,
                vec![change("sim_thing.a", Action::Update, Some(v.clone()), Some(v))],
            );
            let text = render_plan(&p, &RenderOptions { color: false, width: 80 });
            let block: Vec<&str> = text
                .lines()
                .skip_while(|l| !l.contains("resource \"sim_thing\""))
                .skip(1)
                .collect();
            for l in block {
                let t = l.trim_start();
                prop_assert!(!(t.starts_with("+ ") || t.starts_with("- ") || t.starts_with("~ ")), "{}", text);
            }
        }
    }
}

/// The log's record of a plan draws nested blocks as the plan text does (`Plan::shapes`), and
/// names where a `moved` block moved an object from.
#[test]
fn recorded_changes_draw_nested_blocks_and_moves() {
    let rule = |port: i64| obj([("port", Value::int(port))]);
    let item = |ports: &[i64]| {
        obj([
            ("id", s("x-1")),
            ("name", s("x")),
            ("rule", list_of(ports.iter().map(|p| rule(*p)).collect())),
        ])
    };
    let mut p = plan(
        PlanMode::Normal,
        vec![change(
            "sim_thing.b",
            Action::Update,
            Some(item(&[80, 81])),
            Some(item(&[80, 8081])),
        )],
    );
    p.moves = vec![(addr("sim_thing.a"), addr("sim_thing.b"))];
    p.shapes.insert(
        "sim_thing".into(),
        super::BlockShape {
            blocks: [(
                "rule".to_string(),
                super::NestedShape {
                    nesting: crate::schema::Nesting::List,
                    shape: Default::default(),
                },
            )]
            .into(),
            write_only: Default::default(),
        },
    );
    let record = super::record::plan_record(&p, false, "h");
    let diff = &record.changes[0].diff;
    assert!(diff.contains("  # (moved from sim_thing.a)"), "{diff}");
    assert!(
        diff.contains("      ~ rule {\n          ~ port = 81 -> 8081\n        }"),
        "{diff}"
    );
    assert!(diff.contains("# (1 unchanged block hidden)"), "{diff}");
}

fn list_of(elems: Vec<Value>) -> Value {
    Value::List(elems)
}
