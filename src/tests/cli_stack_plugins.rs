//! Issue 33: a stack's components run the plugin providers `cairn stack init` installed
//! (the oracle's Python `sim` plugin, from a filesystem mirror and through `dev_overrides`),
//! locked in `.terraform.lock.hcl` beside the stack's files.

use super::project;
use super::stack_fixtures::{
    net_then_app, run_cairn, sim_things, PREFIX_VAR, SIM_MAIN, UPSTREAM_MODULE,
};
use std::path::{Path, PathBuf};

fn cairn(dir: &Path, args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run_cairn(dir, args, &env)
}

/// The oracle's Python `sim` plugin as a command line (its interpreter and provider
/// directory, as `../shared/oracle/setup.sh` set them up), or `None` (skipped outside CI)
/// when it is not set up.
fn oracle_plugin() -> Option<String> {
    let python =
        PathBuf::from(std::env::var("ORACLE_VENV").unwrap_or_else(|_| "/tmp/oracle-venv".into()))
            .join("bin/python3");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let provider = [
        std::env::var("ORACLE_DIR").map(PathBuf::from).ok(),
        Some(manifest.join("../shared/oracle")),
        Some(manifest.join("../../shared/oracle")),
        Some(PathBuf::from("/tmp/shared/oracle")),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("provider"))
    .find(|d| d.join("sim_provider.py").is_file());
    match provider {
        Some(p) if python.exists() => Some(format!(
            "'{}' -c 'import sys; sys.path.insert(0, \"{}\"); from sim_provider import main; main()'",
            python.display(),
            p.display()
        )),
        _ => {
            assert!(
                std::env::var("CI").is_err(),
                "the oracle plugin is missing: run ../shared/oracle/setup.sh"
            );
            eprintln!("no oracle plugin: skipped");
            None
        }
    }
}

/// A launcher of the oracle plugin that first notes each start in `mark` (so the test sees
/// the plugin, not the built-in `sim`, answered).
fn launcher(at: &Path, plugin: &str, mark: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(
        at,
        format!(
            "#!/bin/sh\necho started >> '{}'\nexec {plugin}\n",
            mark.display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// [`UPSTREAM_MODULE`] on the plugin.
fn module() -> String {
    format!(
        "terraform {{\n  required_providers {{\n    sim = {{ source = \"example.com/sim/sim\" }}\n  }}\n}}\n{UPSTREAM_MODULE}"
    )
}

/// The plugin's own `required_providers` (not the built-in sim's).
const REQUIRED: &str = r#"required_providers {
  sim = {
    source  = "example.com/sim/sim"
    version = "~> 1.0"
  }
}
"#;

/// The stack's output (`app` holds `net`'s id).
const OUTPUT: &str = r#"output "app" {
  type  = string
  value = component.app.id
}
"#;

/// The stack: the plugin's `required_providers`, then as every sim stack.
fn components() -> String {
    format!(
        "{REQUIRED}{PREFIX_VAR}{SIM_MAIN}{}{OUTPUT}",
        net_then_app("./modules/thing")
    )
}

const DEPLOYMENTS: &str = r#"deployment "dev" {
  inputs = { prefix = "dev" }
}
deployment "prod" {
  inputs = { prefix = "prod" }
}
"#;

fn things(store: &Path) -> Vec<(String, String)> {
    sim_things(store, "main")
}

