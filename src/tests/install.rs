//! `cairn init` installing providers, end to end on the real binary: filesystem mirrors, a
//! provider registry and a network mirror served over HTTPS on 127.0.0.1 by the test itself
//! (`cairn-test-registry`), the lock file, the plugin cache, development overrides and the
//! built-in providers. The client trusts the test's certificate authority through
//! `SSL_CERT_FILE`; `HOME` is a temporary directory, so no user configuration or implied
//! mirror directory interferes.

use cairn::addr::provider_source::SourceAddr;
use cairn::provider::install::{platform::Platform, LockFile};
use cairn_test_registry::{
    mirror_routes, provider_zip, registry_routes, Published, Server, Signer, Tls,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A sandbox: a home directory, an optional CLI configuration and trusted CA file.
struct Sandbox {
    home: tempfile::TempDir,
    rc: Option<PathBuf>,
    ca: Option<PathBuf>,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox {
            home: tempfile::tempdir().unwrap(),
            rc: None,
            ca: None,
        }
    }

    fn rc(&mut self, text: &str) {
        let p = self.home.path().join("cairn.rc");
        std::fs::write(&p, text).unwrap();
        self.rc = Some(p);
    }

    fn trust(&mut self, tls: &Tls) {
        let p = self.home.path().join("ca.pem");
        std::fs::write(&p, &tls.ca_pem).unwrap();
        self.ca = Some(p);
    }

    fn cairn(&self, dir: &Path, args: &[&str]) -> (i32, String, String) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .current_dir(dir)
            .env("NO_COLOR", "1")
            .env("HOME", self.home.path())
            .env("XDG_DATA_DIRS", self.home.path().join("xdg"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for v in [
            "CAIRN_STATE_DIR",
            "CAIRN_LOG",
            "CAIRN_CLI_CONFIG_FILE",
            "TF_CLI_CONFIG_FILE",
            "TF_PLUGIN_CACHE_DIR",
            "TF_DATA_DIR",
            "XDG_DATA_HOME",
            "SSL_CERT_FILE",
        ] {
            c.env_remove(v);
        }
        if let Some(rc) = &self.rc {
            c.env("CAIRN_CLI_CONFIG_FILE", rc);
        }
        if let Some(ca) = &self.ca {
            c.env("SSL_CERT_FILE", ca);
        }
        let out = c.output().expect("cairn runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn platform() -> String {
    Platform::current().to_string()
}

/// A provider package whose executable is a small shell script.
fn package(type_: &str, version: &str) -> Vec<u8> {
    let script = format!("#!/bin/sh\necho {type_} {version}\n");
    provider_zip(&[(
        &format!("terraform-provider-{type_}_v{version}"),
        script.as_bytes(),
    )])
}

fn published(ns: &str, type_: &str, version: &str, platform: &str) -> Published {
    // The executable keeps the version's name; its content differs per platform, as real
    // builds do.
    let script = format!("#!/bin/sh\necho {type_} {version} {platform}\n");
    Published {
        namespace: ns.into(),
        type_: type_.into(),
        version: version.into(),
        platform: platform.into(),
        zip: provider_zip(&[(
            &format!("terraform-provider-{type_}_v{version}"),
            script.as_bytes(),
        )]),
        protocols: vec!["5.0".into()],
    }
}

fn config(dir: &Path, source: &str, version: &str) {
    std::fs::write(
        dir.join("main.tf"),
        format!(
            "terraform {{\n  required_providers {{\n    thing = {{\n      source  = \"{source}\"\n      version = \"{version}\"\n    }}\n  }}\n}}\n\nprovider \"thing\" {{}}\n"
        ),
    )
    .unwrap();
}

fn lock(dir: &Path) -> LockFile {
    LockFile::read(dir).unwrap()
}

fn installed_exe(dir: &Path, source: &str, version: &str, type_: &str) -> PathBuf {
    let a = SourceAddr::parse(source).unwrap();
    dir.join(".terraform/providers")
        .join(a.rel_path())
        .join(version)
        .join(platform())
        .join(format!("terraform-provider-{type_}_v{version}"))
}

#[test]
fn init_installs_from_a_filesystem_mirror_and_locks_like_terraform() {
    let mut sb = Sandbox::new();
    let mirror = sb.home.path().join("mirror");
    // Packed 1.0.0 and 1.5.0, unpacked 1.2.0, and 2.0.0 beyond the constraint.
    let t = mirror.join("example.com/ns/thing");
    std::fs::create_dir_all(&t).unwrap();
    for v in ["1.0.0", "1.5.0", "2.0.0"] {
        std::fs::write(
            t.join(format!("terraform-provider-thing_{v}_{}.zip", platform())),
            package("thing", v),
        )
        .unwrap();
    }
    let unpacked = t.join("1.2.0").join(platform());
    std::fs::create_dir_all(&unpacked).unwrap();
    std::fs::write(
        unpacked.join("terraform-provider-thing_v1.2.0"),
        b"#!/bin/sh\n",
    )
    .unwrap();
    sb.rc(&format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
        mirror.display()
    ));
    let proj = tempfile::tempdir().unwrap();
    config(proj.path(), "example.com/ns/thing", ">= 1.0, < 2");
    let (code, out, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "  - example.com/ns/thing 1.5.0: plugin from the filesystem mirror {}, in .terraform/providers/example.com/ns/thing/1.5.0/{}",
            mirror.display(),
            platform()
        )),
        "{out}"
    );
    assert!(
        out.contains("- Lock file: created .terraform.lock.hcl."),
        "{out}"
    );
    assert!(
        out.contains("provider[\"thing\"]: the provider block at main.tf:10:1; used by 0 resource blocks; runs the plugin example.com/ns/thing 1.5.0"),
        "{out}"
    );
    let exe = installed_exe(proj.path(), "example.com/ns/thing", "1.5.0", "thing");
    assert!(exe.is_file(), "{}", exe.display());
    // The lock file, byte for byte as Terraform writes it (checked against `terraform init`
    // on the same mirror: the h1: hash of this very package).
    let text = std::fs::read_to_string(proj.path().join(".terraform.lock.hcl")).unwrap();
    let h1 = cairn::provider::install::hash::h1_dir(exe.parent().unwrap()).unwrap();
    assert_eq!(
        text,
        format!(
            "# This file is maintained automatically by \"terraform init\".\n\
             # Manual edits may be lost in future updates.\n\n\
             provider \"example.com/ns/thing\" {{\n  version     = \"1.5.0\"\n  \
             constraints = \">= 1.0.0, < 2.0.0\"\n  hashes = [\n    \"{h1}\",\n  ]\n}}\n"
        )
    );
    // Idempotent: kept, no change.
    let (code, out, _) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("1.5.0: plugin from already installed"),
        "{out}"
    );
    assert!(out.contains(".terraform.lock.hcl unchanged"), "{out}");

    // The installed binary is changed: `locate` (what plan and apply use) refuses it, and
    // `init` puts the locked package back.
    std::fs::write(&exe, b"#!/bin/sh\necho changed\n").unwrap();
    let cli = cairn::provider::install::CliConfig::default();
    let addr = SourceAddr::parse("example.com/ns/thing").unwrap();
    let e = cairn::provider::install::locate(proj.path(), &addr, &cli).unwrap_err();
    assert_eq!(e.summary, "Provider package does not match the lock file");
    let (code, out, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1.5.0: plugin from the filesystem mirror"),
        "{out}"
    );
    assert!(cairn::provider::install::locate(proj.path(), &addr, &cli)
        .unwrap()
        .is_some());

    // The mirror's package changes under the lock: refused.
    std::fs::write(
        t.join(format!("terraform-provider-thing_1.5.0_{}.zip", platform())),
        package("thing", "1.5.0-evil"),
    )
    .unwrap();
    std::fs::remove_dir_all(proj.path().join(".terraform")).unwrap();
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Failed to install provider example.com/ns/thing"),
        "{err}"
    );
    assert!(
        err.contains("not among the checksums .terraform.lock.hcl records"),
        "{err}"
    );

    // A constraint the locked version no longer meets.
    config(proj.path(), "example.com/ns/thing", "~> 1.2.0");
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(err.contains("selects version 1.5.0"), "{err}");
    assert!(err.contains("cairn init -upgrade"), "{err}");
    let (code, out, err) = sb.cairn(proj.path(), &["init", "-upgrade"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("example.com/ns/thing 1.2.0: plugin from the filesystem mirror"),
        "{out}"
    );
    let l = lock(proj.path());
    assert_eq!(l.providers[&addr].version.to_string(), "1.2.0");
    assert_eq!(l.providers[&addr].constraints.as_deref(), Some("~> 1.2.0"));
}

