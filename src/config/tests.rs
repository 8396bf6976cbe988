//! Loader tests: each directory under `fixtures/config/` is a configuration; the loaded tree's
//! outline and every diagnostic (rendered as users see them) must match its `expected.txt`.
//! `UPDATE_EXPECT=1` rewrites the expected files.

use super::{load, Module};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn outline(m: &Module, out: &mut String) {
    let name = if m.path.is_root() {
        "root".to_string()
    } else {
        m.path.to_string()
    };
    let _ = writeln!(out, "{name}:");
    let list = |xs: Vec<String>| xs.join(", ");
    if !m.required_providers.is_empty() {
        let rp = m
            .required_providers
            .values()
            .map(|p| {
                format!(
                    "{}={}@{}",
                    p.name,
                    p.source.as_deref().unwrap_or("-"),
                    p.version.as_deref().unwrap_or("-")
                )
            })
            .collect();
        let _ = writeln!(out, "  required_providers: {}", list(rp));
    }
    if !m.providers.is_empty() {
        let ps = m
            .providers
            .iter()
            .map(|p| match &p.alias {
                Some(a) => format!("{}.{a}", p.name),
                None => p.name.clone(),
            })
            .collect();
        let _ = writeln!(out, "  providers: {}", list(ps));
    }
    for v in m.variables.values() {
        let default = v
            .default
            .as_ref()
            .map(|d| {
                format!(
                    " default={}",
                    crate::value::format_hcl(d).replace('\n', " ")
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  variable {}: {}{default}{}{}{}",
            v.name,
            v.ty,
            if v.sensitive { " sensitive" } else { "" },
            if v.nullable { "" } else { " non-nullable" },
            if v.validations.is_empty() {
                String::new()
            } else {
                format!(" validations={}", v.validations.len())
            }
        );
    }
    if !m.locals.is_empty() {
        let _ = writeln!(
            out,
            "  locals: {}",
            list(m.locals.keys().cloned().collect())
        );
    }
    for r in m.resources.values() {
        let mut extra = Vec::new();
        if r.count.is_some() {
            extra.push("count".to_string());
        }
        if r.for_each.is_some() {
            extra.push("for_each".to_string());
        }
        if let Some(p) = &r.provider {
            extra.push(format!("provider={p}"));
        }
        for d in &r.depends_on {
            extra.push(format!("depends_on={:?}", d.subject));
        }
        let l = &r.lifecycle;
        if l.create_before_destroy {
            extra.push("create_before_destroy".into());
        }
        if l.prevent_destroy {
            extra.push("prevent_destroy".into());
        }
        if l.ignore_changes != super::IgnoreChanges::None {
            extra.push(format!("ignore_changes={:?}", l.ignore_changes));
        }
        if !l.replace_triggered_by.is_empty() {
            extra.push(format!(
                "replace_triggered_by={}",
                l.replace_triggered_by.len()
            ));
        }
        let addr = r.key().addr(crate::addr::ModulePath::root());
        let _ = writeln!(
            out,
            "  {addr} ({} body items){}",
            r.body.len(),
            if extra.is_empty() {
                String::new()
            } else {
                format!(" {}", extra.join(" "))
            }
        );
    }
    for (name, o) in &m.outputs {
        let _ = writeln!(
            out,
            "  output {}{}",
            name,
            if o.sensitive { " sensitive" } else { "" }
        );
    }
    for c in m.calls.values() {
        let passes: Vec<String> = c
            .providers
            .iter()
            .map(|p| format!("{}={}", p.child, p.parent))
            .collect();
        let _ = writeln!(
            out,
            "  module {} source={} inputs=[{}]{}{}",
            c.name,
            c.source,
            list(c.inputs.keys().cloned().collect()),
            if passes.is_empty() {
                String::new()
            } else {
                format!(" providers=[{}]", list(passes))
            },
            if c.count.is_some() { " count" } else { "" }
        );
    }
    for b in &m.moved {
        let _ = writeln!(out, "  moved {} -> {}", b.from, b.to);
    }
    for b in &m.removed {
        let _ = writeln!(out, "  removed {} destroy={}", b.from, b.destroy);
    }
    for c in m.children.values() {
        outline(c, out);
    }
}

fn check_load(dir: &Path) {
    let (config, mut diags) = load(dir);
    if let Some(config) = &config {
        diags.extend(super::validate(config, &|_, _| None));
    }
    let mut out = String::new();
    if let Some(config) = &config {
        outline(&config.root, &mut out);
        if config
            .modules()
            .iter()
            .any(|m| !m.required_providers.is_empty())
        {
            out.push_str("provider requirements:\n");
            for (addr, r) in config.provider_requirements() {
                let mods: Vec<String> = r
                    .modules
                    .iter()
                    .map(|m| {
                        if m.is_root() {
                            "root".into()
                        } else {
                            m.to_string()
                        }
                    })
                    .collect();
                let _ = writeln!(out, "  {addr} [{}] in {}", r.constraints, mods.join(", "));
            }
        }
        for d in &diags {
            out.push_str(&config.sources.render(d, false));
        }
    } else {
        for d in &diags {
            let _ = writeln!(out, "{}: {}", d.summary, d.detail);
        }
    }
    expect_test::expect_file![dir.join("expected.txt")].assert_eq(&out);
}

#[test]
fn config_fixtures() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/config");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/config")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 8, "fixture directories missing");
    // Loading resolves relative module paths against the fixture directory as given; run
    // from the fixture's parent so shown paths are relative ones.
    for d in dirs {
        check_load(&d);
    }
}

/// A `fixtures/vars/` case: `main.tf`, variable files, and `args.txt` with one argument per
/// line (`-var k=v`, `-var-file=F`, `env NAME=VALUE`); the values and diagnostics must match
/// `expected.txt`.
fn check_vars(dir: &Path) {
    use super::{input_values, VarArg};
    let (config, mut diags) = load(dir);
    let mut config = config.expect("fixture loads");
    let args = std::fs::read_to_string(dir.join("args.txt")).unwrap_or_default();
    let mut cli = Vec::new();
    let mut env = std::collections::BTreeMap::new();
    for line in args.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(v) = line.strip_prefix("-var ") {
            cli.push(VarArg::Var(v.to_string()));
        } else if let Some(f) = line.strip_prefix("-var-file=") {
            cli.push(VarArg::File(f.into()));
        } else if let Some(e) = line.strip_prefix("env ") {
            let (k, v) = e.split_once('=').expect("env NAME=VALUE");
            env.insert(k.to_string(), v.to_string());
        } else {
            panic!("bad args.txt line {line:?}");
        }
    }
    let (values, more) = input_values(&mut config, &cli, &env, dir);
    diags.extend(more);
    let mut out = String::new();
    for (k, v) in &values {
        let _ = writeln!(out, "var.{k} = {}", crate::value::format_hcl(v));
    }
    for d in &diags {
        out.push_str(&config.sources.render(d, false));
    }
    expect_test::expect_file![dir.join("expected.txt")].assert_eq(&out);
}

#[test]
fn vars_fixtures() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/vars");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/vars")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 3, "fixture directories missing");
    for d in dirs {
        check_vars(&d);
    }
}
