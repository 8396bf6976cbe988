//! Provider instances: the registry ("the provider of providers").
//!
//! A provider instance is a resource with an address (`provider["sim"].east`), an id and a
//! configuration, kept in state. This module holds the engine's view of them during a run:
//! - the packages (built-in `Provider`s) by name;
//! - configured instances, cached by (package, configuration) so refresh, plan and apply of
//!   one run configure each distinct configuration once;
//! - the stack configuration of *default* providers (`cairn.json` and
//!   `CAIRN_PROVIDER_<PACKAGE>_<ARGUMENT>`), synthesized when no module declares one.

use crate::diag::Diagnostic;
use crate::provider::{Configured, Provider};
use crate::value::Value;
use crate::value::ValueMap;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One configuration's configured instance, made once however many ask at the same time.
type ConfiguredCell = Arc<tokio::sync::OnceCell<Arc<dyn Configured>>>;

/// The built-in packages and the configured instances of this run.
pub struct Registry {
    packages: BTreeMap<String, Arc<dyn Provider>>,
    /// (package, configuration as canonical JSON) → configured instance. The `std` mutex is
    /// held only to find or insert a key's cell, never across `configure`; the cell
    /// (`tokio::sync::OnceCell`) makes concurrent users of one configuration wait for a single
    /// `configure` call instead of each making their own.
    configured: Mutex<HashMap<(String, String), ConfiguredCell>>,
    /// `cairn.json`'s `providers` object, overlaid with the environment.
    stack: ValueMap,
}

impl Registry {
    pub fn new(packages: BTreeMap<String, Arc<dyn Provider>>, stack: ValueMap) -> Self {
        Registry {
            packages,
            configured: Mutex::new(HashMap::new()),
            stack,
        }
    }

    pub fn package(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.packages.get(name)
    }

    /// Every provider package, by name.
    pub(crate) fn packages(&self) -> &BTreeMap<String, Arc<dyn Provider>> {
        &self.packages
    }

    pub fn package_names(&self) -> impl Iterator<Item = &str> {
        self.packages.keys().map(String::as_str)
    }

    /// The configuration of a synthesized default provider for `package`.
    pub fn default_config(&self, package: &str) -> Value {
        self.stack
            .get(package)
            .cloned()
            .unwrap_or_else(|| Value::Object(ValueMap::new()))
    }

    /// A configured instance for a wholly known configuration, configuring it on first use.
    pub async fn configure(
        &self,
        package: &str,
        config: &Value,
    ) -> Result<Arc<dyn Configured>, String> {
        let provider = self
            .packages
            .get(package)
            .ok_or_else(|| format!("There is no provider package named {package:?}."))?
            .clone();
        let key = (package.to_string(), canonical(config));
        let cell = self
            .configured
            .lock()
            .expect("registry lock")
            .entry(key)
            .or_default()
            .clone();
        // A failed configure leaves the cell empty: the next user tries again.
        cell.get_or_try_init(|| async { provider.configure(config).await.map_err(|e| e.message) })
            .await
            .cloned()
    }

    /// Every configured instance (to stop them on Ctrl-C).
    pub fn all_configured(&self) -> Vec<Arc<dyn Configured>> {
        self.configured
            .lock()
            .expect("registry lock")
            .values()
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }
}

/// A value's canonical JSON text, for cache keys and equality of configurations: its stored
/// form when wholly known, so a configuration read back from state (whose nulls have lost
/// their types) and the same configuration evaluated from the files share one configured
/// instance, and the provider is configured once per command.
pub(crate) fn canonical(v: &Value) -> String {
    match v.to_stored() {
        Ok(stored) => stored.to_json().to_string(),
        Err(_) => serde_json::to_string(v).unwrap_or_default(),
    }
}

