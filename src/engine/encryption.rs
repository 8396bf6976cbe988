//! State and plan encryption from OpenTofu's `encryption` block: `terraform { encryption {
//! key_provider "pbkdf2" "k" { passphrase = var.passphrase } method "aes_gcm" "m" { keys =
//! key_provider.pbkdf2.k } state { method = method.aes_gcm.m  enforced = true  fallback {
//! method = method.aes_gcm.old } } plan { method = method.aes_gcm.m } } }`, merged with the
//! `TF_ENCRYPTION` environment variable (the same body, in HCL; its blocks replace the
//! configuration's of the same name), evaluated early: only variables (their values as given:
//! `-var`, `-var-file`, `*.tfvars`, `TF_VAR_*`, defaults) and locals may be referenced.
//!
//! The result ([`Resolved`]: the state's and the plans' [`Encryption`]) is resolved once per
//! process by the CLI, before any command opens the state ([`prepare`]), and kept here
//! ([`state`], [`plan`]): every open of the state in the engine passes it to the store, so
//! no caller can open the state without it.

use crate::config::early::{Frame, Vars};
use crate::config::{Config, EncryptionBlock, VarArg};
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::value::Value;
use crate::value::ValueMap;
use cairn_state::crypt::{Encryption, Hash, Method, Pbkdf2};
use hcl_edit::expr::{Expression, TraversalOperator};
use hcl_edit::structure::{Block, Body};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The state's and saved plans' encryption (`None`: none configured for that target).
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    pub state: Option<Arc<Encryption>>,
    pub plan: Option<Arc<Encryption>>,
}

fn current() -> &'static Mutex<Resolved> {
    static CURRENT: OnceLock<Mutex<Resolved>> = OnceLock::new();
    CURRENT.get_or_init(|| Mutex::new(Resolved::default()))
}

/// Makes `r` the process's encryption (see the module docs).
pub fn install(r: Resolved) {
    *current().lock().expect("encryption") = r;
}

/// The state's encryption, for every open of the state.
pub fn state() -> Option<Arc<Encryption>> {
    current().lock().expect("encryption").state.clone()
}

/// Saved plans' encryption.
pub fn plan() -> Option<Arc<Encryption>> {
    current().lock().expect("encryption").plan.clone()
}

/// The file in a state directory naming the salt of its log's key (see
/// [`Encryption::hint`]): no secret, a hint to derive the key ahead.
const HINT_FILE: &str = "encryption-hint";

/// Notes in `state_dir` which salt the state's key has (the state's encryption wrote or read
/// with it), for [`prepare`] next time. Nothing to note, or a directory that does not exist:
/// nothing is written.
pub fn remember(state_dir: &Path) {
    let Some(enc) = state() else {
        return;
    };
    tracing::debug!(
        derived_here = enc.derivations(),
        derived_ahead = cairn_state::crypt::keys_derived_ahead_used(),
        "state keys"
    );
    let Some(hint) = enc.hint() else {
        return;
    };
    let path = state_dir.join(HINT_FILE);
    if state_dir.is_dir() && std::fs::read_to_string(&path).ok().as_deref() != Some(&hint) {
        let _ = std::fs::write(path, hint);
    }
}

/// Resolves the encryption of the configuration in `dir` (with `TF_ENCRYPTION` from `env`)
/// and installs it; the state's key starts being derived on a thread of its own (with the
/// salt `state_dir` notes, see [`remember`]) while the command goes on to load the
/// configuration. Errors come with the source map to render them.
pub fn prepare(
    dir: &Path,
    vars: &[VarArg],
    env: &BTreeMap<String, String>,
    workspace: &str,
    state_dir: Option<&Path>,
) -> Result<(), (Diagnostics, SourceMap)> {
    let env_text = env.get("TF_ENCRYPTION").filter(|t| !t.trim().is_empty());
    if env_text.is_none() && !crate::config::root_files_mention(dir, "encryption") {
        install(Resolved::default());
        return Ok(());
    }
    // The directory as the command's own load names it (`engine_options`), so that the
    // configuration loaded here serves that load too (`config::keep_ahead`).
    let dir = match dir == Path::new(".") {
        true => std::env::current_dir().unwrap_or_else(|_| dir.to_path_buf()),
        false => dir.to_path_buf(),
    };
    let inputs = crate::config::EarlyInputs::new(vars, env, &dir, Some(workspace));
    let (config, diags) = crate::config::load_with(&dir, &inputs);
    let mut config = match config {
        Some(c) if !diags.has_errors() => c,
        Some(c) => return Err((diags, c.sources)),
        None => return Err((diags, SourceMap::new())),
    };
    let loaded_files = config.sources.file_count();
    let (values, vdiags) = crate::config::input_values_with(
        &mut config,
        vars,
        env,
        &dir,
        crate::config::Missing::Unknown,
    );
    if vdiags.has_errors() {
        return Err((vdiags, config.sources));
    }
    match resolve(
        &mut config,
        &values,
        env_text.map(String::as_str),
        workspace,
    ) {
        Ok(r) => {
            let reading = early_read().lock().expect("early read").take();
            if let Some(t) = reading {
                let _ = t.join();
            }
            if let Some(e) = &r.state {
                let hint = state_dir.and_then(|d| std::fs::read_to_string(d.join(HINT_FILE)).ok());
                e.prefetch(hint.as_deref());
            }
            install(r);
            // The variable files and TF_ENCRYPTION read here are not the configuration's.
            config.sources.truncate(loaded_files);
            crate::config::keep_ahead(&dir, &inputs, config, diags);
            Ok(())
        }
        Err(d) => Err((d, config.sources)),
    }
}