#[test]
fn init_installs_from_a_registry_over_https_with_signed_checksums() {
    let tls = Tls::new();
    let server = Server::start(&tls);
    let signer = Signer::new();
    let other = "darwin_arm64".to_string();
    let mut pkgs = vec![
        published("testns", "thing", "1.0.0", &platform()),
        published("testns", "thing", "1.1.0", &platform()),
        published("testns", "thing", "1.1.0", &other),
        published("testns", "thing", "2.0.0", &platform()),
    ];
    server.set_routes(registry_routes(&server.base(), &pkgs, &signer, false));
    let mut sb = Sandbox::new();
    sb.trust(&tls);
    let cache = sb.home.path().join("plugin-cache");
    sb.rc(&format!("plugin_cache_dir = \"{}\"\n", cache.display()));
    let source = format!("{}/testns/thing", server.host());
    let proj = tempfile::tempdir().unwrap();
    config(proj.path(), &source, "~> 1.0");
    let (code, out, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "{source} 1.1.0: plugin from the registry {} (signed by key ",
            server.host()
        )),
        "{out}"
    );
    let exe = installed_exe(proj.path(), &source, "1.1.0", "thing");
    assert!(exe.is_file(), "{}", exe.display());
    assert!(std::fs::symlink_metadata(exe.parent().unwrap())
        .unwrap()
        .file_type()
        .is_symlink());
    let addr = SourceAddr::parse(&source).unwrap();
    let l = lock(proj.path());
    let locked = &l.providers[&addr];
    assert_eq!(locked.version.to_string(), "1.1.0");
    assert_eq!(locked.constraints.as_deref(), Some("~> 1.0"));
    // One h1: (this platform) and one zh: per platform SHA256SUMS lists.
    assert_eq!(
        locked
            .hashes
            .iter()
            .filter(|h| h.starts_with("h1:"))
            .count(),
        1
    );
    assert_eq!(
        locked
            .hashes
            .iter()
            .filter(|h| h.starts_with("zh:"))
            .count(),
        2,
        "{:?}",
        locked.hashes
    );
    let requests = server.take_requests();
    assert!(requests.contains(&"/.well-known/terraform.json".to_string()));
    assert!(requests.contains(&"/v1/providers/testns/thing/versions".to_string()));

    // Again: nothing to fetch, no request at all.
    let (code, out, _) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("1.1.0: plugin from already installed"),
        "{out}"
    );
    assert_eq!(server.take_requests(), Vec::<String>::new());

    // A fresh checkout with the lock file: linked from the plugin cache, no request.
    std::fs::remove_dir_all(proj.path().join(".terraform")).unwrap();
    let (code, out, _) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0);
    assert!(out.contains("1.1.0: plugin from the plugin cache"), "{out}");
    assert_eq!(server.take_requests(), Vec::<String>::new());

    // A newer release: the lock keeps 1.1.0 until -upgrade.
    pkgs.push(published("testns", "thing", "1.2.0", &platform()));
    server.set_routes(registry_routes(&server.base(), &pkgs, &signer, false));
    let (code, out, _) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0);
    assert!(out.contains("1.1.0"), "{out}");
    let (code, out, err) = sb.cairn(proj.path(), &["init", "-upgrade"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("{source} 1.2.0: plugin from the registry")),
        "{out}"
    );
    assert!(
        out.contains("- Lock file: updated .terraform.lock.hcl."),
        "{out}"
    );
}

