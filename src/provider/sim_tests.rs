//! Tests of the `sim` provider against `shared/sim-provider.md`: every clause that
//! `oracle/conformance.sh` checks through Terraform, checked here through the provider traits
//! on a temporary store (plus create tokens and `find_by_token`, which the oracle lacks).

use super::*;
use crate::provider::host::Host;
use std::time::Instant;
use tempfile::TempDir;

/// A temporary working directory with a store at `<dir>/store` (via `SIM_STORE`).
struct World {
    dir: TempDir,
}

impl World {
    fn new() -> World {
        World {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }
    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }
    fn host(&self) -> Host {
        Host::at(self.dir.path()).with_env("SIM_STORE", &self.store().to_string_lossy())
    }
    fn provider(&self) -> SimProvider {
        SimProvider::new(self.host())
    }
    async fn configure(&self, config: Value) -> Arc<dyn Configured> {
        self.provider()
            .configure(&config)
            .await
            .expect("configure succeeds")
    }
    /// The call log's lines.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.store().join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
    /// The call log's lines after the first `skip`, as (op, name, id, ok) for compact checks.
    fn ops(&self, skip: usize) -> Vec<String> {
        self.calls()
            .iter()
            .skip(skip)
            .map(|l| {
                let j: J = serde_json::from_str(l).expect("whole JSON line");
                format!(
                    "{} {} {} {}",
                    j["op"].as_str().unwrap_or("-"),
                    j["name"].as_str().unwrap_or("null"),
                    j["id"].as_str().unwrap_or("null"),
                    j["ok"]
                )
            })
            .collect()
    }
    fn file(&self, region: &str, id: &str) -> Option<String> {
        std::fs::read_to_string(
            self.store()
                .join("things")
                .join(region)
                .join(format!("{id}.json")),
        )
        .ok()
    }
    fn write_file(&self, rel: &str, text: &str) {
        let p = self.store().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    fn ids(&self, region: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.store().join("things").join(region))
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn s(x: &str) -> Value {
    Value::string(x)
}

fn cfg(pairs: &[(&str, Value)]) -> Value {
    Value::object(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())))
}

fn thing(name: &str, value: Option<&str>) -> Value {
    cfg(&[
        ("name", s(name)),
        ("value", value.map(s).unwrap_or(Value::null())),
    ])
}

fn fail(entries: &[&str]) -> (&'static str, Value) {
    ("fail", Value::List(entries.iter().map(|e| s(e)).collect()))
}

/// Plans and applies a create, as the engine would.
async fn create(p: &dyn Configured, name: &str, value: Option<&str>) -> ApplyResponse {
    create_with_token(p, name, value, "tok").await
}

async fn create_with_token(
    p: &dyn Configured,
    name: &str,
    value: Option<&str>,
    token: &str,
) -> ApplyResponse {
    let planned = p.plan(THING, None, &thing(name, value)).expect("plan");
    p.apply(ApplyRequest::Create {
        type_: THING.into(),
        planned: planned.planned,
        token: token.into(),
    })
    .await
}

async fn create_ok(p: &dyn Configured, name: &str, value: Option<&str>) -> Value {
    let r = create(p, name, value).await;
    assert_eq!(r.error, None);
    r.new_state.expect("created")
}

async fn update(p: &dyn Configured, prior: &Value, value: Option<&str>) -> ApplyResponse {
    let name = prior.get("name").and_then(Value::as_str).unwrap_or("");
    let planned = p
        .plan(THING, Some(prior), &thing(name, value))
        .expect("plan");
    p.apply(ApplyRequest::Update {
        type_: THING.into(),
        prior: prior.clone(),
        planned: planned.planned,
    })
    .await
}

async fn delete(p: &dyn Configured, prior: &Value) -> ApplyResponse {
    p.apply(ApplyRequest::Delete {
        type_: THING.into(),
        prior: prior.clone(),
    })
    .await
}

async fn lookup(p: &dyn Configured, key: &str) -> ProviderResult<String> {
    let v = p.read_data(LOOKUP, &cfg(&[("key", s(key))])).await?;
    Ok(v.get("result")
        .and_then(Value::as_str)
        .unwrap_or("<none>")
        .to_string())
}

fn state(id: &str, name: &str, value: Option<&str>, out: &str) -> Value {
    cfg(&[
        ("id", s(id)),
        ("name", s(name)),
        ("value", value.map(s).unwrap_or(Value::Null(Type::String))),
        ("out", s(out)),
    ])
}

