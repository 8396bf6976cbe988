//! `providers`, `providers schema -json`, `metadata functions -json`, `get`, `modules`,
//! `login` and `logout`, end to end on the real binary, against what Terraform 1.11 printed
//! for the same configurations (`fixtures/golden/providers_cmds/`: each case's `terraform*`
//! files are Terraform's output, made with the oracle's `sim` plugin where one is needed).

use super::check_cli_in;
use cairn_test_registry::{provider_zip, registry_routes, Published, Server, Signer, Tls};
use serde_json::Value as J;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn case(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/golden/providers_cmds")
        .join(name)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A copy of a case's configuration (its `.tf` files and directories) in a new directory.
fn copy_case(name: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                copy(&p, &to.join(e.file_name()));
            } else if p.extension().is_some_and(|x| x == "tf") {
                std::fs::copy(&p, to.join(e.file_name())).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&case(name), dir.path());
    dir
}

/// A tree drawn by treeprint, made independent of sibling order: each item with its
/// ancestors, sorted. (Terraform draws siblings in Go's random map order.)
fn canonical_tree(text: &str) -> Vec<String> {
    let mut path: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(i) = line.find("── ") else {
            out.push(line.to_string());
            continue;
        };
        let depth = line[..i].chars().count() / 4;
        let item = line[i + "── ".len()..].to_string();
        path.truncate(depth);
        path.push(item);
        out.push(path.join(" > "));
    }
    out.sort();
    out
}

#[test]
fn providers_prints_the_requirement_tree_as_terraform_does() {
    let dir = copy_case("tree");
    let (code, out, err) = check_cli_in(dir.path(), &["providers"], "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "");
    let terraform = read(&case("tree/terraform.txt"));
    assert_eq!(canonical_tree(&out), canonical_tree(&terraform), "{out}");
    // Cairn's own order is stable: providers by address, then modules by name.
    expect_test::expect_file![case("tree/cairn.txt")].assert_eq(&out);
    // No state directory is made.
    assert!(!dir.path().join(".cairn").exists());
}

#[test]
fn providers_lists_what_the_state_requires() {
    let dir = copy_case("state");
    let store = dir.path().join("sim-store");
    let applied = "terraform {\n  required_providers {\n    sim = { source = \"example.com/sim/sim\" }\n  }\n}\n\nresource \"sim_thing\" \"a\" {\n  name = \"a\"\n}\n\nresource \"terraform_data\" \"d\" {}\n";
    std::fs::write(dir.path().join("main.tf"), applied).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["apply", "-auto-approve"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("SIM_STORE", &store)
        .env_remove("TF_CLI_CONFIG_FILE")
        .env_remove("CAIRN_STATE_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The resource leaves the configuration; its provider is still required by the state.
    std::fs::copy(case("state/main.tf"), dir.path().join("main.tf")).unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["providers"], "");
    assert_eq!(code, 0, "{err}");
    let terraform = read(&case("state/terraform.txt"));
    assert_eq!(canonical_tree(&out), canonical_tree(&terraform), "{out}");
    assert!(
        out.ends_with(
            "Providers required by state:\n\n    provider[example.com/sim/sim]\n\n    \
             provider[terraform.io/builtin/terraform]\n\n"
        ),
        "{out}"
    );
}

/// The oracle's CLI configuration (`dev_overrides` for `example.com/sim/sim`).
fn oracle_cli_config() -> PathBuf {
    let p = PathBuf::from(std::env::var("ORACLE_BIN").unwrap_or_else(|_| "/tmp/oracle-bin".into()))
        .join("terraformrc");
    assert!(
        p.is_file(),
        "{} is missing: run ../shared/oracle/setup.sh (as .ci/run does)",
        p.display()
    );
    p
}

#[test]
fn providers_schema_json_of_a_plugin_is_terraforms_byte_for_byte() {
    let dir = copy_case("schema");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["providers", "schema", "-json"])
        .current_dir(dir.path())
        .env("TF_CLI_CONFIG_FILE", oracle_cli_config())
        .env_remove("CAIRN_CLI_CONFIG_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        read(&case("schema/terraform.json"))
    );
}

/// Removes what Cairn's built-in providers word differently: descriptions and their kinds,
/// and the built-in `terraform` provider's functions (which Cairn does not have).
fn without_descriptions(v: &mut J) {
    match v {
        J::Object(m) => {
            m.remove("description");
            m.remove("description_kind");
            if m.contains_key("resource_schemas") {
                m.remove("functions");
            }
            for v in m.values_mut() {
                without_descriptions(v);
            }
        }
        J::Array(a) => a.iter_mut().for_each(without_descriptions),
        _ => {}
    }
}

#[test]
fn providers_schema_json_of_a_builtin_has_terraforms_shape() {
    let dir = copy_case("schema_builtin");
    let (code, out, err) = check_cli_in(dir.path(), &["providers", "schema", "-json"], "");
    assert_eq!(code, 0, "{err}");
    let mut ours: J = serde_json::from_str(&out).unwrap();
    let mut theirs: J =
        serde_json::from_str(&read(&case("schema_builtin/terraform.json"))).unwrap();
    assert_eq!(ours["format_version"], "1.0");
    without_descriptions(&mut ours);
    without_descriptions(&mut theirs);
    assert_eq!(ours, theirs);
    // Without -json: Terraform's refusal.
    let (code, _, err) = check_cli_in(dir.path(), &["providers", "schema"], "");
    assert_eq!(code, 1);
    assert!(err.contains("requires the `-json` flag"), "{err}");
}

#[test]
fn metadata_functions_json_matches_terraform() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check_cli_in(dir.path(), &["metadata", "functions", "-json"], "");
    assert_eq!(code, 0, "{err}");
    let ours: J = serde_json::from_str(&out).unwrap();
    let theirs: J = serde_json::from_str(&read(&case("functions.json"))).unwrap();
    assert_eq!(ours["format_version"], theirs["format_version"]);
    let (ours, theirs) = (
        ours["function_signatures"].as_object().unwrap(),
        theirs["function_signatures"].as_object().unwrap(),
    );
    let names = |m: &serde_json::Map<String, J>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(ours), names(theirs), "the same functions");
    // Descriptions Cairn words itself (README, "Where the command line differs").
    let own_words = [
        "ephemeralasnull",
        "issensitive",
        "sensitive",
        "templatestring",
    ];
    let mut same = 0;
    for (name, sig) in theirs {
        let mut a = ours[name].clone();
        let mut b = sig.clone();
        if own_words.contains(&name.trim_start_matches("core::")) {
            without_descriptions(&mut a);
            without_descriptions(&mut b);
        } else {
            same += 1;
        }
        assert_eq!(a, b, "{name}");
    }
    assert_eq!(same, theirs.len() - 2 * own_words.len());
    let (code, _, err) = check_cli_in(dir.path(), &["metadata", "functions"], "");
    assert_eq!(code, 1);
    assert!(err.contains("requires the `-json` flag"), "{err}");
}