#[test]
fn init_refuses_bad_signatures_and_tampered_packages() {
    let tls = Tls::new();
    let server = Server::start(&tls);
    let signer = Signer::new();
    let pkgs = vec![published("testns", "thing", "1.0.0", &platform())];
    let mut sb = Sandbox::new();
    sb.trust(&tls);
    let source = format!("{}/testns/thing", server.host());

    // The archive differs from the signed checksum.
    server.set_routes(registry_routes(&server.base(), &pkgs, &signer, true));
    let proj = tempfile::tempdir().unwrap();
    config(proj.path(), &source, "1.0.0");
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(err.contains("not the signed"), "{err}");
    assert!(!proj.path().join(".terraform.lock.hcl").exists());

    // SHA256SUMS signed by a key the registry does not list.
    let mut routes = registry_routes(&server.base(), &pkgs, &signer, false);
    let intruder = Signer::new();
    let sums_key = routes
        .keys()
        .find(|k| k.ends_with("_SHA256SUMS"))
        .unwrap()
        .clone();
    let sums = routes[&sums_key].clone();
    routes.insert(format!("{sums_key}.sig"), intruder.sign(&sums));
    server.set_routes(routes);
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(err.contains("signature is not valid"), "{err}");

    // Without trusting the test CA, HTTPS fails.
    server.set_routes(registry_routes(&server.base(), &pkgs, &signer, false));
    sb.ca = None;
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(err.contains("Failed to install provider"), "{err}");
    sb.trust(&tls);
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn init_installs_from_a_network_mirror() {
    let tls = Tls::new();
    let server = Server::start(&tls);
    let pkgs = vec![
        published("hashicorp", "thing", "3.0.0", &platform()),
        published("hashicorp", "thing", "3.1.0", &platform()),
    ];
    let mut hashes = BTreeMap::new();
    let d = tempfile::tempdir().unwrap();
    for p in &pkgs {
        let z = d.path().join("z.zip");
        std::fs::write(&z, &p.zip).unwrap();
        let file = format!("terraform-provider-thing_{}_{}.zip", p.version, p.platform);
        hashes.insert(
            file,
            vec![cairn::provider::install::hash::h1_zip(&z).unwrap()],
        );
    }
    server.set_routes(mirror_routes("registry.terraform.io", &pkgs, &hashes));
    let mut sb = Sandbox::new();
    sb.trust(&tls);
    sb.rc(&format!(
        "provider_installation {{\n  network_mirror {{\n    url = \"{}/mirror/\"\n    include = [\"hashicorp/*\"]\n  }}\n}}\n",
        server.base()
    ));
    let proj = tempfile::tempdir().unwrap();
    config(proj.path(), "hashicorp/thing", "< 3.1");
    let (code, out, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "hashicorp/thing 3.0.0: plugin from the network mirror {}/mirror/",
            server.base()
        )),
        "{out}"
    );
    assert!(installed_exe(proj.path(), "hashicorp/thing", "3.0.0", "thing").is_file());

    // A provider the mirror's include does not cover has no source.
    config(proj.path(), "example.com/other/thing", "< 3.1");
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no installation method of the CLI configuration serves it"),
        "{err}"
    );
}

