//! The built-in provider packages, keyed by package name. `builtin()` gives them the real
//! process's [`Host`]; tests pass their own.

use super::host::Host;
use super::{external, local, null, random, sim, terraform_data, Provider};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every built-in provider, configured from the process environment.
pub(crate) fn builtin() -> BTreeMap<String, Arc<dyn Provider>> {
    builtin_with(Host::from_process())
}

/// Every built-in provider, reading `host` instead of the process.
pub fn builtin_with(host: Host) -> BTreeMap<String, Arc<dyn Provider>> {
    let providers: Vec<Arc<dyn Provider>> = vec![
        Arc::new(sim::SimProvider::new(host.clone())),
        Arc::new(terraform_data::TerraformProvider::new(host.clone())),
        Arc::new(local::LocalProvider::new(host.clone())),
        Arc::new(random::RandomProvider::new(host.clone())),
        Arc::new(null::NullProvider::new(host.clone())),
        Arc::new(external::ExternalProvider::new(host)),
    ];
    providers
        .into_iter()
        .map(|p| (p.package().to_string(), p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_package_is_registered_under_its_prefix() {
        let all = builtin_with(Host::at("/"));
        let names: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["external", "local", "null", "random", "sim", "terraform"]
        );
        for (package, p) in &all {
            let s = p.schema();
            for t in s.resources.keys().chain(s.data_sources.keys()) {
                assert!(
                    t == package || t.starts_with(&format!("{package}_")),
                    "{t} is not in package {package}"
                );
            }
        }
    }

    /// `Provider::validate`'s default and the providers that extend it agree: a type the
    /// package does not have is one "Unsupported type" error naming the package, and a value
    /// of the wrong type is an "Invalid argument value".
    #[test]
    fn every_package_validates_types_and_values_against_its_schema() {
        use crate::addr::Mode;
        use crate::value::Value;
        for (package, p) in builtin_with(Host::at("/")) {
            for mode in [Mode::Managed, Mode::Data] {
                let d = p.validate(
                    mode,
                    "no_such_type",
                    &Value::Null(crate::value::Type::Dynamic),
                );
                let summaries: Vec<&str> = d.0.iter().map(|d| d.summary.as_str()).collect();
                assert_eq!(summaries, ["Unsupported type"], "{package}");
                assert_eq!(
                    d.0[0].detail,
                    format!("{package}: the provider has no such type \"no_such_type\"")
                );
            }
            let s = p.schema();
            let typed = [(Mode::Managed, &s.resources), (Mode::Data, &s.data_sources)];
            for (mode, types) in typed {
                for type_ in types.keys() {
                    let d = p.validate(mode, type_, &Value::string("not an object"));
                    assert!(
                        d.0.iter().any(|d| d.summary == "Invalid argument value"),
                        "{package} {type_}: {d:?}"
                    );
                }
            }
        }
    }
}
