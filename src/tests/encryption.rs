//! State and plan encryption (OpenTofu's `encryption` block), end to end on the real `cairn`
//! binary: no secret byte reaches any file, table or object a store writes (sled, PostgreSQL
//! and S3 against real servers the tests start), keys rotate with a fallback while all
//! history stays readable, an unencrypted history migrates into an encrypted store, and a
//! wrong or missing key is an error naming what could not be decrypted and which key.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "../../state/tests/support/s3server.rs"]
mod s3server;

#[path = "../../state/tests/support/pgserver.rs"]
mod pgserver;

const PASS_OLD: &str = "old passphrase: correct horse";
const PASS_NEW: &str = "new passphrase: battery staple";

struct Copy {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Copy {
    fn new(env: &[(&str, String)]) -> Copy {
        Copy {
            dir: tempfile::tempdir().unwrap(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }

    fn write(&self, tf: &str) {
        std::fs::write(self.dir.path().join("main.tf"), tf).unwrap();
    }

    fn run_with(&self, args: &[&str], extra: &[(&str, &str)]) -> (i32, String, String) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("CAIRN_STATE_DIR")
            .env_remove("TF_WORKSPACE")
            .env_remove("TF_ENCRYPTION")
            .stdin(Stdio::null());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        for (k, v) in extra {
            c.env(k, v);
        }
        let out = c.output().expect("cairn runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok_with(&self, args: &[&str], extra: &[(&str, &str)]) -> String {
        let (code, out, err) = self.run_with(args, extra);
        assert_eq!(code, 0, "cairn {args:?}:\n{out}\n{err}");
        out
    }

    fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, &[])
    }
}

/// An encryption block: `primary` and `fallbacks` name key providers `old`/`new` (pbkdf2,
/// passphrases from variables) or `plain` (the unencrypted method).
fn encryption(primary: &str, fallbacks: &[&str], enforced: bool) -> String {
    let method = |m: &str| match m {
        "plain" => "method.unencrypted.plain".to_string(),
        k => format!("method.aes_gcm.{k}"),
    };
    let mut s = String::from(
        "variable \"pass_old\" {\n  type    = string\n  default = null\n}\n\
         variable \"pass_new\" {\n  type    = string\n  default = null\n}\n\
         locals {\n  new_passphrase = var.pass_new\n}\n\
         terraform {\n  encryption {\n",
    );
    for (k, m) in [("old", "var.pass_old"), ("new", "local.new_passphrase")] {
        if primary == k || fallbacks.contains(&k) {
            s.push_str(&format!(
                "    key_provider \"pbkdf2\" \"{k}\" {{\n      passphrase = {m}\n    }}\n    \
                 method \"aes_gcm\" \"{k}\" {{\n      keys = key_provider.pbkdf2.{k}\n    }}\n"
            ));
        }
    }
    s.push_str("    method \"unencrypted\" \"plain\" {}\n");
    s.push_str(&format!(
        "    state {{\n      method   = {}\n      enforced = {enforced}\n",
        method(primary)
    ));
    for f in fallbacks {
        s.push_str(&format!(
            "      fallback {{\n        method = {}\n      }}\n",
            method(f)
        ));
    }
    s.push_str(&format!(
        "    }}\n    plan {{\n      method = {}\n    }}\n  }}\n}}\n",
        method(primary)
    ));
    s
}

/// Resources holding the secrets `SECRET-<tag>-<i>`.
fn secrets(tag: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "resource \"terraform_data\" \"{tag}{i}\" {{\n  input = \"SECRET-{tag}-{i}\"\n}}\n"
            )
        })
        .collect()
}

fn passes() -> Vec<(&'static str, String)> {
    vec![
        ("TF_VAR_pass_old", PASS_OLD.to_string()),
        ("TF_VAR_pass_new", PASS_NEW.to_string()),
    ]
}