/// Reads the stack configuration of default providers: the `providers` object of
/// `<root>/cairn.json`, overridden by `CAIRN_PROVIDER_<PACKAGE>_<ARGUMENT>` variables (values
/// parsed as JSON when they parse, else taken as strings).
pub(crate) fn stack_config(
    root: &Path,
    env: &BTreeMap<String, String>,
    packages: &[&str],
) -> Result<ValueMap, Diagnostic> {
    let mut out: ValueMap = ValueMap::new();
    let path = root.join("cairn.json");
    if path.exists() {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Diagnostic::error(
                "Cannot read cairn.json",
                format!("Reading {}: {e}.", path.display()),
            )
        })?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            Diagnostic::error(
                "Invalid cairn.json",
                format!("{}: {e}. It should be an object like {{\"providers\": {{\"sim\": {{\"region\": \"eu\"}}}}}}.", path.display()),
            )
        })?;
        if let Some(providers) = json.get("providers") {
            let Some(obj) = providers.as_object() else {
                return Err(Diagnostic::error(
                    "Invalid cairn.json",
                    format!(
                        "{}: \"providers\" must be an object of package name to configuration.",
                        path.display()
                    ),
                ));
            };
            for (package, config) in obj {
                if !config.is_object() {
                    return Err(Diagnostic::error(
                        "Invalid cairn.json",
                        format!(
                            "{}: providers.{package} must be an object of arguments.",
                            path.display()
                        ),
                    ));
                }
                out.insert(package.clone(), Value::from_json(config));
            }
        }
    }
    for (key, raw) in env {
        let Some(rest) = key.strip_prefix("CAIRN_PROVIDER_") else {
            continue;
        };
        let lower = rest.to_ascii_lowercase();
        let Some(package) = packages
            .iter()
            .find(|p| lower.starts_with(&format!("{p}_")))
        else {
            continue;
        };
        let arg = &lower[package.len() + 1..];
        if arg.is_empty() {
            continue;
        }
        let value = serde_json::from_str::<serde_json::Value>(raw)
            .ok()
            .filter(|j| !j.is_string())
            .map(|j| Value::from_json(&j))
            .unwrap_or_else(|| Value::string(raw.clone()));
        let entry = out
            .entry(package.to_string())
            .or_insert_with(|| Value::Object(ValueMap::new()));
        if let Value::Object(m) = entry {
            m.insert(arg.to_string(), value);
        }
    }
    Ok(out)
}

/// A new provider instance id: the package and a random suffix, unique per instance created.
pub(crate) fn new_instance_id(package: &str) -> String {
    use rand::Rng;
    let n: u64 = rand::thread_rng().gen();
    format!("{package}-{n:016x}")
}

/// `provider::NAME::FUNC(...)`: NAME is the provider's local name (the name its package
/// answers for).
impl crate::eval::ProviderFunctions for Registry {
    fn signature(&self, provider: &str, name: &str) -> Result<crate::schema::FunctionSig, String> {
        let full = format!("provider::{provider}::{name}");
        let Some(p) = self.packages.get(provider) else {
            return Err(format!(
                "There is no function named \"{full}\": the configuration has no provider \"{provider}\"."
            ));
        };
        let functions = p.functions();
        functions.get(name).cloned().ok_or_else(|| {
            format!(
                "There is no function named \"{full}\".{}",
                crate::eval::suggest::suffix(name, functions.keys().map(String::as_str))
            )
        })
    }

    fn call(
        &self,
        provider: &str,
        name: &str,
        args: Vec<Value>,
    ) -> Result<Value, crate::schema::FunctionFailure> {
        match self.packages.get(provider) {
            Some(p) => p.call_function(name, args),
            None => Err(crate::schema::FunctionFailure {
                arg: None,
                message: format!("there is no provider {provider:?}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_config_from_file_and_env() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cairn.json"),
            r#"{"providers": {"sim": {"region": "eu", "latency_ms": 5}}}"#,
        )
        .unwrap();
        let env = BTreeMap::from([
            ("CAIRN_PROVIDER_SIM_REGION".to_string(), "us".to_string()),
            (
                "CAIRN_PROVIDER_SIM_FAIL".to_string(),
                "[\"create:a\"]".to_string(),
            ),
            ("CAIRN_PROVIDER_NOPE_X".to_string(), "1".to_string()),
        ]);
        let c = stack_config(dir.path(), &env, &["sim", "local"]).unwrap();
        let sim = c.get("sim").unwrap();
        assert_eq!(sim.get("region"), Some(&Value::string("us")));
        assert_eq!(sim.get("latency_ms"), Some(&Value::int(5)));
        assert_eq!(
            sim.get("fail"),
            Some(&Value::Tuple(vec![Value::string("create:a")]))
        );
        assert!(!c.contains_key("nope"));
    }

    #[test]
    fn bad_cairn_json_says_where() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cairn.json"), r#"{"providers": []}"#).unwrap();
        let e = stack_config(dir.path(), &BTreeMap::new(), &["sim"]).unwrap_err();
        assert!(
            e.detail.contains("\"providers\" must be an object"),
            "{}",
            e.detail
        );
    }
}