/// One block of the merged body, with the file it is written in.
struct Item<'a> {
    file: FileId,
    block: &'a Block,
}

/// Evaluates the root module's `encryption` block merged with `TF_ENCRYPTION`.
pub(crate) fn resolve(
    config: &mut Config,
    vars: &ValueMap,
    env_text: Option<&str>,
    workspace: &str,
) -> Result<Resolved, Diagnostics> {
    let mut diags = Diagnostics::new();
    let env_body: Option<(FileId, Body)> = match env_text {
        Some(t) => {
            let file = config
                .sources
                .add(PathBuf::from("TF_ENCRYPTION"), t.to_string());
            match hcl_edit::parser::parse_body(t) {
                Ok(b) => Some((file, b)),
                Err(e) => {
                    diags.push(Diagnostic::error(
                        "Invalid TF_ENCRYPTION",
                        format!(
                            "The environment variable TF_ENCRYPTION must hold the body of an \
                             encryption block in HCL: {e}"
                        ),
                    ));
                    return Err(diags);
                }
            }
        }
        None => None,
    };
    let root = &config.root;
    let block: Option<&EncryptionBlock> = root.encryption.as_ref();
    if block.is_none() && env_body.is_none() {
        return Ok(Resolved::default());
    }
    let dir = config.root_dir.clone();
    // Merge: the environment's blocks replace the configuration's of the same kind and labels.
    let mut items: Vec<Item<'_>> = Vec::new();
    let key = |b: &Block| {
        let labels: Vec<String> = b.labels.iter().map(|l| l.as_str().to_string()).collect();
        (b.ident.as_str().to_string(), labels)
    };
    if let Some(b) = block {
        for blk in b.body.blocks() {
            let k = key(blk);
            let replaced = env_body
                .as_ref()
                .is_some_and(|(_, eb)| eb.blocks().any(|e| key(e) == k));
            if !replaced {
                items.push(Item {
                    file: b.file,
                    block: blk,
                });
            }
        }
    }
    if let Some((file, eb)) = &env_body {
        for blk in eb.blocks() {
            items.push(Item {
                file: *file,
                block: blk,
            });
        }
    }
    let mut r = Resolver {
        frame: Frame {
            module: root,
            vars: Vars::Known(vars),
            root_dir: &dir,
            cwd: &dir,
            workspace,
            path_module: ".",
        },
        diags: &mut diags,
        providers: BTreeMap::new(),
        methods: BTreeMap::new(),
    };
    for it in &items {
        if it.block.ident.as_str() == "key_provider" {
            r.key_provider(it);
        }
    }
    for it in &items {
        if it.block.ident.as_str() == "method" {
            r.method(it);
        }
    }
    let mut out = Resolved::default();
    for it in &items {
        match it.block.ident.as_str() {
            "key_provider" | "method" => {}
            "state" => out.state = r.target(it, "state"),
            "plan" => out.plan = r.target(it, "plan"),
            "remote_state_data_sources" => r.diags.push(
                Diagnostic::warning(
                    "Remote state encryption ignored",
                    "Cairn reads terraform_remote_state without encryption settings of its \
                     own: an encrypted remote state is read with this configuration's state \
                     encryption keys. This block has no effect.",
                )
                .with_span(Some(span(it.file, it.block))),
            ),
            other => r.diags.push(
                Diagnostic::error(
                    "Unsupported block type",
                    format!(
                        "Blocks of type \"{other}\" are not expected in an encryption block: \
                         it takes key_provider, method, state, plan and \
                         remote_state_data_sources."
                    ),
                )
                .with_span(Some(span(it.file, it.block))),
            ),
        }
    }
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(out)
}

fn span(file: FileId, b: &Block) -> Span {
    crate::config::span_in(file, &b.ident)
}

struct Resolver<'a> {
    /// The root module, for early evaluation (`config::early`).
    frame: Frame<'a>,
    diags: &'a mut Diagnostics,
    providers: BTreeMap<String, Pbkdf2>,
    methods: BTreeMap<String, Method>,
}