/// Every file under `dir` whose bytes contain `needle`.
/// Whether `bytes` hold `needle`, as written or inside any zstd frame in them: the stores
/// compress checkpoints, large records and sled's commit batches, and a secret written in the
/// clear inside one would not show as raw bytes.
fn holds(bytes: &[u8], needle: &str) -> bool {
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let found = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle.as_bytes());
    if found(bytes) {
        return true;
    }
    let mut from = 0;
    while let Some(at) = bytes[from..].windows(4).position(|w| w == ZSTD_MAGIC) {
        let start = from + at;
        let mut out = Vec::new();
        if let Ok(d) = zstd::stream::read::Decoder::with_buffer(&bytes[start..]) {
            // A truncated or false frame still gives what it decoded so far.
            let _ = std::io::Read::read_to_end(&mut d.single_frame(), &mut out);
            if found(&out) {
                return true;
            }
        }
        from = start + 4;
    }
    false
}

fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if holds(&std::fs::read(&p).unwrap_or_default(), needle) {
                out.push(p);
            }
        }
    }
    out
}

fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                n += 1;
            }
        }
    }
    n
}

/// sled: after applies and a saved plan, no file of the state directory
/// nor the plan holds a secret; the state reads back; `state pull` is sealed unless
/// `-decrypt`; a wrong or missing key names the record and the key.
#[test]
fn no_secret_reaches_the_sled_store_or_a_saved_plan() {
    let c = Copy::new(&passes());
    c.write(&format!(
        "{}{}",
        encryption("new", &[], true),
        secrets("s", 5)
    ));
    c.ok(&["init"]);
    c.ok(&["apply", "-auto-approve"]);
    c.write(&format!(
        "{}{}",
        encryption("new", &[], true),
        secrets("s", 7)
    ));
    c.ok(&["plan", "-out=p.plan"]);
    // The plan's record in the history is sealed with the state's key (no address in the
    // clear) and read back by `history`.
    let records: Vec<_> = std::fs::read_dir(c.dir.path().join(".cairn/plans"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let bytes = std::fs::read(records[0].path()).unwrap();
    assert!(
        !String::from_utf8_lossy(&bytes).contains("terraform_data.s"),
        "the plan record is not sealed"
    );
    let history = c.ok(&["history"]);
    assert!(history.contains("plan -out=p.plan"), "{history}");
    c.ok(&["apply", "-auto-approve"]);
    let state_dir = c.dir.path().join(".cairn");
    assert!(count_files(&state_dir) >= 2);
    assert!(c.dir.path().join("p.plan").exists());
    for i in 0..7 {
        let leaks = files_containing(c.dir.path(), &format!("SECRET-s-{i}"));
        let leaks: Vec<_> = leaks
            .into_iter()
            .filter(|p| !p.ends_with("main.tf"))
            .collect();
        assert!(leaks.is_empty(), "SECRET-s-{i} in {leaks:?}");
    }
    let shown = c.ok(&["state", "show", "terraform_data.s3"]);
    assert!(shown.contains("SECRET-s-3"), "{shown}");
    assert!(c.ok(&["history"]).lines().count() >= 2);
    let sealed = c.ok(&["state", "pull"]);
    assert!(
        sealed.contains("encrypted_data") && !sealed.contains("SECRET-s-"),
        "{sealed}"
    );
    let plain = c.ok(&["state", "pull", "-decrypt"]);
    assert!(plain.contains("SECRET-s-6"), "{plain}");
    // A plan saved under the key is read with it.
    c.ok(&["show", "p.plan"]);

    // The wrong passphrase: the record and the key tried are named, nothing is written.
    let (code, _, err) = c.run_with(
        &["state", "list"],
        &[("TF_VAR_pass_new", "a wrong passphrase, long enough")],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("Cannot decrypt") && err.contains("key_provider.pbkdf2.new"),
        "{err}"
    );
    assert!(err.contains("wrong passphrase"), "{err}");
    let (code, _, err) = c.run_with(
        &["apply", "-auto-approve"],
        &[("TF_VAR_pass_new", "a wrong passphrase, long enough")],
    );
    assert_ne!(code, 0, "{err}");
    let (code, _, err) = c.run_with(
        &["show", "p.plan"],
        &[("TF_VAR_pass_new", "a wrong passphrase, long enough")],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("plan file") && err.contains("key_provider.pbkdf2.new"),
        "{err}"
    );
    c.ok(&["state", "list"]);

    // No encryption configured: the encrypted state is an error naming its key.
    c.write(&secrets("s", 7));
    let (code, _, err) = c.run(&["state", "list"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("is encrypted (with key_provider.pbkdf2.new)"),
        "{err}"
    );

    // A passphrase too short, and a reference that is not early: errors at the block.
    c.write(&format!(
        "{}{}",
        encryption("new", &[], true),
        secrets("s", 1)
    ));
    let (code, _, err) = c.run_with(&["state", "list"], &[("TF_VAR_pass_new", "short")]);
    assert_ne!(code, 0);
    assert!(err.contains("at least 16 characters"), "{err}");
    c.write(&format!(
        "{}{}",
        encryption("new", &[], true).replace("local.new_passphrase", "terraform_data.s0.id"),
        secrets("s", 1)
    ));
    let (code, _, err) = c.run(&["state", "list"]);
    assert_ne!(code, 0);
    assert!(err.contains("Dynamic value in static context"), "{err}");
    assert!(
        err.contains("Unable to use terraform_data.s0 in static context"),
        "{err}"
    );
}

impl Copy {
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        self.run_with(args, &[])
    }
}

/// Rotation: state written under `old`; `new` primary with `old` as fallback writes new
/// records under `new`, re-encrypts nothing it does not rewrite, and still reads all history
/// (every `-at`); without the fallback the old records are an error naming `old`.
#[test]
fn keys_rotate_with_a_fallback_and_history_stays_readable() {
    let c = Copy::new(&passes());
    c.write(&format!(
        "{}{}",
        encryption("old", &[], true),
        secrets("r", 2)
    ));
    c.ok(&["init"]);
    c.ok(&["apply", "-auto-approve"]);
    let at_old = c.ok(&["state", "list", "-at=3"]);
    c.write(&format!(
        "{}{}",
        encryption("new", &["old"], true),
        secrets("r", 4)
    ));
    c.ok(&["apply", "-auto-approve"]);
    assert_eq!(c.ok(&["state", "list", "-at=3"]), at_old);
    let listed = c.ok(&["state", "list"]);
    assert_eq!(listed.matches("terraform_data.r").count(), 4, "{listed}");
    let hist = c.ok(&["history"]);
    assert!(hist.lines().count() >= 2, "{hist}");
    for i in 0..4 {
        let leaks = files_containing(&c.dir.path().join(".cairn"), &format!("SECRET-r-{i}"));
        assert!(leaks.is_empty(), "SECRET-r-{i} in {leaks:?}");
    }
    // The old key alone cannot read what the new key wrote.
    c.write(&format!(
        "{}{}",
        encryption("old", &[], true),
        secrets("r", 4)
    ));
    let (code, _, err) = c.run(&["state", "list"]);
    assert_ne!(code, 0);
    assert!(err.contains("key_provider.pbkdf2.new"), "{err}");
    // The new key alone cannot read the history the old key wrote: named, not skipped.
    c.write(&format!(
        "{}{}",
        encryption("new", &[], true),
        secrets("r", 4)
    ));
    let (code, _, err) = c.run(&["state", "list", "-at=3"]);
    assert_ne!(code, 0);
    assert!(err.contains("key_provider.pbkdf2.old"), "{err}");
}

/// PBKDF2 runs once per key and command, started before the configuration is loaded: the
/// key provider read ahead from the root module's files (`derive_early`) is the one the
/// evaluated block asks for, so the command derives nothing itself — on a new state (the
/// first write's fresh salt) and on an existing one (the salt its `encryption-hint` names).
/// A passphrase from a local is not read ahead: that key is derived when the block is
/// evaluated, still once.
#[test]
fn the_state_key_is_derived_once_from_the_start_of_the_command() {
    let c = Copy::new(&passes());
    c.write(&format!(
        "{}{}",
        encryption("old", &[], true),
        secrets("r", 2)
    ));
    c.ok(&["init"]);
    let keys = |args: &[&str]| {
        let (code, out, err) = c.run_with(args, &[("CAIRN_LOG", "debug")]);
        assert!(code == 0 || code == 2, "cairn {args:?}:\n{out}\n{err}");
        err.lines()
            .find(|l| l.contains("state keys"))
            .map(|l| l[l.find("derived_here").unwrap_or(0)..].to_string())
            .unwrap_or_else(|| panic!("no key count in:\n{err}"))
    };
    assert_eq!(
        keys(&["apply", "-auto-approve"]),
        "derived_here=0 derived_ahead=1"
    );
    assert_eq!(
        keys(&["plan", "-detailed-exitcode"]),
        "derived_here=0 derived_ahead=1"
    );
    // Rotation: the old key (the log's salt) ahead; the new one, from a local, once.
    c.write(&format!(
        "{}{}",
        encryption("new", &["old"], true),
        secrets("r", 3)
    ));
    assert_eq!(
        keys(&["apply", "-auto-approve"]),
        "derived_here=1 derived_ahead=1"
    );
    let listed = c.ok(&["state", "list"]);
    assert_eq!(listed.matches("terraform_data.r").count(), 3, "{listed}");
}

/// Migration: an unencrypted history; encryption added with the `unencrypted` method as
/// fallback reads it and writes new records sealed; `init -migrate-state` into PostgreSQL
/// copies the whole history sealed under the key, and no row of its tables holds a secret.
#[test]
fn an_unencrypted_history_migrates_into_an_encrypted_store() {
    let pg = pgserver::shared();
    let mut env = passes();
    if let Some(pg) = pg {
        env.push(("PG_CONN_STR", pg.conn_str()));
    }
    let c = Copy::new(&env);
    c.write(&secrets("m", 2));
    c.ok(&["init"]);
    c.ok(&["apply", "-auto-approve"]);
    assert!(!files_containing(&c.dir.path().join(".cairn"), "SECRET-m-0").is_empty());
    // enforced without the fallback: the plaintext records are refused, by name.
    c.write(&format!(
        "{}{}",
        encryption("new", &[], true),
        secrets("m", 2)
    ));
    let (code, _, err) = c.run(&["state", "list"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("is not encrypted") && err.contains("unencrypted"),
        "{err}"
    );
    c.write(&format!(
        "{}{}",
        encryption("new", &["plain"], true),
        secrets("m", 3)
    ));
    c.ok(&["apply", "-auto-approve"]);
    assert!(files_containing(&c.dir.path().join(".cairn"), "SECRET-m-2").is_empty());
    let hist = c.ok(&["history"]);
    let listed = c.ok(&["state", "list"]);
    let Some(pg) = pg else {
        return;
    };
    let schema = pgserver::schema("encmig");
    let backend =
        format!("terraform {{\n  backend \"pg\" {{\n    schema_name = \"{schema}\"\n  }}\n}}\n");
    // The source is read through the unencrypted fallback; the copy is sealed whole.
    c.write(&format!(
        "{}{backend}{}",
        encryption("new", &["plain"], true),
        secrets("m", 3)
    ));
    c.ok(&["init", "-migrate-state"]);
    // Every record of the copy opens without the unencrypted fallback.
    c.write(&format!(
        "{}{backend}{}",
        encryption("new", &[], true),
        secrets("m", 3)
    ));
    assert_eq!(c.ok(&["history"]), hist);
    assert_eq!(c.ok(&["state", "list"]), listed);
    c.ok(&["state", "check"]);
    for table in [
        "cairn_events",
        "cairn_checkpoints",
        "cairn_meta",
        "cairn_lock",
    ] {
        let rows = pg
            .psql(&format!(
                "SELECT count(*) FROM \"{schema}\".{table} t WHERE t::text LIKE '%SECRET-m-%' \
                 OR t::text LIKE '%5345435245542d6d2d%'"
            ))
            .unwrap();
        assert_eq!(rows.trim(), "0", "{table}: {rows}");
    }
    let events = pg
        .psql(&format!("SELECT count(*) FROM \"{schema}\".cairn_events"))
        .unwrap();
    assert!(events.trim().parse::<u64>().unwrap() > 5, "{events}");
}

/// S3: every object Cairn writes in the bucket (event batches, checkpoints, lineage) holds
/// no secret byte; the state reads back from a second working copy with the key.
#[test]
fn no_secret_reaches_the_s3_objects() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("enc");
    server.bucket(&bucket);
    let mut env = passes();
    env.push(("AWS_ACCESS_KEY_ID", s3server::ACCESS_KEY.to_string()));
    env.push(("AWS_SECRET_ACCESS_KEY", s3server::SECRET_KEY.to_string()));
    env.push(("AWS_ENDPOINT_URL_S3", server.endpoint()));
    let backend = format!(
        "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key = \"enc/terraform.tfstate\"\n    \
         region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n    \
         skip_credentials_validation = true\n    skip_requesting_account_id = true\n  }}\n}}\n"
    );
    let tf = format!(
        "{backend}{}{}",
        encryption("new", &[], true),
        secrets("b", 4)
    );
    let c = Copy::new(&env);
    c.write(&tf);
    c.ok(&["init"]);
    c.ok(&["apply", "-auto-approve"]);
    let keys = server.keys(&bucket);
    assert!(keys.iter().any(|k| k.contains("events/")), "{keys:?}");

    for k in &keys {
        let bytes = server.object(&bucket, k).unwrap_or_default();
        assert!(!holds(&bytes, "SECRET-b-"), "a secret in s3://{bucket}/{k}");
    }
    let d = Copy::new(&env);
    d.write(&tf);
    d.ok(&["init"]);
    assert!(d
        .ok(&["state", "show", "terraform_data.b2"])
        .contains("SECRET-b-2"));
}

/// `TF_ENCRYPTION` supplies the block (its blocks replace the configuration's of the same
/// name): the state written with it is unreadable without it.
#[test]
fn tf_encryption_supplies_the_block_from_the_environment() {
    let c = Copy::new(&[]);
    c.write(&secrets("e", 2));
    let block = format!(
        "key_provider \"pbkdf2\" \"env\" {{\n  passphrase = \"{PASS_NEW}\"\n}}\n\
         method \"aes_gcm\" \"env\" {{\n  keys = key_provider.pbkdf2.env\n}}\n\
         state {{\n  method = method.aes_gcm.env\n  enforced = true\n}}\n"
    );
    let env = [("TF_ENCRYPTION", block.as_str())];
    c.ok_with(&["init"], &env);
    c.ok_with(&["apply", "-auto-approve"], &env);
    assert!(files_containing(&c.dir.path().join(".cairn"), "SECRET-e-").is_empty());
    assert!(c
        .ok_with(&["state", "list"], &env)
        .contains("terraform_data.e1"));
    let (code, _, err) = c.run(&["state", "list"]);
    assert_ne!(code, 0);
    assert!(err.contains("key_provider.pbkdf2.env"), "{err}");
}

/// The `encryption` block in a `.tf.json` file, in OpenTofu's JSON form (references as
/// `"${…}"` templates, blocks as objects): the state and a saved plan are encrypted as from a
/// `.tf` file, and reading them needs the key.
#[test]
fn an_encryption_block_in_a_json_file_encrypts_the_state_and_plans() {
    let c = Copy::new(&[]);
    let json = r#"{
  "variable": {"pass": {"type": "string", "sensitive": true}},
  "terraform": {
    "encryption": {
      "key_provider": {"pbkdf2": {"k": {"passphrase": "${var.pass}"}}},
      "method": {"aes_gcm": {"m": {"keys": "${key_provider.pbkdf2.k}"}}},
      "state": {"method": "${method.aes_gcm.m}", "enforced": true},
      "plan": {"method": "${method.aes_gcm.m}"}
    }
  },
  "resource": {"terraform_data": {"j0": {"input": "SECRET-j-0"}}}
}"#;
    std::fs::write(c.dir.path().join("main.tf.json"), json).unwrap();
    let pass = [("TF_VAR_pass", PASS_NEW)];
    c.ok_with(&["apply", "-auto-approve"], &pass);
    c.ok_with(&["plan", "-out=tf.plan"], &pass);
    assert!(files_containing(&c.dir.path().join(".cairn"), "SECRET-j-").is_empty());
    assert!(files_containing(c.dir.path(), "SECRET-j-")
        .iter()
        .all(|p| p.ends_with("main.tf.json")));
    let shown = c.ok_with(&["state", "show", "terraform_data.j0"], &pass);
    assert!(shown.contains("SECRET-j-0"), "{shown}");
    let (code, _, err) = c.run_with(&["state", "list"], &[("TF_VAR_pass", PASS_OLD)]);
    assert_ne!(code, 0, "another passphrase cannot read it\n{err}");
}