#[test]
fn get_and_modules_match_terraform() {
    let dir = copy_case("tree");
    let (code, out, err) = check_cli_in(dir.path(), &["get"], "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, read(&case("tree/terraform-get.txt")));
    let (code, out, err) = check_cli_in(dir.path(), &["modules", "-json"], "");
    assert_eq!(code, 0, "{err}");
    let sorted = |text: &str| {
        let mut j: J = serde_json::from_str(text).unwrap();
        if let Some(list) = j["modules"].as_array_mut() {
            list.sort_by_key(|m| m.to_string());
        }
        j
    };
    assert_eq!(
        sorted(&out),
        sorted(&read(&case("tree/terraform-modules.json")))
    );
    let (code, out, err) = check_cli_in(dir.path(), &["modules"], "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, read(&case("tree/terraform-modules.txt")));
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("main.tf"), "").unwrap();
    let (code, out, _) = check_cli_in(empty.path(), &["modules"], "");
    assert_eq!(
        (code, out.as_str()),
        (0, "No modules found in configuration.\n")
    );
    let (_, out, _) = check_cli_in(empty.path(), &["modules", "-json"], "");
    assert_eq!(out, "{\"format_version\":\"1.0\",\"modules\":null}\n");
}

/// Runs cairn with `HOME` (and nothing of the user's configuration) and `stdin`.
fn cairn_home(home: &Path, dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write as _;
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("HOME", home)
        .env("SSL_CERT_FILE", home.join("ca.pem"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for v in [
        "CAIRN_STATE_DIR",
        "CAIRN_CLI_CONFIG_FILE",
        "TF_CLI_CONFIG_FILE",
        "TF_PLUGIN_CACHE_DIR",
        "TF_DATA_DIR",
        "XDG_DATA_HOME",
    ] {
        c.env_remove(v);
    }
    for (k, _) in std::env::vars() {
        if k.starts_with("TF_TOKEN_") {
            c.env_remove(k);
        }
    }
    let mut child = c.spawn().unwrap();
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn login_saves_a_token_that_installation_sends_and_logout_removes_it() {
    let tls = Tls::new();
    let server = Server::start(&tls);
    let signer = Signer::new();
    let platform = cairn::provider::install::platform::Platform::current().to_string();
    let pkg = Published {
        namespace: "testns".into(),
        type_: "thing".into(),
        version: "1.0.0".into(),
        platform: platform.clone(),
        zip: provider_zip(&[("terraform-provider-thing_v1.0.0", b"#!/bin/sh\n")]),
        protocols: vec!["5.0".into()],
    };
    server.set_routes(registry_routes(&server.base(), &[pkg], &signer, false));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("ca.pem"), &tls.ca_pem).unwrap();
    let proj = tempfile::tempdir().unwrap();
    let host = server.host();
    std::fs::write(
        proj.path().join("main.tf"),
        format!(
            "terraform {{\n  required_providers {{\n    thing = {{ source = \"{host}/testns/thing\" }}\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let token = "s3cret.atlasv1.token";
    let (code, out, err) = cairn_home(
        home.path(),
        proj.path(),
        &["login", &host.to_uppercase()],
        &format!("{token}\n"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains(token) && !err.contains(token), "{out}{err}");
    let file = home.path().join(".terraform.d/credentials.tfrc.json");
    assert_eq!(
        read(&file),
        format!("{{\n  \"credentials\": {{\n    \"{host}\": {{\n      \"token\": \"{token}\"\n    }}\n  }}\n}}")
    );
    assert!(
        out.contains("Success! Cairn has obtained and saved an API token."),
        "{out}"
    );

    let (code, out, err) = cairn_home(home.path(), proj.path(), &["init"], "");
    assert_eq!(code, 0, "{out}{err}");
    let auth = server.take_authorized();
    assert!(!auth.is_empty(), "no request carried the token");
    assert!(
        auth.iter().all(|(_, a)| *a == format!("Bearer {token}")),
        "{auth:?}"
    );

    let (code, out, err) = cairn_home(home.path(), proj.path(), &["logout", &host], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "Success! Cairn has removed the stored API token for {host}."
        )),
        "{out}"
    );
    assert_eq!(read(&file), "{\n  \"credentials\": {}\n}");
    let (_, out, _) = cairn_home(home.path(), proj.path(), &["logout", &host], "");
    assert_eq!(out, format!("No credentials for {host} are stored.\n\n"));
    std::fs::remove_dir_all(proj.path().join(".terraform")).unwrap();
    std::fs::remove_file(proj.path().join(".terraform.lock.hcl")).unwrap();
    server.take_authorized();
    let (code, out, err) = cairn_home(home.path(), proj.path(), &["init"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(server.take_authorized(), Vec::<(String, String)>::new());

    // Nothing on standard input: an error, and no file change.
    let (code, _, err) = cairn_home(home.path(), proj.path(), &["login", &host], "");
    assert_eq!(code, 1);
    assert!(err.contains("No token given"), "{err}");
    let (code, _, err) = cairn_home(home.path(), proj.path(), &["login", "not a host"], "x\n");
    assert_eq!(code, 1);
    assert!(err.contains("Invalid hostname"), "{err}");
}

/// Runs cairn in `dir` with a CLI configuration file of `rc` (and `HOME` in `home`).
fn cairn_rc(home: &Path, dir: &Path, rc: &str, args: &[&str]) -> (i32, String, String) {
    let file = home.join("cairn.rc");
    std::fs::write(&file, rc).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("HOME", home)
        .env("CAIRN_CLI_CONFIG_FILE", &file)
        .env_remove("TF_CLI_CONFIG_FILE")
        .env_remove("TF_PLUGIN_CACHE_DIR")
        .env_remove("TF_DATA_DIR")
        .env_remove("CAIRN_STATE_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Terraform's lines with Cairn's name, in any order (Terraform prints the "Obtained" lines
/// in Go's map order).
fn lines_as_set(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .replace("Terraform", "Cairn")
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn providers_lock_records_other_platforms_as_terraform_does() {
    let home = tempfile::tempdir().unwrap();
    let dir = copy_case("lock");
    let mirror = case("lock/mirror");
    let fs = format!("-fs-mirror={}", mirror.display());
    let run = |platforms: &[&str]| {
        let mut args = vec!["providers", "lock", fs.as_str()];
        args.extend(platforms);
        cairn_rc(home.path(), dir.path(), "", &args)
    };
    let (code, out, err) = run(&["-platform=linux_amd64", "-platform=darwin_arm64"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        read(&case("lock/terraform.txt")).replace("Terraform", "Cairn")
    );
    assert_eq!(
        read(&dir.path().join(".terraform.lock.hcl")),
        read(&case("lock/terraform.lock.hcl"))
    );
    // Another platform: its hash is added, the others stay.
    let (code, out, err) = run(&["-platform=linux_amd64", "-platform=windows_amd64"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        lines_as_set(&out),
        lines_as_set(&read(&case("lock/terraform-again.txt")))
    );
    assert_eq!(
        read(&dir.path().join(".terraform.lock.hcl")),
        read(&case("lock/terraform-again.lock.hcl"))
    );
    let (code, out, _) = run(&["-platform=windows_amd64"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        read(&case("lock/terraform-unchanged.txt")).replace("Terraform", "Cairn")
    );
    // Bad input: a platform that is not OS_ARCH, both mirrors, a provider not required.
    let (code, _, err) = run(&["-platform=linux"]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid target platform"), "{err}");
    let (code, _, err) = cairn_rc(
        home.path(),
        dir.path(),
        "",
        &["providers", "lock", &fs, "-net-mirror=https://m.example/"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("mutually-exclusive"), "{err}");
    let (code, _, err) = cairn_rc(
        home.path(),
        dir.path(),
        "",
        &["providers", "lock", &fs, "example.com/ns/other"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("is not required by the current configuration"),
        "{err}"
    );
}

#[test]
fn providers_mirror_makes_a_mirror_that_init_installs_from() {
    let home = tempfile::tempdir().unwrap();
    let dir = copy_case("lock");
    let source = case("lock/mirror");
    let rc_from = |p: &Path| {
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            p.display()
        )
    };
    let out_dir = home.path().join("new-mirror");
    let (code, out, err) = cairn_rc(
        home.path(),
        dir.path(),
        &rc_from(&source),
        &[
            "providers",
            "mirror",
            "-platform=linux_amd64",
            "-platform=darwin_arm64",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "- Mirroring example.com/ns/thing...\n  - Selected v1.1.0 to meet constraints ~> 1.0\n  \
         - Downloading package for linux_amd64...\n  - Package from the filesystem mirror \
         PATH\n  - Downloading package for darwin_arm64...\n  - Package from the filesystem \
         mirror PATH\n"
            .replace("PATH", &source.display().to_string())
    );
    let at = out_dir.join("example.com/ns/thing");
    let mut files: Vec<String> = std::fs::read_dir(&at)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "1.1.0.json",
            "index.json",
            "terraform-provider-thing_1.1.0_darwin_arm64.zip",
            "terraform-provider-thing_1.1.0_linux_amd64.zip",
        ]
    );
    // The archives themselves, byte for byte.
    for f in &files[2..] {
        assert_eq!(
            std::fs::read(at.join(f)).unwrap(),
            std::fs::read(source.join("example.com/ns/thing").join(f)).unwrap()
        );
    }
    // The network mirror protocol's indexes, as Terraform writes them.
    assert_eq!(
        read(&at.join("index.json")),
        "{\n  \"versions\": {\n    \"1.1.0\": {}\n  }\n}"
    );
    let lock = read(&case("lock/terraform.lock.hcl"));
    let v: J = serde_json::from_str(&read(&at.join("1.1.0.json"))).unwrap();
    for p in ["linux_amd64", "darwin_arm64"] {
        let a = &v["archives"][p];
        assert_eq!(a["url"], format!("terraform-provider-thing_1.1.0_{p}.zip"));
        let h = a["hashes"][0].as_str().unwrap();
        assert!(lock.contains(h), "{h} is not in Terraform's lock");
    }
    // Another machine: init from the new mirror alone.
    let proj = tempfile::tempdir().unwrap();
    std::fs::copy(case("lock/main.tf"), proj.path().join("main.tf")).unwrap();
    let (code, out, err) = cairn_rc(home.path(), proj.path(), &rc_from(&out_dir), &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("example.com/ns/thing 1.1.0: plugin from the filesystem mirror"),
        "{out}"
    );
    let locked = read(&proj.path().join(".terraform.lock.hcl"));
    assert!(locked.contains("version     = \"1.1.0\""), "{locked}");
}

#[test]
fn a_mirror_served_over_https_is_a_network_mirror_for_init_and_lock() {
    let home = tempfile::tempdir().unwrap();
    let dir = copy_case("lock");
    let source = case("lock/mirror");
    let out_dir = home.path().join("published");
    let rc = format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
        source.display()
    );
    let (code, out, err) = cairn_rc(
        home.path(),
        dir.path(),
        &rc,
        &[
            "providers",
            "mirror",
            "-platform=linux_amd64",
            "-platform=darwin_arm64",
            "-platform=windows_amd64",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    // Publish the directory as it is.
    let tls = Tls::new();
    let server = Server::start(&tls);
    let mut routes = std::collections::BTreeMap::new();
    let at = out_dir.join("example.com/ns/thing");
    for e in std::fs::read_dir(&at).unwrap() {
        let e = e.unwrap();
        routes.insert(
            format!(
                "/m/example.com/ns/thing/{}",
                e.file_name().to_string_lossy()
            ),
            std::fs::read(e.path()).unwrap(),
        );
    }
    server.set_routes(routes);
    std::fs::write(home.path().join("ca.pem"), &tls.ca_pem).unwrap();
    let url = format!("{}/m/", server.base());
    // `providers lock -net-mirror`: the same lock as Terraform's from the filesystem mirror
    // (h1: hashes of the same packages).
    let (code, out, err) = cairn_home(
        home.path(),
        dir.path(),
        &[
            "providers",
            "lock",
            &format!("-net-mirror={url}"),
            "-platform=linux_amd64",
            "-platform=darwin_arm64",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        read(&dir.path().join(".terraform.lock.hcl")),
        read(&case("lock/terraform.lock.hcl"))
    );
    // `init` with that lock file, from the network mirror alone.
    let rc =
        format!("provider_installation {{\n  network_mirror {{\n    url = \"{url}\"\n  }}\n}}\n");
    std::fs::write(home.path().join("net.rc"), &rc).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("init")
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("HOME", home.path())
        .env("CAIRN_CLI_CONFIG_FILE", home.path().join("net.rc"))
        .env("SSL_CERT_FILE", home.path().join("ca.pem"))
        .env_remove("TF_CLI_CONFIG_FILE")
        .env_remove("TF_PLUGIN_CACHE_DIR")
        .env_remove("CAIRN_STATE_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("example.com/ns/thing 1.1.0: plugin from the network mirror"),
        "{text}"
    );
}

#[test]
fn providers_lock_from_a_registry_adds_each_platforms_h1_and_the_signed_zh_hashes() {
    let tls = Tls::new();
    let server = Server::start(&tls);
    let signer = Signer::new();
    let published = |platform: &str| Published {
        namespace: "testns".into(),
        type_: "thing".into(),
        version: "1.0.0".into(),
        platform: platform.into(),
        zip: provider_zip(&[(
            "terraform-provider-thing_v1.0.0",
            format!("#!/bin/sh\necho {platform}\n").as_bytes(),
        )]),
        protocols: vec!["5.0".into()],
    };
    let platforms = ["linux_amd64", "darwin_arm64", "windows_amd64"];
    let pkgs: Vec<Published> = platforms.iter().map(|p| published(p)).collect();
    server.set_routes(registry_routes(&server.base(), &pkgs, &signer, false));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("ca.pem"), &tls.ca_pem).unwrap();
    let proj = tempfile::tempdir().unwrap();
    let host = server.host();
    std::fs::write(
        proj.path().join("main.tf"),
        format!(
            "terraform {{\n  required_providers {{\n    thing = {{ source = \"{host}/testns/thing\" }}\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let (code, out, err) = cairn_home(
        home.path(),
        proj.path(),
        &[
            "providers",
            "lock",
            "-platform=linux_amd64",
            "-platform=darwin_arm64",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "- Retrieved {host}/testns/thing 1.0.0 for darwin_arm64 (self-signed, key ID "
        )),
        "{out}"
    );
    let lock = cairn::provider::install::LockFile::read(proj.path()).unwrap();
    let addr =
        cairn::addr::provider_source::SourceAddr::parse(&format!("{host}/testns/thing")).unwrap();
    let hashes = &lock.providers[&addr].hashes;
    let count = |prefix: &str| hashes.iter().filter(|h| h.starts_with(prefix)).count();
    // An h1: per platform fetched, a zh: per platform the registry signed.
    assert_eq!((count("h1:"), count("zh:")), (2, 3), "{hashes:?}");
    // An install on either platform's package is vouched for: this machine's h1: is there.
    let (code, out, err) = cairn_home(home.path(), proj.path(), &["init"], "");
    assert_eq!(code, 0, "{out}{err}");
}