impl Resolver<'_> {
    fn err(&mut self, at: Span, summary: &str, detail: String) {
        self.diags
            .push(Diagnostic::error(summary, detail).with_span(Some(at)));
    }

    /// The labels `TYPE NAME` of a `key_provider` or `method` block.
    fn labels(&mut self, it: &Item<'_>) -> Option<(String, String)> {
        match it.block.labels.as_slice() {
            [t, n] => Some((t.as_str().to_string(), n.as_str().to_string())),
            _ => {
                let kind = it.block.ident.as_str().to_string();
                self.err(
                    span(it.file, it.block),
                    "Missing labels",
                    format!("A {kind} block takes two labels: its type and its name."),
                );
                None
            }
        }
    }

    /// The attributes of a block, evaluated early; unknown names are errors.
    fn attrs(&mut self, it: &Item<'_>, allowed: &[&str]) -> BTreeMap<String, (Value, Span)> {
        let mut out = BTreeMap::new();
        for a in it.block.body.attributes() {
            let name = a.key.as_str();
            let at = crate::config::span_in(it.file, &a.value);
            if !allowed.contains(&name) {
                self.err(
                    crate::config::span_in(it.file, &a.key),
                    "Unsupported argument",
                    format!("An argument named \"{name}\" is not expected here."),
                );
                continue;
            }
            if matches!(name, "keys" | "method") {
                continue;
            }
            let what = format!("the encryption's {name}");
            match self.frame.eval(&a.value, it.file, &what) {
                Ok(v) => {
                    // A passphrase from a sensitive variable is what it is for.
                    out.insert(name.to_string(), (v.deep_unmark().0, at));
                }
                Err(d) => self.diags.extend(d),
            }
        }
        out
    }

    /// `key_provider.TYPE.NAME` or `method.TYPE.NAME` written as a reference.
    fn reference(&mut self, it: &Item<'_>, attr: &str, root: &str) -> Option<(String, Span)> {
        let a = it.block.body.get_attribute(attr)?;
        let at = crate::config::span_in(it.file, &a.value);
        // `"${method.aes_gcm.m}"` is that reference too (a template of one interpolation is
        // its value, as in HCL): the form a `.tf.json` file writes it in.
        let value = match &a.value {
            Expression::StringTemplate(t) => match t.iter().collect::<Vec<_>>().as_slice() {
                [hcl_edit::template::Element::Interpolation(i)] => &i.expr,
                _ => &a.value,
            },
            v => v,
        };
        let parts: Option<Vec<String>> = match value {
            Expression::Traversal(t) => match &t.expr {
                Expression::Variable(v) => {
                    let mut p = vec![v.as_str().to_string()];
                    for op in &t.operators {
                        match op.value() {
                            TraversalOperator::GetAttr(a) => p.push(a.as_str().to_string()),
                            _ => return self.bad_ref(at, attr, root),
                        }
                    }
                    Some(p)
                }
                _ => None,
            },
            _ => None,
        };
        match parts {
            Some(p) if p.len() == 3 && p[0] == root => Some((p.join("."), at)),
            _ => self.bad_ref(at, attr, root),
        }
    }

    fn bad_ref<T>(&mut self, at: Span, attr: &str, root: &str) -> Option<T> {
        self.err(
            at,
            "Invalid reference",
            format!("\"{attr}\" takes a reference like {root}.TYPE.NAME, without quotes."),
        );
        None
    }

    fn key_provider(&mut self, it: &Item<'_>) {
        let Some((ty, name)) = self.labels(it) else {
            return;
        };
        let at = span(it.file, it.block);
        if ty != "pbkdf2" {
            self.err(
                at,
                "Unsupported key provider",
                format!(
                    "Cairn derives keys with the \"pbkdf2\" key provider (a passphrase); \
                     \"{ty}\" would need a key management service Cairn does not call. Use \
                     key_provider \"pbkdf2\" with a passphrase from a variable."
                ),
            );
            return;
        }
        let a = self.attrs(
            it,
            &[
                "passphrase",
                "key_length",
                "iterations",
                "salt_length",
                "hash_function",
                "chain",
            ],
        );
        let address = format!("key_provider.pbkdf2.{name}");
        let Some((pass, pat)) = a.get("passphrase") else {
            self.err(
                at,
                "Missing passphrase",
                format!("{address} needs a passphrase (at least 16 characters)."),
            );
            return;
        };
        let Some(passphrase) = pass.as_str().map(str::to_string) else {
            self.err(
                *pat,
                "Invalid passphrase",
                "The passphrase must be a string.".into(),
            );
            return;
        };
        if passphrase.chars().count() < 16 {
            self.err(
                *pat,
                "Passphrase too short",
                format!("The passphrase of {address} must be at least 16 characters long."),
            );
            return;
        }
        let num = |this: &mut Self, k: &str, default: i64, min: i64, max: i64| -> Option<i64> {
            match a.get(k) {
                None => Some(default),
                Some((v, at)) => match v.as_number().and_then(|n| n.to_i64()) {
                    Some(n) if n >= min && n <= max => Some(n),
                    _ => {
                        this.err(
                            *at,
                            "Invalid value",
                            format!("{k} must be a whole number from {min} to {max}."),
                        );
                        None
                    }
                },
            }
        };
        let key_length = num(self, "key_length", 32, 1, 255);
        let iterations = num(self, "iterations", 600_000, 200_000, u32::MAX as i64);
        let salt_length = num(self, "salt_length", 32, 1, 255);
        let hash = match a.get("hash_function") {
            None => Some(Hash::Sha512),
            Some((v, at)) => match v.as_str().and_then(Hash::parse) {
                Some(h) => Some(h),
                None => {
                    self.err(
                        *at,
                        "Invalid hash_function",
                        "hash_function must be \"sha256\" or \"sha512\".".into(),
                    );
                    None
                }
            },
        };
        if let Some((_, at)) = a.get("chain") {
            self.err(
                *at,
                "Unsupported argument",
                "Cairn's pbkdf2 key provider takes its passphrase directly; \"chain\" (a \
                 passphrase from another key provider) is not available."
                    .into(),
            );
        }
        if let (Some(k), Some(i), Some(s), Some(h)) = (key_length, iterations, salt_length, hash) {
            if ![16, 24, 32].contains(&k) {
                self.err(
                    a.get("key_length").map_or(at, |x| x.1),
                    "Invalid key_length",
                    "aes_gcm takes keys of 16, 24 or 32 bytes.".into(),
                );
                return;
            }
            self.providers.insert(
                address.clone(),
                Pbkdf2 {
                    address,
                    passphrase,
                    key_length: k as usize,
                    iterations: i as u32,
                    salt_length: s as usize,
                    hash: h,
                },
            );
        }
    }

    fn method(&mut self, it: &Item<'_>) {
        let Some((ty, name)) = self.labels(it) else {
            return;
        };
        let address = format!("method.{ty}.{name}");
        let at = span(it.file, it.block);
        match ty.as_str() {
            "unencrypted" => {
                self.attrs(it, &[]);
                self.methods
                    .insert(address.clone(), Method::Unencrypted { address });
            }
            "aes_gcm" => {
                let a = self.attrs(it, &["keys", "aad"]);
                let Some((provider, pat)) = self.reference(it, "keys", "key_provider") else {
                    if it.block.body.get_attribute("keys").is_none() {
                        self.err(
                            at,
                            "Missing keys",
                            format!("{address} needs keys = key_provider.TYPE.NAME."),
                        );
                    }
                    return;
                };
                let Some(keys) = self.providers.get(&provider).cloned() else {
                    self.err(
                        pat,
                        "Unknown key provider",
                        format!("{provider} is not configured in the encryption block."),
                    );
                    return;
                };
                let aad = match a.get("aad") {
                    None => Vec::new(),
                    Some((v, at)) => {
                        let bytes: Option<Vec<u8>> = v.elements().and_then(|es| {
                            es.iter()
                                .map(|e| {
                                    e.as_number()
                                        .and_then(|n| n.to_i64())
                                        .and_then(|n| u8::try_from(n).ok())
                                })
                                .collect()
                        });
                        match bytes {
                            Some(b) => b,
                            None => {
                                self.err(
                                    *at,
                                    "Invalid aad",
                                    "aad is a list of bytes (numbers from 0 to 255).".into(),
                                );
                                return;
                            }
                        }
                    }
                };
                self.methods
                    .insert(address.clone(), Method::AesGcm { address, keys, aad });
            }
            other => self.err(
                at,
                "Unsupported encryption method",
                format!(
                    "Cairn encrypts with the methods \"aes_gcm\" and \"unencrypted\" (for \
                     migrations); \"{other}\" is not one of them."
                ),
            ),
        }
    }

    /// A `state` or `plan` block: its method, its fallbacks and `enforced`.
    fn target(&mut self, it: &Item<'_>, target: &'static str) -> Option<Arc<Encryption>> {
        let a = self.attrs(it, &["method", "enforced"]);
        let at = span(it.file, it.block);
        let enforced = match a.get("enforced") {
            None => false,
            Some((v, at)) => match v.as_bool() {
                Some(b) => b,
                None => {
                    self.err(*at, "Invalid enforced", "enforced is true or false.".into());
                    return None;
                }
            },
        };
        let primary = self.method_ref(it, at, target)?;
        let mut fallbacks = Vec::new();
        for f in it.block.body.blocks() {
            if f.ident.as_str() != "fallback" {
                self.err(
                    span(it.file, f),
                    "Unsupported block type",
                    format!("A {target} block takes only fallback blocks."),
                );
                continue;
            }
            let fi = Item {
                file: it.file,
                block: f,
            };
            self.attrs(&fi, &["method"]);
            if let Some(m) = self.method_ref(&fi, span(it.file, f), "fallback") {
                fallbacks.push(m);
            }
        }
        match Encryption::new(target, primary, fallbacks, enforced) {
            Ok(e) => Some(Arc::new(e)),
            Err(detail) => {
                self.err(at, "Unencrypted method enforced", detail);
                None
            }
        }
    }

    fn method_ref(&mut self, it: &Item<'_>, at: Span, what: &str) -> Option<Method> {
        let Some((m, mat)) = self.reference(it, "method", "method") else {
            if it.block.body.get_attribute("method").is_none() {
                self.err(
                    at,
                    "Missing method",
                    format!("The {what} block needs method = method.TYPE.NAME."),
                );
            }
            return None;
        };
        match self.methods.get(&m) {
            Some(x) => Some(x.clone()),
            None => {
                self.err(
                    mat,
                    "Unknown encryption method",
                    format!("{m} is not configured in the encryption block."),
                );
                None
            }
        }
    }
}