#[test]
fn dev_overrides_and_built_in_providers() {
    let mut sb = Sandbox::new();
    let plugins = sb.home.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let exe = plugins.join("terraform-provider-thing");
    std::fs::write(&exe, b"#!/bin/sh\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Terraform's own CLI configuration syntax (HCL 1: quoted names in dev_overrides).
    sb.rc(&format!(
        "disable_checkpoint = true\nprovider_installation {{\n  dev_overrides {{\n    \"example.com/ns/thing\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
        plugins.display()
    ));
    let proj = tempfile::tempdir().unwrap();
    std::fs::write(
        proj.path().join("main.tf"),
        "terraform {\n  required_providers {\n    thing = {\n      source = \"example.com/ns/thing\"\n    }\n  }\n}\n\nprovider \"thing\" {}\n\nresource \"null_resource\" \"n\" {}\n",
    )
    .unwrap();
    let (code, out, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "  - example.com/ns/thing: plugin from dev_overrides ({}), not locked",
            plugins.display()
        )),
        "{out}"
    );
    // The built-in null answers: the registry is not asked for a built-in type.
    assert!(
        out.contains("  - hashicorp/null: built in (no plugin installed)"),
        "{out}"
    );
    assert!(out.contains("runs the built-in null"), "{out}");
    assert!(
        out.contains("runs the plugin example.com/ns/thing (dev override)"),
        "{out}"
    );
    assert!(
        out.contains("Warning: provider development overrides are in effect"),
        "{out}"
    );
    assert!(!proj.path().join(".terraform.lock.hcl").exists());
    let cli = cairn::provider::install::CliConfig::from_env(
        &[(
            "CAIRN_CLI_CONFIG_FILE".to_string(),
            sb.rc.as_ref().unwrap().display().to_string(),
        )]
        .into(),
        proj.path(),
    )
    .unwrap();
    let l = cairn::provider::install::locate(
        proj.path(),
        &SourceAddr::parse("example.com/ns/thing").unwrap(),
        &cli,
    )
    .unwrap()
    .unwrap();
    assert_eq!(l.path, exe);

    // A plugin for a built-in type found in an implied local mirror directory wins over
    // the built-in.
    let implied = sb
        .home
        .path()
        .join(".terraform.d/plugins/registry.terraform.io/hashicorp/null");
    std::fs::create_dir_all(&implied).unwrap();
    std::fs::write(
        implied.join(format!("terraform-provider-null_3.2.0_{}.zip", platform())),
        package("null", "3.2.0"),
    )
    .unwrap();
    sb.rc = None;
    std::fs::write(
        proj.path().join("main.tf"),
        "resource \"null_resource\" \"n\" {}\n",
    )
    .unwrap();
    let (code, out, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "  - hashicorp/null 3.2.0: plugin from the filesystem mirror {}",
            sb.home.path().join(".terraform.d/plugins").display()
        )),
        "{out}"
    );
    assert!(
        out.contains("runs the plugin hashicorp/null 3.2.0"),
        "{out}"
    );
}