#[test]
fn stack_init_installs_the_plugin_providers_and_the_components_run_them() {
    let Some(plugin) = oracle_plugin() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let mark = home.path().join("starts");
    let platform = cairn::provider::install::platform::Platform::current().to_string();
    let mirror = home.path().join("mirror");
    launcher(
        &mirror
            .join("example.com/sim/sim/1.0.0")
            .join(&platform)
            .join("terraform-provider-sim_v1.0.0"),
        &plugin,
        &mark,
    );
    let rc = home.path().join("rc");
    std::fs::write(
        &rc,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            mirror.display()
        ),
    )
    .unwrap();
    let dir = project(&[
        ("stack.tfcomponent.hcl", &components()),
        ("deploy.tfdeploy.hcl", DEPLOYMENTS),
        ("modules/thing/main.tf", &module()),
    ]);
    let d = dir.path();
    let store = d.join("sim-store");
    let env = [
        ("CAIRN_CLI_CONFIG_FILE", rc.display().to_string()),
        ("SIM_STORE", store.display().to_string()),
        ("HOME", home.path().display().to_string()),
    ];
    let (code, out, err) = cairn(d, &["stack", "init"], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "  - example.com/sim/sim 1.0.0: plugin from the filesystem mirror {}, in .terraform/providers/example.com/sim/sim/1.0.0/{platform}",
            mirror.display()
        )),
        "{out}"
    );
    assert!(
        out.contains("- Lock file: created .terraform.lock.hcl."),
        "{out}"
    );
    let lock = std::fs::read_to_string(d.join(".terraform.lock.hcl")).unwrap();
    assert!(lock.contains("provider \"example.com/sim/sim\""), "{lock}");
    assert!(lock.contains("constraints = \"~> 1.0"), "{lock}");
    assert!(!mark.exists(), "init starts no plugin");
    // Plan and apply run the installed plugin for every component instance.
    let (code, out, err) = cairn(d, &["stack", "apply", "-auto-approve"], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Stack apply complete!"), "{out}");
    let starts = std::fs::read_to_string(&mark).unwrap_or_default();
    assert!(starts.lines().count() >= 4, "the plugin ran: {starts:?}");
    assert_eq!(
        things(&store),
        vec![
            ("dev-app".to_string(), "dev-net-1".to_string()),
            ("dev-net".to_string(), "-".to_string()),
            ("prod-app".to_string(), "prod-net-1".to_string()),
            ("prod-net".to_string(), "-".to_string()),
        ]
    );
    let (code, out, _) = cairn(d, &["stack", "plan", "-detailed-exitcode"], &env);
    assert_eq!(code, 0, "{out}");
    // Each component instance's own state, as for the built-in providers.
    let state_env = [
        env[0].clone(),
        env[1].clone(),
        ("TF_WORKSPACE", "dev.app".to_string()),
    ];
    let (code, out, err) = cairn(d, &["state", "list"], &state_env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("sim_thing.t"), "{out}");
    // The package changed behind the lock's back: refused, as for a root module.
    std::fs::write(
        d.join(".terraform/providers/example.com/sim/sim/1.0.0")
            .join(&platform)
            .join("terraform-provider-sim_v1.0.0"),
        "#!/bin/sh\nexit 1\n",
    )
    .unwrap();
    let (code, out, err) = cairn(d, &["stack", "plan"], &env);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("example.com/sim/sim"), "{err}");
    // Destroyed with the plugin again (from dev_overrides: not installed, not locked).
    let dev_rc = home.path().join("dev-rc");
    std::fs::write(
        &dev_rc,
        format!(
            "provider_installation {{\n  dev_overrides {{\n    \"example.com/sim/sim\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            mirror.join("example.com/sim/sim/1.0.0").join(&platform).display()
        ),
    )
    .unwrap();
    let env = [
        ("CAIRN_CLI_CONFIG_FILE", dev_rc.display().to_string()),
        env[1].clone(),
        env[2].clone(),
    ];
    let (code, out, err) = cairn(d, &["stack", "init"], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("example.com/sim/sim: plugin from dev_overrides"),
        "{out}"
    );
    assert!(
        out.contains("provider development overrides are in effect"),
        "{out}"
    );
    std::fs::remove_file(&mark).unwrap();
    let (code, out, err) = cairn(d, &["stack", "destroy", "-auto-approve"], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(things(&store).is_empty(), "{:?}", things(&store));
    assert!(mark.exists(), "the dev override ran");
}

#[test]
fn a_component_given_another_providers_configuration_is_refused_at_init() {
    let other = module().replace("example.com/sim/sim", "hashicorp/sim");
    let dir = project(&[
        ("stack.tfcomponent.hcl", &components()),
        ("deploy.tfdeploy.hcl", DEPLOYMENTS),
        ("modules/thing/main.tf", &other),
    ]);
    let d = dir.path();
    let home = tempfile::tempdir().unwrap();
    let env = [
        ("HOME", home.path().display().to_string()),
        (
            "CAIRN_CLI_CONFIG_FILE",
            home.path().join("none").display().to_string(),
        ),
    ];
    let (code, out, err) = cairn(d, &["stack", "init"], &env);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("Error: Provider type mismatch"), "{err}");
    assert!(err.contains("stack.tfcomponent.hcl:18:"), "{err}");
    assert!(
        err.contains("component.net passes provider.sim.… (example.com/sim/sim)"),
        "{err}"
    );
    // A bad source address in the stack's required_providers, at its place.
    std::fs::write(
        d.join("stack.tfcomponent.hcl"),
        components().replace("example.com/sim/sim", "a/b/c/d"),
    )
    .unwrap();
    let (code, _, err) = cairn(d, &["stack", "validate"], &env);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Invalid provider source address"), "{err}");
    assert!(err.contains("stack.tfcomponent.hcl:2:"), "{err}");
}