/// Starts deriving the state's key at the very start of the command, on a thread of its own,
/// before [`prepare`] has loaded the configuration: the thread reads just the root module's
/// `encryption` block (and `TF_ENCRYPTION`) and the variables its key providers' passphrases
/// name, and hands the key provider to [`cairn_state::crypt::derive_ahead`] with the salt
/// `state_dir` notes (see [`remember`]). Only simple forms are read ahead (a passphrase that
/// is a string or `var.NAME` with a string value; number and string literals for the other
/// arguments); anything else is left to [`prepare`]. A guess: the key is used only when the
/// block as [`prepare`] evaluates it asks for exactly that key (see `derive_ahead`).
pub fn derive_early(dir: &Path, vars: &[VarArg], env: &BTreeMap<String, String>, state_dir: &Path) {
    let env_text = env
        .get("TF_ENCRYPTION")
        .filter(|t| !t.trim().is_empty())
        .cloned();
    let tf_vars: BTreeMap<String, String> = env
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("TF_VAR_")?.to_string(), v.clone())))
        .collect();
    let cli: Vec<(Option<String>, Option<PathBuf>)> = vars
        .iter()
        .filter_map(|v| match v {
            VarArg::Var(t) => Some((Some(t.clone()), None)),
            VarArg::File(p) => Some((None, Some(p.clone()))),
            VarArg::Value(..) => None,
        })
        .collect();
    let (dir, hint_file) = (dir.to_path_buf(), state_dir.join(HINT_FILE));
    let reading = std::thread::Builder::new()
        .name("cairn-kdf-early".into())
        .spawn(move || {
            let Some(guess) = ahead::guess(&dir, env_text.as_deref(), &tf_vars, &cli) else {
                return;
            };
            let hint = std::fs::read_to_string(hint_file).ok();
            let hinted = hint
                .as_deref()
                .and_then(|h| h.split_whitespace().next())
                .and_then(|p| guess.providers.get(p));
            if let Some(keys) = hinted {
                cairn_state::crypt::derive_ahead(keys, hint.as_deref());
            }
            // A new log's first write key, or the new key of a rotation (the log's salt is
            // the old key's): a fresh salt.
            if let Some(primary) = guess.primary.as_ref().and_then(|p| guess.providers.get(p)) {
                if hinted.map(|k| &k.address) != Some(&primary.address) {
                    cairn_state::crypt::derive_ahead(primary, None);
                }
            }
        });
    *early_read().lock().expect("early read") = reading.ok();
}

