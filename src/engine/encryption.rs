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
    let Some(hint) = state().and_then(|e| e.hint()) else {
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
