//! The client against real plugin processes: the oracle's Python `sim` provider (protocol 6,
//! third-party framework), with automatic mutual TLS and in plaintext.

use super::PluginProvider;
use crate::addr::Mode;
use crate::provider::{ApplyRequest, Provider};
use crate::value::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The oracle's plugin (`/work/shared/oracle/setup.sh` builds it; `.ci/run` runs that).
pub(crate) fn sim_plugin() -> PathBuf {
    let p = PathBuf::from(
        std::env::var("ORACLE_PLUGINS").unwrap_or_else(|_| "/tmp/oracle-plugins".into()),
    )
    .join("terraform-provider-sim");
    assert!(
        p.exists(),
        "{} is missing: run ../shared/oracle/setup.sh (as .ci/run does)",
        p.display()
    );
    p
}

async fn lifecycle(tls: bool) {
    let store = tempfile::tempdir().unwrap();
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    env.remove("SIM_FAIL");
    if !tls {
        env.insert("TF_DISABLE_PLUGIN_TLS".into(), "1".into());
    }
    let p = PluginProvider::start("sim", &sim_plugin(), &env)
        .await
        .unwrap();
    assert_eq!(p.protocol(), 6);
    let schema = p.schema();
    assert!(schema.resources.contains_key("sim_thing"));
    assert!(schema.resources["sim_thing"].attributes["id"].computed);
    let config = Value::object([
        ("store", Value::string(store.path().display().to_string())),
        ("region", Value::Unknown(crate::value::Type::String)),
    ]);
    assert!(!p.check_config(&config).has_errors());
    let config = Value::object([("store", Value::string(store.path().display().to_string()))]);
    let thing = Value::object([("name", Value::string("a")), ("value", Value::string("1"))]);
    assert!(!p.validate(Mode::Managed, "sim_thing", &thing).has_errors());
    let c = p.configure(&config).await.unwrap();
    let planned = c
        .plan_async("sim_thing", None, &Default::default(), &thing)
        .await
        .unwrap();
    assert!(planned.planned.get("id").unwrap().is_unknown());
    let created = c
        .apply(ApplyRequest::Create {
            type_: "sim_thing".into(),
            planned: planned.planned.clone(),
            token: "t".into(),
        })
        .await;
    assert_eq!(created.error, None);
    let created = created.new_state.unwrap();
    assert_eq!(created.get("id"), Some(&Value::string("a-1")));
    assert_eq!(created.get("out"), Some(&Value::string("a/1")));
    let read = c.read("sim_thing", &created).await.unwrap();
    assert_eq!(read.as_ref(), Some(&created));
    let again = c
        .plan_async("sim_thing", Some(&created), &Default::default(), &thing)
        .await
        .unwrap();
    assert!(crate::provider::schema_util::same(&again.planned, &created));
    let renamed = Value::object([("name", Value::string("b")), ("value", Value::string("1"))]);
    let replace = c
        .plan_async("sim_thing", Some(&created), &Default::default(), &renamed)
        .await
        .unwrap();
    assert_eq!(replace.requires_replace, vec!["name".to_string()]);
    let data = c
        .read_data("sim_lookup", &Value::object([("key", Value::string("a"))]))
        .await
        .unwrap();
    assert_eq!(data.get("result"), Some(&Value::string("a/1")));
    let gone = c
        .apply(ApplyRequest::Delete {
            type_: "sim_thing".into(),
            prior: created.clone(),
        })
        .await;
    assert_eq!(
        gone,
        crate::provider::ApplyResponse {
            new_state: None,
            error: None
        }
    );
    assert_eq!(c.read("sim_thing", &created).await.unwrap(), None);
    let err = c
        .read_data("sim_lookup", &Value::object([("key", Value::string("zz"))]))
        .await
        .unwrap_err();
    assert!(err.message.contains("no object for key \"zz\""), "{err}");
    let calls = std::fs::read_to_string(store.path().join("calls.jsonl")).unwrap();
    assert_eq!(calls.lines().count(), 7, "{calls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_plugin_lifecycle_with_mutual_tls() {
    lifecycle(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_plugin_lifecycle_with_tls_disabled_on_our_side() {
    lifecycle(false).await;
}

/// The calls of one method in a `SIM_RPC_LOG` file.
fn logged(log: &std::path::Path, method: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!("\"method\": \"{method}\"")))
        .count()
}

/// A resource configuration the binary validated clean is not sent again, in this run or the
/// next (`cache::Validations`); a changed configuration is. (One with diagnostics is asked every
/// time: `provider_diagnostics_point_at_the_attribute_like_terraform` plans it twice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_validations_are_remembered_per_binary() {
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("rpc.jsonl");
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    env.remove("SIM_FAIL");
    env.insert("SIM_RPC_LOG".into(), log.display().to_string());
    let cache = super::cache::SchemaCache::new(state.path());
    let open = || async {
        PluginProvider::open(
            "sim",
            &sim_plugin(),
            &env,
            Some(&cache),
            super::provider::Source::CacheFirst,
        )
        .await
        .unwrap()
        .unwrap()
    };
    let thing =
        |v: &str| Value::object([("name", Value::string("a")), ("value", Value::string(v))]);
    let p = open().await;
    for _ in 0..3 {
        let d = p
            .validate_config_async(Mode::Managed, "sim_thing", &thing("1"))
            .await;
        assert!(d.is_empty(), "{d:?}");
    }
    assert_eq!(logged(&log, "ValidateResourceConfig"), 1);
    assert!(p
        .validate_config_async(Mode::Managed, "sim_thing", &thing("2"))
        .await
        .is_empty());
    assert_eq!(logged(&log, "ValidateResourceConfig"), 2);
    drop(p);
    // The next run: both remembered, a third configuration asked.
    let p = open().await;
    assert!(p
        .validate_config_async(Mode::Managed, "sim_thing", &thing("1"))
        .await
        .is_empty());
    assert!(p
        .validate_config_async(Mode::Managed, "sim_thing", &thing("2"))
        .await
        .is_empty());
    assert_eq!(logged(&log, "ValidateResourceConfig"), 2);
    assert!(p
        .validate_config_async(Mode::Managed, "sim_thing", &thing("3"))
        .await
        .is_empty());
    assert_eq!(logged(&log, "ValidateResourceConfig"), 3);
}