/// The thread [`derive_early`] reads the block on (it hands the derivations to threads of
/// their own and ends): [`prepare`] waits for it before deriving anything, so that a key is
/// never derived twice because the configuration loaded before the block was read ahead.
fn early_read() -> &'static Mutex<Option<std::thread::JoinHandle<()>>> {
    static READ: OnceLock<Mutex<Option<std::thread::JoinHandle<()>>>> = OnceLock::new();
    READ.get_or_init(Default::default)
}

/// The early read of the `encryption` block for [`derive_early`].
mod ahead {
    use super::*;

    /// The key providers read ahead, and the one the state's method uses.
    pub(super) struct Guess {
        pub providers: BTreeMap<String, Pbkdf2>,
        pub primary: Option<String>,
    }

    /// The root module's `.tf` files' `encryption` blocks merged with `TF_ENCRYPTION`, read
    /// without loading the configuration. `None` when there is nothing to read ahead.
    pub(super) fn guess(
        dir: &Path,
        env_text: Option<&str>,
        tf_vars: &BTreeMap<String, String>,
        cli: &[(Option<String>, Option<PathBuf>)],
    ) -> Option<Guess> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "tf"))
            .collect();
        names.sort();
        // (kind, labels) → block, the later replacing the earlier (as TF_ENCRYPTION does).
        let mut items: Vec<Block> = Vec::new();
        let mut defaults: BTreeMap<String, String> = BTreeMap::new();
        fn put(items: &mut Vec<Block>, b: &Block) {
            let key = |b: &Block| {
                (
                    b.ident.as_str().to_string(),
                    b.labels
                        .iter()
                        .map(|l| l.as_str().to_string())
                        .collect::<Vec<_>>(),
                )
            };
            items.retain(|i| key(i) != key(b));
            items.push(b.clone());
        }
        for path in &names {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            if !text.contains("encryption") && !text.contains("variable") {
                continue;
            }
            for (ident, block) in top_level_blocks(&text)? {
                if ident != "terraform" && ident != "variable" {
                    continue;
                }
                let Ok(body) = hcl_edit::parser::parse_body(block) else {
                    return None;
                };
                for b in body.blocks() {
                    match b.ident.as_str() {
                        "variable" => {
                            let name = b.labels.first().map(|l| l.as_str().to_string());
                            let default = b
                                .body
                                .get_attribute("default")
                                .and_then(|a| text_of(&a.value));
                            if let (Some(n), Some(d)) = (name, default) {
                                defaults.insert(n, d);
                            }
                        }
                        "terraform" => {
                            for e in b.body.blocks().filter(|e| e.ident.as_str() == "encryption") {
                                for inner in e.body.blocks() {
                                    put(&mut items, inner);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if let Some(t) = env_text {
            for b in hcl_edit::parser::parse_body(t).ok()?.blocks() {
                put(&mut items, b);
            }
        }
        if items.is_empty() {
            return None;
        }
        let vars = values(dir, defaults, tf_vars, cli);
        let mut providers = BTreeMap::new();
        for b in items.iter().filter(|b| b.ident.as_str() == "key_provider") {
            let [ty, name] = b.labels.as_slice() else {
                continue;
            };
            if ty.as_str() != "pbkdf2" {
                continue;
            }
            if let Some(k) = provider(
                &format!("key_provider.pbkdf2.{}", name.as_str()),
                &b.body,
                &vars,
            ) {
                providers.insert(k.address.clone(), k);
            }
        }
        // state { method = method.aes_gcm.M } → method "aes_gcm" "M" { keys = key_provider.pbkdf2.K }
        let primary = items
            .iter()
            .find(|b| b.ident.as_str() == "state")
            .and_then(|s| reference(&s.body, "method"))
            .and_then(|m| match m.as_slice() {
                [root, ty, name] if root == "method" && ty == "aes_gcm" => items.iter().find(|b| {
                    b.ident.as_str() == "method"
                        && b.labels
                            .iter()
                            .map(|l| l.as_str())
                            .eq(["aes_gcm", name.as_str()])
                }),
                _ => None,
            })
            .and_then(|m| reference(&m.body, "keys"))
            .map(|k| k.join("."));
        Some(Guess { providers, primary })
    }

    /// A string literal's value.
    fn text_of(e: &Expression) -> Option<String> {
        match e {
            Expression::String(s) => Some(s.value().to_string()),
            _ => None,
        }
    }

    /// The reference `a.b.c` an argument is, as its parts.
    fn reference(body: &Body, attr: &str) -> Option<Vec<String>> {
        parts(&body.get_attribute(attr)?.value)
    }

    fn parts(e: &Expression) -> Option<Vec<String>> {
        let Expression::Traversal(t) = e else {
            return None;
        };
        let Expression::Variable(v) = &t.expr else {
            return None;
        };
        let mut parts = vec![v.as_str().to_string()];
        for op in &t.operators {
            match op.value() {
                TraversalOperator::GetAttr(a) => parts.push(a.as_str().to_string()),
                _ => return None,
            }
        }
        Some(parts)
    }

    fn provider(address: &str, body: &Body, vars: &BTreeMap<String, String>) -> Option<Pbkdf2> {
        let pass = &body.get_attribute("passphrase")?.value;
        let passphrase = match text_of(pass) {
            Some(p) => p,
            None => match parts(pass)?.as_slice() {
                [root, name] if root == "var" => vars.get(name)?.clone(),
                _ => return None,
            },
        };
        let num = |k: &str, default: u64| -> Option<u64> {
            match body.get_attribute(k) {
                None => Some(default),
                Some(a) => match &a.value {
                    Expression::Number(n) => n.value().as_u64(),
                    _ => None,
                },
            }
        };
        let hash = match body.get_attribute("hash_function") {
            None => Hash::Sha512,
            Some(a) => Hash::parse(&text_of(&a.value)?)?,
        };
        Some(Pbkdf2 {
            address: address.to_string(),
            passphrase,
            key_length: usize::try_from(num("key_length", 32)?).ok()?,
            iterations: u32::try_from(num("iterations", 600_000)?).ok()?,
            salt_length: usize::try_from(num("salt_length", 32)?).ok()?,
            hash,
        })
    }

    /// The string values of variables, by Terraform's precedence (lowest first): defaults,
    /// `TF_VAR_*`, `terraform.tfvars`, `*.auto.tfvars` in lexical order, then `-var` and
    /// `-var-file` in command-line order. Values in `.json` variable files are not read
    /// ahead (a guess that misses them is only a wasted derivation).
    fn values(
        dir: &Path,
        mut out: BTreeMap<String, String>,
        tf_vars: &BTreeMap<String, String>,
        cli: &[(Option<String>, Option<PathBuf>)],
    ) -> BTreeMap<String, String> {
        out.extend(tf_vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        let file = |out: &mut BTreeMap<String, String>, path: &Path| {
            let Some(body) = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| hcl_edit::parser::parse_body(&t).ok())
            else {
                return;
            };
            for a in body.attributes() {
                if let Some(v) = text_of(&a.value) {
                    out.insert(a.key.as_str().to_string(), v);
                }
            }
        };
        file(&mut out, &dir.join("terraform.tfvars"));
        let mut auto: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".auto.tfvars"))
            })
            .collect();
        auto.sort();
        for p in &auto {
            file(&mut out, p);
        }
        for (var, path) in cli {
            if let Some((k, v)) = var.as_deref().and_then(|t| t.split_once('=')) {
                out.insert(k.trim().to_string(), v.to_string());
            }
            if let Some(p) = path {
                file(&mut out, p);
            }
        }
        out
    }

    /// The root module's top-level blocks, `(type, text)`, found without parsing their
    /// bodies: strings (with their interpolations), heredocs and comments skipped, brackets
    /// matched. `None` for text this scan does not follow (it is then not read ahead).
    pub(super) fn top_level_blocks(text: &str) -> Option<Vec<(&str, &str)>> {
        let b = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            i = skip_space(b, i)?;
            if i >= b.len() {
                return Some(out);
            }
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-') {
                i += 1;
            }
            if i == start {
                return None;
            }
            let ident = &text[start..i];
            // Labels, then the body.
            loop {
                i = skip_space(b, i)?;
                match b.get(i)? {
                    b'"' => i = skip_string(b, i + 1)?,
                    b'{' => {
                        i = skip_to_close(b, i + 1, b'}')?;
                        break;
                    }
                    c if c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-' => i += 1,
                    _ => return None,
                }
            }
            out.push((ident, &text[start..i]));
        }
    }

    /// Past whitespace and comments.
    fn skip_space(b: &[u8], mut i: usize) -> Option<usize> {
        loop {
            match b.get(i) {
                Some(c) if c.is_ascii_whitespace() => i += 1,
                Some(b'#') => i = line_end(b, i),
                Some(b'/') if b.get(i + 1) == Some(&b'/') => i = line_end(b, i),
                Some(b'/') if b.get(i + 1) == Some(&b'*') => {
                    i = i + 2 + find(&b[i + 2..], b"*/")? + 2;
                }
                _ => return Some(i),
            }
        }
    }

    fn line_end(b: &[u8], i: usize) -> usize {
        b[i..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |n| i + n)
    }

    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }

    /// Past the bracket `close` that closes the one before `i`.
    fn skip_to_close(b: &[u8], mut i: usize, close: u8) -> Option<usize> {
        loop {
            i = skip_space(b, i)?;
            match *b.get(i)? {
                c if c == close => return Some(i + 1),
                b'"' => i = skip_string(b, i + 1)?,
                b'{' => i = skip_to_close(b, i + 1, b'}')?,
                b'[' => i = skip_to_close(b, i + 1, b']')?,
                b'(' => i = skip_to_close(b, i + 1, b')')?,
                b'}' | b']' | b')' => return None,
                b'<' if b.get(i + 1) == Some(&b'<') => i = skip_heredoc(b, i + 2)?,
                _ => i += 1,
            }
        }
    }

    /// Past a quoted string whose opening quote is before `i`.
    fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
        loop {
            match *b.get(i)? {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                b'\n' => return None,
                b'$' | b'%' if b.get(i + 1) == Some(&b'{') => i = skip_to_close(b, i + 2, b'}')?,
                // `$${` and `%%{` are literal.
                b'$' | b'%' if b.get(i + 1) == Some(&b[i]) => i += 2,
                _ => i += 1,
            }
        }
    }

    /// Past a heredoc whose `<<` is before `i`: its marker line to its closing line.
    fn skip_heredoc(b: &[u8], mut i: usize) -> Option<usize> {
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let marker = &b[start..i];
        if marker.is_empty() || b.get(i) != Some(&b'\n') {
            return None;
        }
        i += 1;
        loop {
            let end = line_end(b, i);
            if b[i..end].trim_ascii() == marker {
                return Some(end);
            }
            if end >= b.len() {
                return None;
            }
            i = end + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ahead::{guess, top_level_blocks};
    use std::collections::BTreeMap;

    #[test]
    fn the_block_scan_follows_strings_heredocs_and_comments() {
        let text = r#"
# a } in a comment
resource "x" "y" {
  a = "} ${ {b = "}"}["b"] } $${ %%{"
  /* } */ c = <<-EOT
    }
    EOT
  d = [{ e = (1) }] // }
}
terraform {
  encryption {}
}
"#;
        let blocks = top_level_blocks(text).expect("scanned");
        let kinds: Vec<&str> = blocks.iter().map(|b| b.0).collect();
        assert_eq!(kinds, ["resource", "terraform"]);
        assert!(blocks[1].1.starts_with("terraform {") && blocks[1].1.ends_with('}'));
        for bad in ["resource \"x\" {", "a = 1\n", "x { \"unterminated\n }"] {
            assert!(top_level_blocks(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_key_provider_is_read_ahead_with_terraforms_variable_precedence() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("main.tf"),
            r#"
variable "pass" {
  default = "from the default, long"
}
resource "terraform_data" "r" {
  input = "${var.pass}}"
}
terraform {
  encryption {
    key_provider "pbkdf2" "k" {
      passphrase = var.pass
      iterations = 300000
    }
    key_provider "pbkdf2" "lit" {
      passphrase    = "a literal passphrase"
      hash_function = "sha256"
    }
    key_provider "pbkdf2" "local" {
      passphrase = local.p
    }
    method "aes_gcm" "m" {
      keys = key_provider.pbkdf2.k
    }
    state {
      method = method.aes_gcm.m
    }
  }
}
"#,
        )
        .unwrap();
        let none = BTreeMap::new();
        let g = guess(dir.path(), None, &none, &[]).expect("read ahead");
        assert_eq!(g.primary.as_deref(), Some("key_provider.pbkdf2.k"));
        let k = &g.providers["key_provider.pbkdf2.k"];
        assert_eq!(
            (k.passphrase.as_str(), k.iterations, k.key_length),
            ("from the default, long", 300_000, 32)
        );
        assert_eq!(
            g.providers["key_provider.pbkdf2.lit"].hash,
            cairn_state::crypt::Hash::Sha256
        );
        assert!(!g.providers.contains_key("key_provider.pbkdf2.local"));
        // TF_VAR_ < terraform.tfvars < *.auto.tfvars < -var / -var-file in order.
        let env: BTreeMap<String, String> =
            [("pass".to_string(), "from the environment".to_string())].into();
        let pass = |cli: &[(Option<String>, Option<std::path::PathBuf>)]| {
            guess(dir.path(), None, &env, cli).unwrap().providers["key_provider.pbkdf2.k"]
                .passphrase
                .clone()
        };
        assert_eq!(pass(&[]), "from the environment");
        std::fs::write(
            dir.path().join("terraform.tfvars"),
            "pass = \"from terraform.tfvars\"\n",
        )
        .unwrap();
        assert_eq!(pass(&[]), "from terraform.tfvars");
        std::fs::write(
            dir.path().join("b.auto.tfvars"),
            "pass = \"from b.auto.tfvars\"\n",
        )
        .unwrap();
        assert_eq!(pass(&[]), "from b.auto.tfvars");
        let file = dir.path().join("given.tfvars");
        std::fs::write(&file, "pass = \"from -var-file\"\n").unwrap();
        assert_eq!(
            pass(&[
                (Some("pass=from -var".into()), None),
                (None, Some(file.clone()))
            ]),
            "from -var-file"
        );
        assert_eq!(
            pass(&[(None, Some(file)), (Some("pass=from -var".into()), None)]),
            "from -var"
        );
        // TF_ENCRYPTION's blocks replace the configuration's of the same name.
        let env_text = r#"key_provider "pbkdf2" "k" {
  passphrase = "from TF_ENCRYPTION, long"
}"#;
        let g = guess(dir.path(), Some(env_text), &env, &[]).unwrap();
        let k = &g.providers["key_provider.pbkdf2.k"];
        assert_eq!(
            (k.passphrase.as_str(), k.iterations),
            ("from TF_ENCRYPTION, long", 600_000)
        );
    }
}