fn err(r: &ApplyResponse) -> &str {
    r.error
        .as_ref()
        .map(|e| e.0.as_str())
        .unwrap_or("<no error>")
}

// ---------------------------------------------------------------- store argument and SIM_STORE

#[tokio::test]
async fn store_defaults_to_sim_store_in_the_working_directory() {
    let w = World::new();
    let p = SimProvider::new(Host::at(w.dir.path()))
        .configure(&cfg(&[]))
        .await
        .expect("configure");
    create_ok(&*p, "a", None).await;
    let d = w.dir.path().join("sim-store");
    assert!(d.join("things/local/a-1.json").is_file());
    assert!(d.join("calls.jsonl").is_file());
}

#[tokio::test]
async fn store_env_is_used_and_the_argument_beats_it() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    create_ok(&*p, "a", None).await;
    assert!(w.store().join("things/local/a-1.json").is_file());
    assert!(!w.dir.path().join("sim-store").exists());

    let w = World::new();
    let p = w.configure(cfg(&[("store", s("./explicit"))])).await;
    create_ok(&*p, "a", None).await;
    assert!(w
        .dir
        .path()
        .join("explicit/things/local/a-1.json")
        .is_file());
    assert!(!w.store().exists(), "SIM_STORE untouched when store is set");
}

// ---------------------------------------------------------------- objects, ids, out, call log

#[tokio::test]
async fn create_writes_objects_and_log_lines_byte_for_byte() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    assert_eq!(
        w.calls(),
        [
            r#"{"op": "configure", "type": "sim", "name": "local", "id": null, "region": "local", "ok": true}"#
        ]
    );
    let planned = p.plan(THING, None, &thing("a", Some("x"))).expect("plan");
    assert_eq!(
        planned.planned,
        cfg(&[
            ("id", Value::Unknown(Type::String)),
            ("name", s("a")),
            ("value", s("x")),
            ("out", Value::Unknown(Type::String)),
        ]),
        "a create plans id and out unknown"
    );
    assert_eq!(w.calls().len(), 1, "plan touches nothing");
    assert!(!w.store().join("things").exists());

    let a = create_with_token(&*p, "a", Some("x"), "t-a").await;
    assert_eq!(a.error, None);
    assert_eq!(a.new_state, Some(state("a-1", "a", Some("x"), "a/x")));
    let b = create_ok(&*p, "b", None).await;
    assert_eq!(
        b,
        state("b-1", "b", None, "b/-"),
        "out of a null value is <name>/-"
    );
    assert_eq!(
        w.file("local", "a-1").as_deref(),
        Some("{\"id\": \"a-1\", \"name\": \"a\", \"value\": \"x\", \"out\": \"a/x\", \"token\": \"t-a\"}\n")
    );
    assert_eq!(
        w.file("local", "b-1").as_deref(),
        Some("{\"id\": \"b-1\", \"name\": \"b\", \"value\": null, \"out\": \"b/-\", \"token\": \"tok\"}\n")
    );
    assert_eq!(
        w.calls()[1..],
        [
            r#"{"op": "create", "type": "sim_thing", "name": "a", "id": "a-1", "region": "local", "ok": true}"#,
            r#"{"op": "create", "type": "sim_thing", "name": "b", "id": "b-1", "region": "local", "ok": true}"#,
        ]
    );

    // A refresh reads each object once.
    let a = a.new_state.expect("state");
    assert_eq!(p.read(THING, &a).await, Ok(Some(a.clone())));
    assert_eq!(
        w.calls()[3],
        r#"{"op": "read", "type": "sim_thing", "name": "a", "id": "a-1", "region": "local", "ok": true}"#
    );
    // An unchanged configuration plans the prior state back (a no-op).
    let same = p
        .plan(THING, Some(&a), &thing("a", Some("x")))
        .expect("plan");
    assert_eq!(same.planned, a);
    assert!(same.requires_replace.is_empty());
}