#[test]
fn init_refuses_providers_it_cannot_install() {
    let mut sb = Sandbox::new();
    let empty = sb.home.path().join("empty-mirror");
    std::fs::create_dir_all(&empty).unwrap();
    sb.rc(&format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
        empty.display()
    ));
    let proj = tempfile::tempdir().unwrap();
    std::fs::write(
        proj.path().join("main.tf"),
        "resource \"aws_instance\" \"x\" {}\n",
    )
    .unwrap();
    let (code, _, err) = sb.cairn(proj.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Failed to install provider hashicorp/aws"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "No installation source has hashicorp/aws for {}.",
            platform()
        )),
        "{err}"
    );
    assert!(!err.contains("Unknown provider"), "{err}");
    assert!(!proj.path().join(".cairn").exists());
}

/// A git server on 127.0.0.1 (`git daemon`, the git protocol) serving the bare repositories
/// of a directory, until dropped.
struct GitServer {
    port: u16,
    child: std::process::Child,
}

impl GitServer {
    fn start(base: &Path) -> GitServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("git")
            .arg("daemon")
            .arg("--reuseaddr")
            .arg("--export-all")
            .arg(format!("--base-path={}", base.display()))
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon starts");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "git daemon did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        GitServer { port, child }
    }

    fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bare repository `base/NAME.git` with one commit per (tag, files).
fn repo(base: &Path, name: &str, versions: &[(&str, &[(&str, &str)])]) {
    let work = base.join(format!("{name}-work"));
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    for (tag, files) in versions {
        for (path, text) in *files {
            let p = work.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", tag]);
        git(&work, &["tag", tag]);
    }
    git(
        base,
        &[
            "clone",
            "-q",
            "--bare",
            &format!("{name}-work"),
            &format!("{name}.git"),
        ],
    );
}

fn tar_gz(files: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut t = tar::Builder::new(gz);
    for (path, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, path, text.as_bytes()).unwrap();
    }
    t.into_inner().unwrap().finish().unwrap()
}