#[tokio::test]
async fn value_change_updates_in_place_and_name_change_replaces() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    let a = create_ok(&*p, "a", Some("x")).await;
    let planned = p
        .plan(THING, Some(&a), &thing("a", Some("y")))
        .expect("plan");
    assert!(planned.requires_replace.is_empty());
    assert_eq!(planned.planned.get("id"), Some(&s("a-1")), "id known");
    assert_eq!(
        planned.planned.get("out"),
        Some(&Value::Unknown(Type::String)),
        "out unknown when value changes"
    );
    let r = update(&*p, &a, Some("y")).await;
    assert_eq!(r.error, None);
    assert_eq!(r.new_state, Some(state("a-1", "a", Some("y"), "a/y")));
    assert_eq!(
        w.file("local", "a-1").as_deref(),
        Some("{\"id\": \"a-1\", \"name\": \"a\", \"value\": \"y\", \"out\": \"a/y\", \"token\": \"tok\"}\n")
    );
    assert_eq!(
        w.calls().last().map(String::as_str),
        Some(
            r#"{"op": "update", "type": "sim_thing", "name": "a", "id": "a-1", "region": "local", "ok": true}"#
        )
    );
    let renamed = p
        .plan(THING, Some(&a), &thing("a2", Some("y")))
        .expect("plan");
    assert_eq!(renamed.requires_replace, ["name"]);
    assert_eq!(
        renamed.planned.get("id"),
        Some(&Value::Unknown(Type::String))
    );
}

#[tokio::test]
async fn ids_count_every_create_of_a_name_per_region() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    let a1 = create_ok(&*p, "a", None).await;
    assert_eq!(delete(&*p, &a1).await.error, None);
    let a2 = create_ok(&*p, "a", None).await;
    assert_eq!(a2.get("id"), Some(&s("a-2")), "re-created a is a-2");
    assert_eq!(delete(&*p, &a2).await.error, None);
    assert!(w.ids("local").is_empty(), "deletes empty the region");
    let a3 = create_ok(&*p, "a", None).await;
    assert_eq!(a3.get("id"), Some(&s("a-3")));

    let eu = w.configure(cfg(&[("region", s("eu"))])).await;
    let e = create_ok(&*eu, "a", None).await;
    assert_eq!(e.get("id"), Some(&s("a-1")), "n is per region");
    assert!(w.file("eu", "a-1").is_some());
    let last: J = serde_json::from_str(w.calls().last().expect("line")).expect("json");
    assert_eq!(last["region"], "eu");
    assert!(
        w.ids("local")
            .iter()
            .chain(&w.ids("eu"))
            .all(|f| !f.starts_with('.')),
        "no temporary files left"
    );

    // An id whose file exists (written by hand) is skipped.
    w.write_file(
        "things/local/b-1.json",
        "{\"id\": \"b-1\", \"name\": \"b\"}\n",
    );
    let b = create_ok(&*p, "b", None).await;
    assert_eq!(b.get("id"), Some(&s("b-2")));
    // The count survives a fresh instance (it is in calls.jsonl, not in memory).
    let p2 = w.configure(cfg(&[])).await;
    assert_eq!(create_ok(&*p2, "a", None).await.get("id"), Some(&s("a-4")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_creates_get_unique_ids_and_whole_lines() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 1..=24 {
        let p = p.clone();
        tasks.spawn(async move { create(&*p, &format!("n{}", i % 3), None).await });
    }
    while let Some(r) = tasks.join_next().await {
        assert_eq!(r.expect("task").error, None);
    }
    let creates = w.ops(1);
    assert_eq!(creates.len(), 24);
    assert!(creates.iter().all(|l| l.starts_with("create ")));
    let mut want: Vec<String> = (0..3)
        .flat_map(|n| (1..=8).map(move |i| format!("n{n}-{i}.json")))
        .collect();
    want.sort();
    assert_eq!(w.ids("local"), want);
}

// ---------------------------------------------------------------- drift by editing files

#[tokio::test]
async fn reads_see_edits_and_deletions_made_by_hand() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    let a = create_ok(&*p, "a", Some("1")).await;
    let b = create_ok(&*p, "b", None).await;
    w.write_file(
        "things/local/a-1.json",
        "{\"id\": \"a-1\", \"name\": \"a\", \"value\": \"9\", \"out\": \"a/9\", \"token\": null}\n",
    );
    w.write_file(
        "things/local/b-1.json",
        "{\"id\": \"b-1\", \"name\": \"b\", \"value\": null, \"out\": \"b/Z\", \"token\": null}\n",
    );
    let a_now = p.read(THING, &a).await.expect("read").expect("exists");
    assert_eq!(a_now, state("a-1", "a", Some("9"), "a/9"));
    let back = p
        .plan(THING, Some(&a_now), &thing("a", Some("1")))
        .expect("plan");
    assert!(
        back.requires_replace.is_empty(),
        "edited value: updated back in place"
    );
    assert_eq!(back.planned.get("value"), Some(&s("1")));
    let b_now = p.read(THING, &b).await.expect("read").expect("exists");
    assert_eq!(b_now, state("b-1", "b", None, "b/Z"));
    let noop = p
        .plan(THING, Some(&b_now), &thing("b", None))
        .expect("plan");
    assert_eq!(noop.planned, b_now, "edited out only: no change");

    let before = w.calls().len();
    std::fs::remove_file(w.store().join("things/local/b-1.json")).expect("rm");
    assert_eq!(p.read(THING, &b).await, Ok(None), "deleted file: gone");
    assert_eq!(
        w.ops(before),
        ["read b b-1 true"],
        "a read of a missing file is ok"
    );
    let b2 = create_ok(&*p, "b", None).await;
    assert_eq!(b2.get("id"), Some(&s("b-2")));

    std::fs::remove_file(w.store().join("things/local/b-2.json")).expect("rm");
    let before = w.calls().len();
    let r = delete(&*p, &b2).await;
    assert_eq!(
        (r.new_state, r.error),
        (None, None),
        "delete of a gone object succeeds"
    );
    assert_eq!(w.ops(before), ["delete b b-2 true"]);

    std::fs::remove_file(w.store().join("things/local/a-1.json")).expect("rm");
    let r = update(&*p, &a, Some("2")).await;
    assert_eq!(err(&r), "sim: object a-1 not found in region local");
    assert_eq!(w.ops(w.calls().len() - 1), ["update a a-1 false"]);
}

// ---------------------------------------------------------------- sim_lookup

#[tokio::test]
async fn lookup_order_regions_and_errors() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    create_ok(&*p, "a", Some("1")).await;
    create_ok(&*p, "k", None).await;
    w.write_file(
        "ext/local.json",
        r#"{"k": "from-ext", "k2": "v2", "n": {"x": [1, true]}}"#,
    );
    w.write_file("ext/eu.json", r#"{"a": "eu-ext"}"#);
    let before = w.calls().len();
    assert_eq!(lookup(&*p, "k2").await.as_deref(), Ok("v2"));
    assert_eq!(
        lookup(&*p, "k").await.as_deref(),
        Ok("from-ext"),
        "ext beats a thing"
    );
    assert_eq!(lookup(&*p, "a").await.as_deref(), Ok("a/1"), "by name");
    assert_eq!(lookup(&*p, "a-1").await.as_deref(), Ok("a/1"), "by id");
    assert_eq!(
        lookup(&*p, "n").await.as_deref(),
        Ok(r#"{"x": [1, true]}"#),
        "non-string ext values are JSON-encoded"
    );
    assert_eq!(
        w.calls()[before],
        r#"{"op": "lookup", "type": "sim_lookup", "name": "k2", "id": null, "region": "local", "ok": true}"#
    );
    let before = w.calls().len();
    assert_eq!(
        lookup(&*p, "missing").await,
        Err(ProviderError(
            r#"sim_lookup: no object for key "missing""#.into()
        ))
    );
    assert_eq!(w.ops(before), ["lookup missing null false"]);

    // Several things of one name (mid-replacement): the highest n wins.
    w.write_file(
        "things/local/a-10.json",
        "{\"id\": \"a-10\", \"name\": \"a\", \"value\": \"new\", \"out\": \"a/new\", \"token\": null}\n",
    );
    assert_eq!(lookup(&*p, "a").await.as_deref(), Ok("a/new"));
    // An id match beats a name match.
    w.write_file(
        "things/local/x-1.json",
        "{\"id\": \"x-1\", \"name\": \"a-1\", \"value\": null, \"out\": \"x/-\", \"token\": null}\n",
    );
    assert_eq!(lookup(&*p, "a-1").await.as_deref(), Ok("a/1"));

    let eu = w.configure(cfg(&[("region", s("eu"))])).await;
    assert_eq!(
        lookup(&*eu, "a").await.as_deref(),
        Ok("eu-ext"),
        "ext per region"
    );
    assert_eq!(
        lookup(&*eu, "k").await,
        Err(ProviderError(r#"sim_lookup: no object for key "k""#.into())),
        "things per region"
    );
}

// ---------------------------------------------------------------- latency

/// Runs 5 concurrent reads and returns how long they took together.
async fn time_five_reads(p: Arc<dyn Configured>, states: &[Value]) -> Duration {
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for st in states {
        let (p, st) = (p.clone(), st.clone());
        tasks.spawn(async move { p.read(THING, &st).await });
    }
    while let Some(r) = tasks.join_next().await {
        assert!(r.expect("task").expect("read").is_some());
    }
    t0.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_is_slept_concurrently_and_defaults_from_the_environment() {
    let w = World::new();
    let fast = w.configure(cfg(&[])).await;
    let mut states = Vec::new();
    for i in 0..5 {
        states.push(create_ok(&*fast, &format!("t{i}"), None).await);
    }
    // Thresholds are relative to the 200 ms latency, so a loaded machine does not flake them:
    // a call that slept takes at least 200 ms; five that slept one after another, 1 s.
    let base = time_five_reads(fast, &states).await;

    let slow = w.configure(cfg(&[("latency_ms", Value::int(200))])).await;
    let d = time_five_reads(slow.clone(), &states).await;
    assert!(
        d >= Duration::from_millis(200),
        "5 reads at 200 ms took {d:?}"
    );
    assert!(
        d < base + Duration::from_millis(600),
        "reads must not block each other: {d:?} (without latency: {base:?})"
    );

    // Configure does not sleep.
    let t0 = Instant::now();
    let env = SimProvider::new(w.host().with_env("SIM_LATENCY_MS", "200"));
    let from_env = env.configure(&cfg(&[])).await.expect("configure");
    assert!(
        t0.elapsed() < Duration::from_millis(200),
        "configure does not sleep"
    );
    let d = time_five_reads(from_env, &states).await;
    assert!(
        d >= Duration::from_millis(200),
        "SIM_LATENCY_MS is the default: {d:?}"
    );
    let zero = env
        .configure(&cfg(&[("latency_ms", Value::int(0))]))
        .await
        .expect("configure");
    let d = time_five_reads(zero, &states).await;
    assert!(
        d < Duration::from_millis(200),
        "latency_ms = 0 beats the env: {d:?}"
    );

    // `stop` interrupts calls still sleeping, before they touch anything.
    let before = w.calls().len();
    let sleeper = {
        let slow = slow.clone();
        let st = states[0].clone();
        tokio::spawn(async move { slow.read(THING, &st).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    slow.stop().await;
    assert_eq!(
        sleeper.await.expect("task"),
        Err(ProviderError(
            "sim: interrupted before the call was made".into()
        ))
    );
    assert_eq!(w.calls().len(), before);
}

// ---------------------------------------------------------------- failure injection

#[tokio::test]
async fn create_failures_before_and_after() {
    let w = World::new();
    let p = w.configure(cfg(&[fail(&["create:b"])])).await;
    create_ok(&*p, "a", None).await;
    let r = create(&*p, "b", None).await;
    assert_eq!(err(&r), "sim: injected failure for create b");
    assert_eq!(r.new_state, None);
    assert_eq!(
        w.ids("local"),
        ["a-1.json"],
        "create:b fails before writing"
    );
    assert_eq!(
        w.calls().last().map(String::as_str),
        Some(
            r#"{"op": "create", "type": "sim_thing", "name": "b", "id": null, "region": "local", "ok": false}"#
        )
    );

    let p = w.configure(cfg(&[fail(&["create:b:after"])])).await;
    let r = create(&*p, "b", None).await;
    assert_eq!(err(&r), "sim: injected failure for create b");
    assert_eq!(
        r.new_state,
        Some(state("b-1", "b", None, "b/-")),
        "a partial create"
    );
    assert!(w.file("local", "b-1").is_some());
    assert_eq!(w.ops(w.calls().len() - 1), ["create b b-1 false"]);
    // The :after-failed create counts for numbering.
    let p = w.configure(cfg(&[])).await;
    assert_eq!(create_ok(&*p, "b", None).await.get("id"), Some(&s("b-2")));

    let p = w.configure(cfg(&[fail(&["create:*"])])).await;
    assert_eq!(
        err(&create(&*p, "p", None).await),
        "sim: injected failure for create p"
    );
    assert_eq!(
        err(&create(&*p, "q", None).await),
        "sim: injected failure for create q"
    );
}

#[tokio::test]
async fn update_delete_read_lookup_failures_before_and_after() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    let a = create_ok(&*p, "a", Some("1")).await;
    let c = create_ok(&*p, "c", None).await;
    let a_file = w.file("local", "a-1");

    // SIM_FAIL, comma-separated, is the default.
    let env = SimProvider::new(w.host().with_env("SIM_FAIL", "read:zz, update:a"));
    let p = env.configure(&cfg(&[])).await.expect("configure");
    let r = update(&*p, &a, Some("2")).await;
    assert_eq!(err(&r), "sim: injected failure for update a");
    assert_eq!(
        r.new_state,
        Some(a.clone()),
        "a failed update reports the object as it was"
    );
    assert_eq!(w.file("local", "a-1"), a_file, "update:a fails before");
    assert_eq!(w.ops(w.calls().len() - 1), ["update a a-1 false"]);

    let p = w.configure(cfg(&[fail(&["update:a:after"])])).await;
    let r = update(&*p, &a, Some("2")).await;
    assert_eq!(err(&r), "sim: injected failure for update a");
    assert_eq!(r.new_state, Some(state("a-1", "a", Some("2"), "a/2")));
    assert!(w
        .file("local", "a-1")
        .is_some_and(|f| f.contains("\"a/2\"")));

    let p = w.configure(cfg(&[fail(&["read:a"])])).await;
    assert_eq!(
        p.read(THING, &a).await,
        Err(ProviderError("sim: injected failure for read a".into()))
    );
    assert_eq!(w.ops(w.calls().len() - 1), ["read a a-1 false"]);
    let p = w.configure(cfg(&[fail(&["read:a:after"])])).await;
    assert_eq!(
        p.read(THING, &a).await,
        Err(ProviderError("sim: injected failure for read a".into()))
    );

    let p = w.configure(cfg(&[fail(&["delete:c"])])).await;
    let r = delete(&*p, &c).await;
    assert_eq!(err(&r), "sim: injected failure for delete c");
    assert_eq!(r.new_state, Some(c.clone()), "still there");
    assert!(w.file("local", "c-1").is_some());
    let p = w.configure(cfg(&[fail(&["delete:c:after"])])).await;
    let r = delete(&*p, &c).await;
    assert_eq!(err(&r), "sim: injected failure for delete c");
    assert_eq!(r.new_state, None, "gone");
    assert!(w.file("local", "c-1").is_none());
    assert_eq!(w.ops(w.calls().len() - 1), ["delete c c-1 false"]);
    let p = w.configure(cfg(&[])).await;
    assert_eq!(
        p.read(THING, &c).await,
        Ok(None),
        "the next refresh finds c gone"
    );

    w.write_file("ext/local.json", r#"{"k1": "v1"}"#);
    let p = w.configure(cfg(&[fail(&["lookup:k1"])])).await;
    assert_eq!(
        lookup(&*p, "k1").await,
        Err(ProviderError("sim: injected failure for lookup k1".into()))
    );
    let p = w.configure(cfg(&[fail(&["lookup:k1:after"])])).await;
    assert_eq!(
        lookup(&*p, "k1").await,
        Err(ProviderError("sim: injected failure for lookup k1".into()))
    );
    assert_eq!(w.ops(w.calls().len() - 1), ["lookup k1 null false"]);
}

#[tokio::test]
async fn configure_failures_and_fail_list_overriding_the_environment() {
    let w = World::new();
    let env = SimProvider::new(w.host().with_env("SIM_FAIL", "configure:*"));
    let e = env.configure(&cfg(&[])).await.err().expect("fails");
    assert_eq!(e.0, "sim: injected failure for configure local");
    assert_eq!(
        w.calls(),
        [
            r#"{"op": "configure", "type": "sim", "name": "local", "id": null, "region": "local", "ok": false}"#
        ]
    );
    assert!(env
        .configure(&cfg(&[("region", s("eu")), fail(&["configure:local"])]))
        .await
        .is_ok());

    let env = SimProvider::new(w.host().with_env("SIM_FAIL", "create:p"));
    let p = env.configure(&cfg(&[fail(&[])])).await.expect("configure");
    create_ok(&*p, "p", None).await;
    let p = env.configure(&cfg(&[])).await.expect("configure");
    assert_eq!(
        err(&create(&*p, "p", None).await),
        "sim: injected failure for create p"
    );
}

// ---------------------------------------------------------------- tokens, config, validation

#[tokio::test]
async fn find_by_token_returns_the_object_a_create_made() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    create_with_token(&*p, "a", Some("1"), "tok-1").await;
    create_with_token(&*p, "b", None, "tok-2").await;
    let before = w.calls().len();
    assert_eq!(
        p.find_by_token(THING, "tok-2").await,
        Ok(Some(state("b-1", "b", None, "b/-")))
    );
    assert_eq!(p.find_by_token(THING, "tok-9").await, Ok(None));
    assert_eq!(w.calls().len(), before, "not logged");
    let eu = w.configure(cfg(&[("region", s("eu"))])).await;
    assert_eq!(
        eu.find_by_token(THING, "tok-1").await,
        Ok(None),
        "per region"
    );
}

#[test]
fn diff_config_replaces_on_region_or_store_and_updates_otherwise() {
    let w = World::new();
    let p = w.provider();
    let d = |old: Value, new: Value| p.diff_config(&old, &new);
    assert_eq!(d(cfg(&[]), cfg(&[])), ConfigDiff::NoChange);
    assert_eq!(
        d(cfg(&[]), cfg(&[("region", s("local"))])),
        ConfigDiff::NoChange,
        "the default region, spelled out"
    );
    assert_eq!(
        d(cfg(&[]), cfg(&[("store", s(&w.store().to_string_lossy()))])),
        ConfigDiff::NoChange,
        "SIM_STORE, spelled out"
    );
    assert_eq!(
        d(cfg(&[("region", s("r1"))]), cfg(&[("region", s("r2"))])),
        ConfigDiff::Replace(vec!["region".into()])
    );
    assert_eq!(
        d(cfg(&[]), cfg(&[("region", Value::Unknown(Type::String))])),
        ConfigDiff::Replace(vec!["region".into()])
    );
    assert_eq!(
        d(cfg(&[]), cfg(&[("store", s("other"))])),
        ConfigDiff::Replace(vec!["store".into()])
    );
    assert_eq!(
        d(cfg(&[]), cfg(&[("latency_ms", Value::int(5))])),
        ConfigDiff::Update
    );
    assert_eq!(d(cfg(&[]), cfg(&[fail(&["create:a"])])), ConfigDiff::Update);
    assert_eq!(d(cfg(&[]), cfg(&[fail(&[])])), ConfigDiff::NoChange);
    assert_eq!(
        d(cfg(&[]), Value::unknown()),
        ConfigDiff::Replace(vec!["store".into(), "region".into()])
    );
}

#[test]
fn check_config_reports_bad_latency_and_fail_entries() {
    let p = World::new().provider();
    assert!(p
        .check_config(&cfg(&[fail(&["create:a", "read:*:after"])]))
        .is_empty());
    let d = p.check_config(&cfg(&[
        ("latency_ms", Value::int(-1)),
        fail(&["oops:a", "create"]),
    ]));
    let summaries: Vec<&str> = d.iter().map(|d| d.summary.as_str()).collect();
    assert_eq!(
        summaries,
        [
            "latency_ms must be >= 0",
            "sim: bad fail entry \"oops:a\": expected OP:NAME or OP:NAME:after with OP one of \
             create, read, update, delete, lookup, configure",
            "sim: bad fail entry \"create\": expected OP:NAME or OP:NAME:after with OP one of \
             create, read, update, delete, lookup, configure",
        ]
    );
    assert!(p
        .check_config(&cfg(&[("latency_ms", Value::Unknown(Type::Number))]))
        .is_empty());
    let huge = cfg(&[(
        "latency_ms",
        Value::Number("1e300".parse().expect("number")),
    )]);
    let e = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(p.configure(&huge))
        .err()
        .expect("refused");
    assert_eq!(e.0, "sim: latency_ms is too large");
}

#[test]
fn fail_entries_parse_as_the_oracle_does() {
    let r = |e: &str| FailRule::parse(e).map(|r| format!("{} {} {}", r.op, r.name, r.after));
    assert_eq!(r("create:b").as_deref(), Some("create b false"));
    assert_eq!(r("create:b:after").as_deref(), Some("create b true"));
    assert_eq!(r("lookup:a:b").as_deref(), Some("lookup a:b false"));
    assert_eq!(r("create:after").as_deref(), Some("create after false"));
    assert_eq!(r("nope:b"), None);
    assert_eq!(r("create"), None);
}

#[test]
fn python_json_escapes_like_json_dumps() {
    let j: J =
        serde_json::from_str(r#"{"a": "é\n\"\\ 😀\u0001", "b": [1, null, false]}"#).expect("json");
    assert_eq!(
        py_dumps(&j),
        r#"{"a": "\u00e9\n\"\\ \ud83d\ude00\u0001", "b": [1, null, false]}"#
    );
}

#[test]
fn schema_matches_the_contract() {
    let p = World::new().provider();
    let t = &p.schema().resources[THING];
    let flags = |n: &str| {
        let a = &t.attributes[n];
        (a.required, a.optional, a.computed, a.force_new)
    };
    assert_eq!(flags("name"), (true, false, false, true));
    assert_eq!(flags("value"), (false, true, false, false));
    assert_eq!(flags("id"), (false, false, true, false));
    assert_eq!(flags("out"), (false, false, true, false));
    let l = &p.schema().data_sources[LOOKUP];
    assert!(l.attributes["key"].required && l.attributes["result"].computed);
    let c: Vec<&String> = p.schema().provider.attributes.keys().collect();
    assert_eq!(c, ["fail", "latency_ms", "region", "store"]);
}

// ---------------------------------------------------------------- same bytes as the oracle

/// The call log and object files the oracle (`oracle/provider/sim_provider.py`, driven directly
/// with the same calls and its `tf` framework stubbed out) wrote for the sequence below.
const ORACLE_CALLS: &str = r#"{"op": "configure", "type": "sim", "name": "local", "id": null, "region": "local", "ok": true}
{"op": "create", "type": "sim_thing", "name": "a", "id": "a-1", "region": "local", "ok": true}
{"op": "create", "type": "sim_thing", "name": "b", "id": "b-1", "region": "local", "ok": true}
{"op": "create", "type": "sim_thing", "name": "a", "id": "a-2", "region": "local", "ok": true}
{"op": "update", "type": "sim_thing", "name": "a", "id": "a-1", "region": "local", "ok": true}
{"op": "delete", "type": "sim_thing", "name": "a", "id": "a-1", "region": "local", "ok": true}
{"op": "create", "type": "sim_thing", "name": "a", "id": "a-3", "region": "local", "ok": true}
{"op": "read", "type": "sim_thing", "name": "b", "id": "b-1", "region": "local", "ok": true}
{"op": "lookup", "type": "sim_lookup", "name": "a", "id": null, "region": "local", "ok": true}
{"op": "lookup", "type": "sim_lookup", "name": "b-1", "id": null, "region": "local", "ok": true}
{"op": "lookup", "type": "sim_lookup", "name": "zz", "id": null, "region": "local", "ok": false}
{"op": "configure", "type": "sim", "name": "eu", "id": null, "region": "eu", "ok": true}
{"op": "create", "type": "sim_thing", "name": "q", "id": null, "region": "eu", "ok": false}
{"op": "create", "type": "sim_thing", "name": "a", "id": "a-1", "region": "eu", "ok": true}
{"op": "update", "type": "sim_thing", "name": "a", "id": "a-1", "region": "eu", "ok": false}
{"op": "update", "type": "sim_thing", "name": "gone", "id": "gone-1", "region": "local", "ok": false}
"#;
const ORACLE_THINGS: &str = r#"{"id": "a-1", "name": "a", "value": "2", "out": "a/2", "token": null}
{"id": "a-2", "name": "a", "value": "\u00e9\ud83d\ude00", "out": "a/\u00e9\ud83d\ude00", "token": null}
{"id": "a-3", "name": "a", "value": null, "out": "a/-", "token": null}
{"id": "b-1", "name": "b", "value": null, "out": "b/-", "token": null}
"#;

#[tokio::test]
async fn a_sequence_of_calls_leaves_the_same_bytes_as_the_oracle() {
    let w = World::new();
    let p = w.configure(cfg(&[])).await;
    let a = create_with_token(&*p, "a", Some("x"), "")
        .await
        .new_state
        .expect("a");
    let b = create_with_token(&*p, "b", None, "")
        .await
        .new_state
        .expect("b");
    create_with_token(&*p, "a", Some("é😀"), "").await;
    assert_eq!(update(&*p, &a, Some("y")).await.error, None);
    assert_eq!(delete(&*p, &a).await.error, None);
    create_with_token(&*p, "a", None, "").await;
    assert_eq!(p.read(THING, &b).await, Ok(Some(b.clone())));
    assert_eq!(lookup(&*p, "a").await.as_deref(), Ok("a/-"));
    assert_eq!(lookup(&*p, "b-1").await.as_deref(), Ok("b/-"));
    assert!(lookup(&*p, "zz").await.is_err());
    let eu = w
        .configure(cfg(&[
            ("region", s("eu")),
            fail(&["create:q", "update:a:after", "configure:zz"]),
        ]))
        .await;
    assert!(create_with_token(&*eu, "q", None, "").await.error.is_some());
    let ea = create_with_token(&*eu, "a", Some("1"), "")
        .await
        .new_state
        .expect("a");
    assert!(update(&*eu, &ea, Some("2")).await.error.is_some());
    let gone = state("gone-1", "gone", None, "gone/-");
    assert!(update(&*p, &gone, Some("v")).await.error.is_some());

    assert_eq!(
        std::fs::read_to_string(w.store().join("calls.jsonl")).expect("log"),
        ORACLE_CALLS
    );
    let mut things = String::new();
    for region in ["eu", "local"] {
        for f in w.ids(region) {
            let path = w.store().join("things").join(region).join(f);
            things.push_str(&std::fs::read_to_string(path).expect("object"));
        }
    }
    assert_eq!(things, ORACLE_THINGS);
}