/// `cairn init` installs modules as `terraform init` does: a registry module (module registry
/// protocol over HTTPS on 127.0.0.1, the newest version the constraint allows, its location
/// in `X-Terraform-Get`) that lives in a git repository served on 127.0.0.1, a git source
/// with `?ref=`, zip and tar.gz archives with a `//subdirectory`, and a remote module called
/// by a downloaded one; `.terraform/modules/modules.json` in Terraform's format; a changed
/// version constraint is refused by plan until `init` installs the new version.
#[test]
fn init_installs_modules_from_a_registry_git_and_archives() {
    let repos = tempfile::tempdir().unwrap();
    let out_tf = |v: &str| format!("output \"version\" {{\n  value = \"{v}\"\n}}\n");
    let git_server = {
        let base = repos.path();
        repo(
            base,
            "inner",
            &[("v1", &[("main.tf", &out_tf("inner-v1"))])],
        );
        GitServer::start(base)
    };
    let inner = git_server.url("inner.git");
    let net_main = |v: &str| {
        format!(
            "{}module \"inner\" {{\n  source = \"git::{inner}?ref=v1\"\n}}\n\
             module \"sub\" {{\n  source = \"./modules/sub\"\n}}\n\
             output \"inner\" {{\n  value = module.inner.version\n}}\n\
             output \"sub\" {{\n  value = module.sub.version\n}}\n",
            out_tf(v)
        )
    };
    let (n100, n110) = (net_main("1.0.0"), net_main("1.1.0"));
    let sub = out_tf("sub");
    repo(
        repos.path(),
        "net",
        &[
            (
                "v1.0.0",
                &[("main.tf", &n100), ("modules/sub/main.tf", &sub)],
            ),
            ("v1.1.0", &[("main.tf", &n110)]),
        ],
    );
    // The daemon serves what is in its directory when asked: `net.git` is there now.
    let net = git_server.url("net.git");

    let tls = Tls::new();
    let server = Server::start(&tls);
    let host = server.host();
    let mut routes = BTreeMap::new();
    routes.insert(
        "/.well-known/terraform.json".to_string(),
        br#"{"modules.v1":"/v1/modules/"}"#.to_vec(),
    );
    routes.insert(
        "/v1/modules/acme/net/aws/versions".to_string(),
        br#"{"modules":[{"versions":[{"version":"1.0.0"},{"version":"1.1.0"},{"version":"2.0.0"}]}]}"#.to_vec(),
    );
    for v in ["1.0.0", "1.1.0"] {
        routes.insert(
            format!("/v1/modules/acme/net/aws/{v}/download"),
            format!("{}git::{net}?ref=v{v}", cairn_test_registry::GET_HEADER).into_bytes(),
        );
    }
    routes.insert(
        "/archives/tools.zip".to_string(),
        provider_zip(&[("main.tf", out_tf("zip").as_bytes())]),
    );
    routes.insert(
        "/archives/tools.tar.gz".to_string(),
        tar_gz(&[
            ("sub/main.tf", &out_tf("tgz-sub")),
            ("README", "not a module"),
        ]),
    );
    server.set_routes(routes);

    let mut sb = Sandbox::new();
    sb.trust(&tls);
    let dir = tempfile::tempdir().unwrap();
    let root = |constraint: &str| {
        format!(
            "module \"net\" {{\n  source  = \"{host}/acme/net/aws\"\n  version = \"{constraint}\"\n}}\n\
             module \"tools\" {{\n  source = \"https://{host}/archives/tools.zip\"\n}}\n\
             module \"tgz\" {{\n  source = \"https://{host}/archives/tools.tar.gz//sub\"\n}}\n\
             module \"direct\" {{\n  source = \"git::{net}?ref=v1.0.0\"\n}}\n\
             output \"all\" {{\n  value = [module.net.version, module.net.inner, module.net.sub, module.tools.version, module.tgz.version, module.direct.version]\n}}\n"
        )
    };
    std::fs::write(dir.path().join("main.tf"), root("~> 1.0")).unwrap();
    // Before init: plan says what to do.
    let (code, _, err) = sb.cairn(dir.path(), &["plan"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Module not installed") && err.contains("cairn init"),
        "{err}"
    );

    let (code, out, err) = sb.cairn(dir.path(), &["init"]);
    assert_eq!(code, 0, "{out}\n{err}");
    for line in [
        format!("Downloading {host}/acme/net/aws 1.1.0 for net..."),
        "- net in .terraform/modules/net".to_string(),
        format!("Downloading git::{inner}?ref=v1 for net.inner..."),
        "- net.inner in .terraform/modules/net.inner".to_string(),
        format!("Downloading https://{host}/archives/tools.tar.gz//sub for tgz..."),
        "- tgz in .terraform/modules/tgz/sub".to_string(),
        "- tools in .terraform/modules/tools".to_string(),
        "- direct in .terraform/modules/direct".to_string(),
    ] {
        assert!(out.contains(&line), "no {line:?} in\n{out}");
    }
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".terraform/modules/modules.json")).unwrap(),
    )
    .unwrap();
    let net_entry = manifest["Modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Key"] == "net")
        .unwrap()
        .clone();
    assert_eq!(
        net_entry,
        serde_json::json!({"Key": "net", "Source": format!("{host}/acme/net/aws"), "Version": "1.1.0", "Dir": ".terraform/modules/net"})
    );
    assert_eq!(
        manifest["Modules"][0],
        serde_json::json!({"Key": "", "Source": "", "Dir": "."})
    );

    // `modules -json`: each call with its source as Terraform prints it and the registry
    // module's installed version.
    let (code, out, err) = sb.cairn(dir.path(), &["modules", "-json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = |key: &str, source: String, version: &str| serde_json::json!({"key": key, "source": source, "version": version});
    assert_eq!(
        doc,
        serde_json::json!({"format_version": "1.0", "modules": [
            m("direct", format!("git::{net}?ref=v1.0.0"), ""),
            m("inner", format!("git::{inner}?ref=v1"), ""),
            m("sub", "./modules/sub".into(), ""),
            m("net", format!("{host}/acme/net/aws"), "1.1.0"),
            m("inner", format!("git::{inner}?ref=v1"), ""),
            m("sub", "./modules/sub".into(), ""),
            m("tgz", format!("https://{host}/archives/tools.tar.gz//sub"), ""),
            m("tools", format!("https://{host}/archives/tools.zip"), ""),
        ]})
    );
    // `get`: modules only, every call where it is, remote and local ones.
    let (code, out, err) = sb.cairn(dir.path(), &["get"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "- direct in .terraform/modules/direct\n\
         - direct.inner in .terraform/modules/direct.inner\n\
         - direct.sub in .terraform/modules/direct/modules/sub\n- net in .terraform/modules/net\n\
         - net.inner in .terraform/modules/net.inner\n\
         - net.sub in .terraform/modules/net/modules/sub\n- tgz in .terraform/modules/tgz/sub\n\
         - tools in .terraform/modules/tools\n"
    );

    let (code, out, err) = sb.cairn(dir.path(), &["apply", "-auto-approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    for v in [
        "\"1.1.0\"",
        "\"inner-v1\"",
        "\"sub\"",
        "\"zip\"",
        "\"tgz-sub\"",
        "\"1.0.0\"",
    ] {
        assert!(out.contains(v), "no {v} in\n{out}");
    }

    // A second init downloads nothing.
    let (code, out, _) = sb.cairn(dir.path(), &["init"]);
    assert_eq!(code, 0);
    assert!(!out.contains("Downloading"), "{out}");

    // A new constraint: plan refuses the installed version until init installs another.
    std::fs::write(dir.path().join("main.tf"), root("1.0.0")).unwrap();
    let (code, _, err) = sb.cairn(dir.path(), &["plan"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Module version requirements have changed"),
        "{err}"
    );
    let (code, out, err) = sb.cairn(dir.path(), &["init"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("Downloading {host}/acme/net/aws 1.0.0 for net...")),
        "{out}"
    );
    let (code, out, _) = sb.cairn(dir.path(), &["plan"]);
    assert_eq!(code, 0);
    assert!(out.contains("\"1.0.0\""), "{out}");

    // A constraint nothing satisfies, and a source Cairn does not download.
    std::fs::write(dir.path().join("main.tf"), root("~> 3.0")).unwrap();
    let (code, _, err) = sb.cairn(dir.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no available version") && err.contains("1.0.0, 1.1.0, 2.0.0"),
        "{err}"
    );
    std::fs::write(
        dir.path().join("main.tf"),
        "module \"b\" {\n  source = \"s3::https://s3.amazonaws.com/b/m.zip\"\n}\n",
    )
    .unwrap();
    let (code, _, err) = sb.cairn(dir.path(), &["init"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Cairn does not download s3 module sources"),
        "{err}"
    );

    // Early evaluation (OpenTofu 1.8): the registry source from a local, the version from a
    // variable, at init and at every later command.
    std::fs::write(
        dir.path().join("main.tf"),
        format!(
            "variable \"net_version\" {{\n  type    = string\n  default = \"1.0.0\"\n}}\n\
             locals {{\n  registry = \"{host}\"\n}}\n\
             module \"net\" {{\n  source  = \"${{local.registry}}/acme/net/aws\"\n  version = var.net_version\n}}\n\
             output \"net\" {{\n  value = module.net.version\n}}\n"
        ),
    )
    .unwrap();
    let (code, out, err) = sb.cairn(dir.path(), &["init", "-var", "net_version=1.1.0"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("Downloading {host}/acme/net/aws 1.1.0 for net...")),
        "{out}"
    );
    let (code, _, err) = sb.cairn(dir.path(), &["plan"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Module version requirements have changed"),
        "{err}"
    );
    let (code, out, err) = sb.cairn(dir.path(), &["plan", "-var", "net_version=1.1.0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"1.1.0\""), "{out}");
}
