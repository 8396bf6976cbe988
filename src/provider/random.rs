//! The `random` provider: random values that stay put, as hashicorp/random 3.x.
//!
//! ```hcl
//! resource "random_id" "a"       { byte_length = 8  prefix = "srv-"  keepers = { ami = var.ami } }
//! resource "random_string" "b"   { length = 16  special = false  min_upper = 2 }
//! resource "random_password" "c" { length = 24  override_special = "_%@" }
//! resource "random_integer" "d"  { min = 1  max = 50000  seed = "x" }
//! resource "random_pet" "e"      { length = 3  prefix = "srv"  separator = "_" }
//! resource "random_shuffle" "f"  { input = ["a", "b", "c"]  result_count = 2  seed = "x" }
//! resource "random_uuid" "g"     {}              # also random_uuid4; random_uuid7 is time-ordered
//! resource "random_bytes" "h"    { length = 32 } # base64 and hex, both sensitive
//! ```
//!
//! Every argument forces replacement (a new random value); `keepers` (a map of strings) exists
//! only for that: change one of its values and the value is generated again. A value is made
//! at apply time and then only read back from state: refresh changes nothing.
//!
//! - `random_id`: `byte_length` (≥ 1) random bytes; `id` is their unpadded URL-safe base64;
//!   `b64_url` the same with `prefix`, `b64_std` padded standard base64 with `prefix`, `hex`
//!   lowercase hex with `prefix`, `dec` the bytes as a big-endian unsigned decimal number with
//!   `prefix`.
//! - `random_string` / `random_password`: `length` (≥ 1) characters drawn, as hashicorp/random
//!   draws them, from the enabled classes `upper`, `lower`, `numeric`, `special` (all default
//!   true; specials `!@#$%&*()-_=+[]{}<>:?` unless `override_special`), after first drawing
//!   `min_upper`, `min_lower`, `min_numeric`, `min_special` characters of each class (even of a
//!   disabled class, as hashicorp/random does), then shuffled. `length` must be at least the
//!   sum of the minimums. `result` (sensitive for `random_password`); `id` is the result for
//!   `random_string` and `"none"` for `random_password`, as hashicorp/random.
//!   The deprecated `number` argument is accepted: digits are drawn when both `numeric` and
//!   `number` are true. `random_password.bcrypt_hash` (sensitive) is the bcrypt hash (cost 10,
//!   as hashicorp/random) of `result`.
//! - `random_integer`: `result` uniform in `min..=max` (`max` ≥ `min`); `id` is its decimal text.
//!   With `seed`, the result is a deterministic function of the seed, min and max (the same
//!   seed gives the same number on every run — but not the number Go's generator would give
//!   under Terraform).
//! - `random_pet`: `length` (default 2) words joined by `separator` (default `-`): one name,
//!   after one adjective, after `length - 2` adverbs, as hashicorp/random's petname; with
//!   `prefix`, `prefix` + separator in front. `id` is the name. The word lists are the `petname`
//!   crate's (medium), not golang-petname's, so names differ in vocabulary, not in shape.
//! - `random_shuffle`: `result` is a random permutation of `input`, cut or repeated (permutation
//!   after permutation) to `result_count` elements (default: as many as `input`); `id` is `-`.
//!   With `seed`, the permutation is a deterministic function of the seed (not Go's).
//! - `random_uuid` / `random_uuid4`: a version 4 UUID in `result` and `id`; `random_uuid7` a
//!   version 7 one (Unix time in milliseconds, then random bits).
//! - `random_bytes`: `length` (≥ 1) random bytes as `base64` (padded standard) and `hex`, both
//!   sensitive; no `id`, as hashicorp/random.
//!
//! Randomness comes from `Host::rng`: a CSPRNG seeded by the operating system (or, for test
//! fixtures, derived from `CAIRN_RANDOM_SEED`); `random_integer.seed` takes precedence.

use super::host::Host;
use super::schema_util::{self, get_bool, get_i64, get_str, int_in_range, TypeSchema};
use super::{
    ApplyRequest, ApplyResponse, Configured, Opened, Planned, Provider, ProviderError,
    ProviderResult,
};
use crate::addr::Mode;
use crate::diag::{Diagnostic, Diagnostics};
use crate::schema::ProviderSchema;
use crate::value::ValueMap;
use crate::value::{Number, Type, Value};
use async_trait::async_trait;
use base64::Engine as _;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

const PACKAGE: &str = "random";
const ID: &str = "random_id";
const STRING: &str = "random_string";
const PASSWORD: &str = "random_password";
const INTEGER: &str = "random_integer";
const PET: &str = "random_pet";
const SHUFFLE: &str = "random_shuffle";
const UUID: &str = "random_uuid";
const UUID4: &str = "random_uuid4";
const UUID7: &str = "random_uuid7";
const BYTES: &str = "random_bytes";

const NUMERIC: &str = "0123456789";
const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const SPECIAL: &str = "!@#$%&*()-_=+[]{}<>:?";

/// The `random` provider package (no configuration).
pub(crate) struct RandomProvider {
    host: Host,
    schema: ProviderSchema,
    types: Arc<BTreeMap<&'static str, TypeSchema>>,
    /// `ephemeral "random_password"` (hashicorp/random 3.7).
    ephemeral: Arc<TypeSchema>,
}

/// The schema of `ephemeral "random_password"`, as hashicorp/random 3.7's: the managed
/// resource's character arguments without `keepers`, `number` or `id`.
fn ephemeral_password_schema() -> TypeSchema {
    let mut s = TypeSchema::new("A random password, generated each run and never stored.")
        .required("length", Type::Number, "Number of characters.");
    for (name, desc) in [
        ("special", "Include special characters."),
        ("upper", "Include uppercase letters."),
        ("lower", "Include lowercase letters."),
        ("numeric", "Include digits."),
    ] {
        s = s
            .optional_computed(name, Type::Bool, desc)
            .default(Value::Bool(true));
    }
    for (name, desc) in [
        ("min_special", "Minimum number of special characters."),
        ("min_upper", "Minimum number of uppercase letters."),
        ("min_lower", "Minimum number of lowercase letters."),
        ("min_numeric", "Minimum number of digits."),
    ] {
        s = s
            .optional_computed(name, Type::Number, desc)
            .default(Value::int(0));
    }
    s.optional(
        "override_special",
        Type::String,
        "The special characters to use instead of the default ones.",
    )
    .computed("result", Type::String, "The generated password.")
    .sensitive()
    .computed(
        "bcrypt_hash",
        Type::String,
        "The bcrypt hash of the result (cost 10).",
    )
    .sensitive()
}

/// `length` and the minimums of `random_string`, `random_password` and the ephemeral
/// `random_password`.
fn check_lengths(c: &ValueMap, diags: &mut Diagnostics) {
    diags.extend(int_in_range(c, "length", 1, None));
    let mins = ["min_upper", "min_lower", "min_numeric", "min_special"];
    for m in mins {
        diags.extend(int_in_range(c, m, 0, None));
    }
    let sum: Option<i64> = mins.iter().map(|m| get_i64(c, m)).sum();
    if let (Some(len), Some(sum)) = (get_i64(c, "length"), sum) {
        if len < sum {
            diags.push(Diagnostic::error(
                "Invalid attribute value",
                format!(
                    "Argument \"length\" ({len}) must be at least min_upper + \
                     min_lower + min_numeric + min_special ({sum})."
                ),
            ));
        }
    }
}

fn keepers(s: TypeSchema) -> TypeSchema {
    s.optional(
        "keepers",
        Type::map(Type::String),
        "Arbitrary values whose change makes a new random value.",
    )
    .force_new()
}

fn string_schema(password: bool) -> TypeSchema {
    let mut s = keepers(TypeSchema::new(if password {
        "A random password (sensitive)."
    } else {
        "A random string."
    }))
    .required("length", Type::Number, "Number of characters.")
    .force_new();
    for (name, desc) in [
        ("special", "Include special characters."),
        ("upper", "Include uppercase letters."),
        ("lower", "Include lowercase letters."),
        ("numeric", "Include digits."),
        ("number", "Include digits (deprecated: use numeric)."),
    ] {
        s = s
            .optional(name, Type::Bool, desc)
            .force_new()
            .default(Value::Bool(true));
    }
    for (name, desc) in [
        ("min_special", "Minimum number of special characters."),
        ("min_upper", "Minimum number of uppercase letters."),
        ("min_lower", "Minimum number of lowercase letters."),
        ("min_numeric", "Minimum number of digits."),
    ] {
        s = s
            .optional(name, Type::Number, desc)
            .force_new()
            .default(Value::int(0));
    }
    s = s
        .optional(
            "override_special",
            Type::String,
            "The special characters to use instead of the default ones.",
        )
        .force_new()
        .computed("result", Type::String, "The generated string.");
    if password {
        s = s
            .sensitive()
            .computed(
                "bcrypt_hash",
                Type::String,
                "The bcrypt hash of the result (cost 10).",
            )
            .sensitive();
    }
    s.computed(
        "id",
        Type::String,
        if password {
            "Always \"none\"."
        } else {
            "The generated string."
        },
    )
}

impl RandomProvider {
    pub(crate) fn new(host: Host) -> RandomProvider {
        let id = keepers(TypeSchema::new("Random bytes, in several encodings."))
            .required("byte_length", Type::Number, "Number of random bytes.")
            .force_new()
            .optional("prefix", Type::String, "Prefix of the encoded forms.")
            .force_new()
            .computed("id", Type::String, "The bytes, unpadded URL-safe base64.")
            .computed(
                "b64_url",
                Type::String,
                "prefix + unpadded URL-safe base64.",
            )
            .computed("b64_std", Type::String, "prefix + padded standard base64.")
            .computed("hex", Type::String, "prefix + lowercase hex.")
            .computed(
                "dec",
                Type::String,
                "prefix + the bytes as a decimal number.",
            );
        let integer = keepers(TypeSchema::new("A random integer in a range."))
            .required("min", Type::Number, "Smallest possible result.")
            .force_new()
            .required("max", Type::Number, "Largest possible result.")
            .force_new()
            .optional("seed", Type::String, "Makes the result deterministic.")
            .force_new()
            .computed("result", Type::Number, "The random integer.")
            .computed("id", Type::String, "The result, as text.");
        let pet = keepers(TypeSchema::new("A random pet name."))
            .optional("length", Type::Number, "Number of words (default 2).")
            .force_new()
            .default(Value::int(2))
            .optional("prefix", Type::String, "A string to prefix the name with.")
            .force_new()
            .optional(
                "separator",
                Type::String,
                "Separator of the words (default \"-\").",
            )
            .force_new()
            .default(Value::string("-"))
            .computed("id", Type::String, "The random pet name.");
        let shuffle = keepers(TypeSchema::new(
            "A random permutation of a list of strings.",
        ))
        .required("input", Type::list(Type::String), "The strings to shuffle.")
        .force_new()
        .optional(
            "result_count",
            Type::Number,
            "Number of results (default: as many as input).",
        )
        .force_new()
        .optional("seed", Type::String, "Makes the permutation deterministic.")
        .force_new()
        .computed("result", Type::list(Type::String), "The permutation.")
        .computed("id", Type::String, "Always \"-\".");
        let uuid = |what: &str| {
            keepers(TypeSchema::new(what))
                .computed("result", Type::String, "The UUID.")
                .computed("id", Type::String, "The UUID.")
        };
        let bytes = keepers(TypeSchema::new("Random bytes meant for a key or a secret."))
            .required("length", Type::Number, "Number of random bytes.")
            .force_new()
            .computed("base64", Type::String, "The bytes, padded standard base64.")
            .sensitive()
            .computed("hex", Type::String, "The bytes, lowercase hex.")
            .sensitive();
        let types: BTreeMap<&'static str, TypeSchema> = [
            (ID, id),
            (STRING, string_schema(false)),
            (PASSWORD, string_schema(true)),
            (INTEGER, integer),
            (PET, pet),
            (SHUFFLE, shuffle),
            (UUID, uuid("A random version 4 UUID.")),
            (UUID4, uuid("A random version 4 UUID.")),
            (UUID7, uuid("A version 7 UUID: time-ordered, then random.")),
            (BYTES, bytes),
        ]
        .into();
        let ephemeral = ephemeral_password_schema();
        let schema = ProviderSchema {
            resources: types
                .iter()
                .map(|(t, s)| (t.to_string(), s.block.clone()))
                .collect(),
            ephemeral_resources: [(PASSWORD.to_string(), ephemeral.block.clone())].into(),
            ..ProviderSchema::default()
        };
        RandomProvider {
            host,
            schema,
            types: Arc::new(types),
            ephemeral: Arc::new(ephemeral),
        }
    }
}

#[async_trait]
impl Provider for RandomProvider {
    fn package(&self) -> &str {
        PACKAGE
    }
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }
    fn validate(&self, mode: Mode, type_: &str, config: &Value) -> Diagnostics {
        if mode == Mode::Ephemeral && type_ == PASSWORD {
            let mut diags = self.ephemeral.check(config);
            if let Ok(c) = self.ephemeral.conform(config) {
                check_lengths(&c, &mut diags);
            }
            return diags;
        }
        let Some(schema) = self.types.get(type_).filter(|_| mode == Mode::Managed) else {
            return schema_util::unsupported_type(PACKAGE, type_);
        };
        let mut diags = schema.check(config);
        let Ok(c) = schema.conform(config) else {
            return diags;
        };
        match type_ {
            ID => diags.extend(int_in_range(&c, "byte_length", 1, None)),
            BYTES => diags.extend(int_in_range(&c, "length", 1, None)),
            PET => diags.extend(int_in_range(&c, "length", 1, Some(255))),
            SHUFFLE => diags.extend(int_in_range(&c, "result_count", 0, None)),
            UUID | UUID4 | UUID7 => {}
            INTEGER => {
                diags.extend(int_in_range(&c, "min", i64::MIN, None));
                diags.extend(int_in_range(&c, "max", i64::MIN, None));
                if let (Some(min), Some(max)) = (get_i64(&c, "min"), get_i64(&c, "max")) {
                    if max < min {
                        diags.push(Diagnostic::error(
                            "Invalid attribute value",
                            format!(
                                "The minimum ({min}) must be smaller than or equal to the \
                                 maximum ({max})."
                            ),
                        ));
                    }
                }
            }
            _ => check_lengths(&c, &mut diags),
        }
        diags
    }
    async fn configure(&self, _config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        Ok(Arc::new(RandomInstance {
            host: self.host.clone(),
            types: self.types.clone(),
            ephemeral: self.ephemeral.clone(),
        }))
    }
}

struct RandomInstance {
    host: Host,
    types: Arc<BTreeMap<&'static str, TypeSchema>>,
    ephemeral: Arc<TypeSchema>,
}

/// `random_password`'s bcrypt hash: cost 10, bcrypt.DefaultCost, as hashicorp/random; the
/// salt comes from the same generator, so CAIRN_RANDOM_SEED makes the hash reproducible.
fn bcrypt_hash(rng: &mut impl Rng, s: &str) -> ProviderResult<String> {
    let mut salt = [0u8; 16];
    rng.fill_bytes(&mut salt);
    Ok(bcrypt::hash_with_salt(s, 10, salt)
        .map_err(|e| ProviderError(format!("random_password: bcrypt: {e}")))?
        .to_string())
}

/// Big-endian unsigned bytes as a decimal number.
fn bytes_to_decimal(bytes: &[u8]) -> String {
    // Repeated division by 10 of the base-256 number.
    let mut num: Vec<u8> = bytes.iter().copied().skip_while(|&b| b == 0).collect();
    let mut digits = Vec::new();
    while !num.is_empty() {
        let mut rem = 0u32;
        for b in num.iter_mut() {
            let cur = (rem << 8) | u32::from(*b);
            *b = (cur / 10) as u8;
            rem = cur % 10;
        }
        digits.push(b'0' + rem as u8);
        let zeros = num.iter().take_while(|&&b| b == 0).count();
        num.drain(..zeros);
    }
    if digits.is_empty() {
        return "0".into();
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

fn draw(rng: &mut impl Rng, set: &str, n: usize) -> Vec<char> {
    let chars: Vec<char> = set.chars().collect();
    (0..n)
        .map(|_| chars[rng.gen_range(0..chars.len())])
        .collect()
}

/// hashicorp/random's string algorithm (see the module docs).
fn random_string(rng: &mut impl Rng, c: &ValueMap) -> ProviderResult<String> {
    let n = |k: &str| get_i64(c, k).unwrap_or(0).max(0) as usize;
    let b = |k: &str| get_bool(c, k).unwrap_or(true);
    let special = get_str(c, "override_special").unwrap_or(SPECIAL);
    let length = n("length");
    let mut all = String::new();
    for (on, set) in [
        (b("upper"), UPPER),
        (b("lower"), LOWER),
        (b("numeric") && b("number"), NUMERIC),
        (b("special"), special),
    ] {
        if on {
            all.push_str(set);
        }
    }
    let mut result = Vec::new();
    for (k, set) in [
        ("min_numeric", NUMERIC),
        ("min_lower", LOWER),
        ("min_upper", UPPER),
        ("min_special", special),
    ] {
        let want = n(k);
        if want > 0 && set.is_empty() {
            return Err(ProviderError(format!(
                "{k} is {want} but override_special is empty"
            )));
        }
        result.extend(draw(rng, set, want));
    }
    if length < result.len() {
        return Err(ProviderError(format!(
            "length ({length}) must be at least min_upper + min_lower + min_numeric + \
             min_special ({})",
            result.len()
        )));
    }
    let rest = length - result.len();
    if rest > 0 && all.is_empty() {
        return Err(ProviderError(
            "no characters to draw from: enable at least one of upper, lower, numeric, special"
                .into(),
        ));
    }
    result.extend(draw(rng, &all, rest));
    // Fisher–Yates, so the minimums are not always in front.
    for i in (1..result.len()).rev() {
        result.swap(i, rng.gen_range(0..=i));
    }
    Ok(result.into_iter().collect())
}

impl RandomInstance {
    fn generate(&self, type_: &str, planned: &Value) -> ProviderResult<Value> {
        let schema = self
            .types
            .get(type_)
            .ok_or_else(|| schema_util::unknown_type(PACKAGE, "resource", type_))?;
        let cc = schema.conform(planned)?;
        let mut rng = self.host.rng(|| format!("{type_} {}", planned.to_json()));
        let mut c = cc.clone();
        let mut set = |k: &str, v: Value| {
            c.insert(k.to_string(), v);
        };
        match type_ {
            ID => {
                let len = get_i64(&cc, "byte_length")
                    .filter(|&n| n >= 1)
                    .ok_or("random_id: byte_length must be a whole number of at least 1")?;
                let mut bytes = vec![0u8; len as usize];
                rng.fill_bytes(&mut bytes);
                let prefix = get_str(&cc, "prefix").unwrap_or("");
                let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
                let std = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                set("id", Value::string(&url));
                set("b64_url", Value::string(format!("{prefix}{url}")));
                set("b64_std", Value::string(format!("{prefix}{std}")));
                set("hex", Value::string(format!("{prefix}{hex}")));
                let dec = bytes_to_decimal(&bytes);
                set("dec", Value::string(format!("{prefix}{dec}")));
            }
            INTEGER => {
                let (min, max) = match (get_i64(&cc, "min"), get_i64(&cc, "max")) {
                    (Some(min), Some(max)) if min <= max => (min, max),
                    _ => {
                        return Err(
                            "random_integer: min and max must be whole numbers with min <= max"
                                .into(),
                        )
                    }
                };
                let n = match get_str(&cc, "seed") {
                    Some(seed) => {
                        let h = Sha256::digest(seed.as_bytes());
                        let mut s = [0u8; 32];
                        s.copy_from_slice(&h);
                        rand::rngs::StdRng::from_seed(s).gen_range(min..=max)
                    }
                    None => rng.gen_range(min..=max),
                };
                set("result", Value::Number(Number::from_i64(n)));
                set("id", Value::string(n.to_string()));
            }
            PET => {
                use petname::Generator as _;
                let words = get_i64(&cc, "length")
                    .and_then(|n| u8::try_from(n).ok())
                    .filter(|&n| n >= 1)
                    .ok_or("random_pet: length must be a whole number from 1 to 255")?;
                let sep = get_str(&cc, "separator").unwrap_or("-");
                let name = petname::Petnames::default()
                    .generate(&mut rng, words, sep)
                    .ok_or("random_pet: no name could be made")?
                    .to_lowercase();
                let id = match get_str(&cc, "prefix").filter(|p| !p.is_empty()) {
                    Some(prefix) => format!("{prefix}{sep}{name}"),
                    None => name,
                };
                set("id", Value::string(id));
            }
            SHUFFLE => {
                let input: Vec<Value> = cc
                    .get("input")
                    .and_then(Value::elements)
                    .map(<[Value]>::to_vec)
                    .unwrap_or_default();
                let count = match cc.get("result_count").filter(|v| !v.is_null()) {
                    Some(_) => get_i64(&cc, "result_count")
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or(
                            "random_shuffle: result_count must be a whole number of at least 0",
                        )?,
                    None => input.len(),
                };
                let mut seeded;
                let rng: &mut dyn RngCore = match get_str(&cc, "seed") {
                    Some(seed) => {
                        seeded =
                            rand::rngs::StdRng::from_seed(Sha256::digest(seed.as_bytes()).into());
                        &mut seeded
                    }
                    None => &mut rng,
                };
                let mut result = Vec::with_capacity(count);
                // Permutation after permutation until there are enough, as hashicorp/random.
                while !input.is_empty() && result.len() < count {
                    let mut perm: Vec<usize> = (0..input.len()).collect();
                    perm.shuffle(rng);
                    let need = count - result.len();
                    result.extend(perm.into_iter().take(need).map(|i| input[i].clone()));
                }
                set("result", Value::List(result));
                set("id", Value::string("-"));
            }
            UUID | UUID4 | UUID7 => {
                let mut bytes = [0u8; 16];
                rng.fill_bytes(&mut bytes);
                let uuid = if type_ == UUID7 {
                    let ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64);
                    let mut rand10 = [0u8; 10];
                    rand10.copy_from_slice(&bytes[..10]);
                    uuid::Builder::from_unix_timestamp_millis(ms, &rand10).into_uuid()
                } else {
                    uuid::Builder::from_random_bytes(bytes).into_uuid()
                };
                let text = uuid.hyphenated().to_string();
                set("result", Value::string(&text));
                set("id", Value::string(text));
            }
            BYTES => {
                let len = get_i64(&cc, "length")
                    .filter(|&n| n >= 1)
                    .ok_or("random_bytes: length must be a whole number of at least 1")?;
                let mut bytes = vec![0u8; len as usize];
                rng.fill_bytes(&mut bytes);
                let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                set("base64", Value::string(b64));
                set("hex", Value::string(hex));
            }
            _ => {
                let s = random_string(&mut rng, &cc)?;
                let id = if type_ == PASSWORD {
                    set("bcrypt_hash", Value::string(bcrypt_hash(&mut rng, &s)?));
                    "none".to_string()
                } else {
                    s.clone()
                };
                set("result", Value::string(s));
                set("id", Value::string(id));
            }
        }
        Ok(Value::Object(c))
    }
}

/// An import error as hashicorp/random reports it (a summary and a detail).
fn import_error(summary: &str, detail: String) -> ProviderError {
    ProviderError {
        message: format!("{summary}: {detail}"),
        diags: vec![super::ProviderDiag {
            error: true,
            summary: summary.to_string(),
            detail,
            path: Vec::new(),
        }],
    }
}

impl RandomInstance {
    /// The object hashicorp/random's importer makes of an id: `random_id` from its URL-safe
    /// base64 (`PREFIX,B64` with a prefix), `random_string`/`random_password` from the
    /// result itself, `random_integer` from `RESULT,MIN,MAX[,SEED]`, `random_uuid` from the
    /// UUID, `random_bytes` from standard base64. `random_pet`, `random_shuffle` and the
    /// other UUID types cannot be imported (as in hashicorp/random).
    fn imported(&self, type_: &str, id: &str) -> ProviderResult<Value> {
        let schema = self
            .types
            .get(type_)
            .ok_or_else(|| schema_util::unknown_type(PACKAGE, "resource", type_))?;
        let mut m: ValueMap = ValueMap::new();
        let mut set = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        match type_ {
            ID => {
                let (prefix, b64) = match id.rfind(',') {
                    Some(i) => (&id[..i], &id[i + 1..]),
                    None => ("", id),
                };
                let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(b64)
                    .map_err(|e| {
                        import_error(
                            "Import Random ID Error",
                            format!("While attempting to import a random id there was a decoding error.\n\nOriginal Error: {e}"),
                        )
                    })?;
                let std = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                set("id", Value::string(b64));
                set("byte_length", Value::int(bytes.len() as i64));
                if !prefix.is_empty() {
                    set("prefix", Value::string(prefix));
                }
                set("b64_url", Value::string(format!("{prefix}{b64}")));
                set("b64_std", Value::string(format!("{prefix}{std}")));
                set("hex", Value::string(format!("{prefix}{hex}")));
                set(
                    "dec",
                    Value::string(format!("{prefix}{}", bytes_to_decimal(&bytes))),
                );
            }
            STRING | PASSWORD => {
                set("result", Value::string(id));
                set("length", Value::int(id.chars().count() as i64));
                if type_ == PASSWORD {
                    let mut salt = [0u8; 16];
                    self.host
                        .rng(|| format!("{type_} import {id}"))
                        .fill_bytes(&mut salt);
                    let hash = bcrypt::hash_with_salt(id, 10, salt)
                        .map_err(|e| ProviderError(format!("random_password: bcrypt: {e}")))?
                        .to_string();
                    set("bcrypt_hash", Value::string(hash));
                    set("id", Value::string("none"));
                } else {
                    set("id", Value::string(id));
                }
            }
            INTEGER => {
                let parts: Vec<&str> = id.split(',').collect();
                if parts.len() != 3 && parts.len() != 4 {
                    return Err(import_error(
                        "Invalid import usage: expecting {value},{min},{max} or {value},{min},{max},{seed}",
                        format!("Got: {id:?}"),
                    ));
                }
                let mut n = [0i64; 3];
                for (i, p) in parts.iter().take(3).enumerate() {
                    n[i] = p.trim().parse().map_err(|e| {
                        import_error(
                            "Import Random Integer Error",
                            format!("The value supplied could not be parsed as an integer.\n\nOriginal Error: strconv.ParseInt: parsing {p:?}: {e}"),
                        )
                    })?;
                }
                set("result", Value::int(n[0]));
                set("min", Value::int(n[1]));
                set("max", Value::int(n[2]));
                if let Some(seed) = parts.get(3) {
                    set("seed", Value::string(*seed));
                }
                set("id", Value::string(parts[0]));
            }
            UUID => {
                let u = uuid::Uuid::parse_str(id).map_err(|e| {
                    import_error(
                        "Import Random UUID Error",
                        format!("While attempting to import a random uuid there was a parsing error.\n\nOriginal Error: {e}"),
                    )
                })?;
                let text = u.hyphenated().to_string();
                set("result", Value::string(&text));
                set("id", Value::string(text));
            }
            BYTES => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(id)
                    .map_err(|e| {
                        import_error(
                            "Import Random Bytes Error",
                            format!("While attempting to import a random bytes there was a decoding error.\n\nOriginal Error: {e}"),
                        )
                    })?;
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                set("base64", Value::string(id));
                set("hex", Value::string(hex));
                set("length", Value::int(bytes.len() as i64));
            }
            _ => return Err(super::import_unsupported(type_)),
        }
        Ok(Value::Object(schema.conform(&Value::Object(m))?))
    }
}

#[async_trait]
impl Configured for RandomInstance {
    /// `ephemeral "random_password"`: a new password each time it is opened (plan and apply
    /// each open it), never stored; nothing to renew or close.
    async fn open_ephemeral(&self, type_: &str, config: &Value) -> ProviderResult<Opened> {
        if type_ != PASSWORD {
            return Err(schema_util::unknown_type(
                PACKAGE,
                "ephemeral resource",
                type_,
            ));
        }
        let mut c = self.ephemeral.conform(config)?;
        let mut rng = self
            .host
            .rng(|| format!("ephemeral {type_} {}", config.to_json()));
        let s = random_string(&mut rng, &c)?;
        c.insert(
            "bcrypt_hash".into(),
            Value::string(bcrypt_hash(&mut rng, &s)?),
        );
        c.insert("result".into(), Value::string(s));
        Ok(Opened {
            result: Value::Object(c),
            renew_at: None,
            private: None,
            warnings: Vec::new(),
        })
    }
    fn plan(&self, type_: &str, prior: Option<&Value>, config: &Value) -> ProviderResult<Planned> {
        self.types
            .get(type_)
            .ok_or_else(|| schema_util::unknown_type(PACKAGE, "resource", type_))?
            .plan(prior, config)
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        let (new_state, error) = match request {
            ApplyRequest::Create { type_, planned, .. } => match self.generate(&type_, &planned) {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e)),
            },
            // Every argument forces replacement: an update keeps the values made at create.
            ApplyRequest::Update { prior, planned, .. } => {
                match schema_util::require_known(&planned, "the planned value") {
                    Ok(()) => (Some(planned), None),
                    Err(e) => (Some(prior), Some(e)),
                }
            }
            ApplyRequest::Delete { .. } => (None, None),
        };
        ApplyResponse { new_state, error }
    }

    async fn import(&self, type_: &str, id: &str) -> ProviderResult<Vec<super::Imported>> {
        Ok(vec![super::Imported {
            type_: type_.to_string(),
            state: self.imported(type_, id)?,
            meta: super::ObjectMeta::default(),
        }])
    }

    async fn read(&self, type_: &str, state: &Value) -> ProviderResult<Option<Value>> {
        if !self.types.contains_key(type_) {
            return Err(schema_util::unknown_type(PACKAGE, "resource", type_));
        }
        Ok(Some(state.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::testkit::{assert_agrees, attr, configure, create, map, obj, s};

    #[test]
    fn decimal_of_bytes() {
        assert_eq!(bytes_to_decimal(&[]), "0");
        assert_eq!(bytes_to_decimal(&[0, 0]), "0");
        assert_eq!(bytes_to_decimal(&[1, 0]), "256");
        assert_eq!(
            bytes_to_decimal(&[0xff; 10]),
            "1208925819614629174706175" // 2^80 - 1
        );
    }

    #[tokio::test]
    async fn random_id_encodings_agree() {
        let p = configure(&RandomProvider::new(Host::default())).await;
        let cfg = obj(&[("byte_length", Value::int(4)), ("prefix", s("p-"))]);
        let (plan, st) = create(&*p, ID, &cfg).await;
        assert_agrees(&plan.planned, &st);
        let hex = attr(&st, "hex")
            .strip_prefix("p-")
            .expect("prefix")
            .to_string();
        assert_eq!(hex.len(), 8);
        let bytes: Vec<u8> = (0..4)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        assert_eq!(attr(&st, "id"), url);
        assert_eq!(attr(&st, "b64_url"), format!("p-{url}"));
        assert_eq!(
            attr(&st, "b64_std"),
            format!(
                "p-{}",
                base64::engine::general_purpose::STANDARD.encode(&bytes)
            )
        );
        let dec = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        assert_eq!(attr(&st, "dec"), format!("p-{dec}"));
    }

    #[tokio::test]
    async fn random_string_honours_classes_and_minimums() {
        let p = configure(&RandomProvider::new(Host::default())).await;
        let cfg = obj(&[
            ("length", Value::int(12)),
            ("special", Value::Bool(false)),
            ("upper", Value::Bool(false)),
            ("min_numeric", Value::int(5)),
        ]);
        for _ in 0..20 {
            let (plan, st) = create(&*p, STRING, &cfg).await;
            assert_agrees(&plan.planned, &st);
            let r = attr(&st, "result");
            assert_eq!(r.chars().count(), 12);
            assert!(
                r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{r}"
            );
            assert!(r.chars().filter(char::is_ascii_digit).count() >= 5, "{r}");
            assert_eq!(attr(&st, "id"), r);
        }
        let no_digits = obj(&[("length", Value::int(40)), ("number", Value::Bool(false))]);
        let (_, st) = create(&*p, STRING, &no_digits).await;
        assert!(!attr(&st, "result").chars().any(|c| c.is_ascii_digit()));
        let only = obj(&[
            ("length", Value::int(30)),
            ("upper", Value::Bool(false)),
            ("lower", Value::Bool(false)),
            ("numeric", Value::Bool(false)),
            ("override_special", s("_é")),
        ]);
        let (_, st) = create(&*p, STRING, &only).await;
        assert!(attr(&st, "result").chars().all(|c| c == '_' || c == 'é'));
    }

    #[tokio::test]
    async fn random_password_is_sensitive_and_its_id_is_none() {
        let provider = RandomProvider::new(Host::default());
        let schema = &provider.schema().resources[PASSWORD];
        assert!(schema.attributes["result"].sensitive);
        assert!(!provider.schema().resources[STRING].attributes["result"].sensitive);
        let p = configure(&provider).await;
        let (_, st) = create(&*p, PASSWORD, &obj(&[("length", Value::int(24))])).await;
        assert_eq!(attr(&st, "id"), "none");
        assert_eq!(attr(&st, "result").chars().count(), 24);
    }

    #[tokio::test]
    async fn keepers_and_arguments_force_replacement_defaults_do_not() {
        let p = configure(&RandomProvider::new(Host::default())).await;
        let cfg = |k: &str| obj(&[("length", Value::int(8)), ("keepers", map(&[("k", k)]))]);
        let (_, prior) = create(&*p, STRING, &cfg("1")).await;
        let same = p.plan(STRING, Some(&prior), &cfg("1")).expect("plan");
        assert_eq!(same.planned, prior, "defaults are not changes");
        let rep = p.plan(STRING, Some(&prior), &cfg("2")).expect("plan");
        assert_eq!(rep.requires_replace, ["keepers"]);
        assert!(rep.planned.get("result").is_some_and(Value::is_unknown));
        let rep = p
            .plan(
                STRING,
                Some(&prior),
                &obj(&[("length", Value::int(9)), ("keepers", map(&[("k", "1")]))]),
            )
            .expect("plan");
        assert_eq!(rep.requires_replace, ["length"]);
    }

    #[tokio::test]
    async fn random_integer_in_range_and_seeded_is_stable() {
        let p = configure(&RandomProvider::new(Host::default())).await;
        for _ in 0..20 {
            let (_, st) = create(
                &*p,
                INTEGER,
                &obj(&[("min", Value::int(3)), ("max", Value::int(5))]),
            )
            .await;
            let n = st
                .get("result")
                .and_then(Value::as_number)
                .and_then(|n| n.to_i64());
            assert!(n.is_some_and(|n| (3..=5).contains(&n)), "{n:?}");
            assert_eq!(
                attr(&st, "id"),
                n.map(|n| n.to_string()).unwrap_or_default()
            );
        }
        let seeded = obj(&[
            ("min", Value::int(1)),
            ("max", Value::int(1_000_000)),
            ("seed", s("x")),
        ]);
        let (_, a) = create(&*p, INTEGER, &seeded).await;
        let (_, b) = create(&*p, INTEGER, &seeded).await;
        assert_eq!(a.get("result"), b.get("result"));
    }

    #[tokio::test]
    async fn cairn_random_seed_makes_values_reproducible() {
        let seeded = RandomProvider::new(Host::default().with_env("CAIRN_RANDOM_SEED", "7"));
        let p = configure(&seeded).await;
        let q = configure(&RandomProvider::new(
            Host::default().with_env("CAIRN_RANDOM_SEED", "7"),
        ))
        .await;
        let cfg = |k: &str| obj(&[("length", Value::int(16)), ("keepers", map(&[("k", k)]))]);
        let (_, a) = create(&*p, PASSWORD, &cfg("1")).await;
        let (_, b) = create(&*q, PASSWORD, &cfg("1")).await;
        assert_eq!(a.get("result"), b.get("result"), "same seed and config");
        let (_, c) = create(&*p, PASSWORD, &cfg("2")).await;
        assert_ne!(a.get("result"), c.get("result"), "another config");
        let free = configure(&RandomProvider::new(Host::default())).await;
        let (_, d) = create(&*free, PASSWORD, &cfg("1")).await;
        let (_, e) = create(&*free, PASSWORD, &cfg("1")).await;
        assert_ne!(d.get("result"), e.get("result"), "unseeded values differ");
    }

    #[tokio::test]
    async fn random_pet_has_the_shape_of_hashicorps() {
        let p = configure(&RandomProvider::new(Host::default())).await;
        let (plan, st) = create(&*p, PET, &obj(&[])).await;
        assert_agrees(&plan.planned, &st);
        let id = attr(&st, "id");
        assert_eq!(id.split('-').count(), 2, "{id}");
        assert_eq!(id, id.to_lowercase());
        let cfg = obj(&[
            ("length", Value::int(4)),
            ("prefix", s("srv")),
            ("separator", s("_")),
        ]);
        let (_, st) = create(&*p, PET, &cfg).await;
        let id = attr(&st, "id");
        let words: Vec<&str> = id.split('_').collect();
        assert_eq!(words.len(), 5, "{id}");
        assert_eq!(words[0], "srv");
        assert!(p
            .plan(PET, Some(&st), &cfg)
            .expect("plan")
            .requires_replace
            .is_empty());
    }

    #[tokio::test]
    async fn random_shuffle_permutes_cuts_and_repeats() {
        let p = configure(&RandomProvider::new(Host::default())).await;
        let input = Value::List(["a", "b", "c"].map(s).to_vec());
        let list = |st: &Value| -> Vec<String> {
            st.get("result")
                .and_then(Value::elements)
                .expect("result")
                .iter()
                .map(|v| v.as_str().expect("string").to_string())
                .collect()
        };
        let (plan, st) = create(&*p, SHUFFLE, &obj(&[("input", input.clone())])).await;
        assert_agrees(&plan.planned, &st);
        let mut r = list(&st);
        r.sort();
        assert_eq!(r, ["a", "b", "c"]);
        assert_eq!(attr(&st, "id"), "-");
        let (_, st) = create(
            &*p,
            SHUFFLE,
            &obj(&[("input", input.clone()), ("result_count", Value::int(7))]),
        )
        .await;
        let r = list(&st);
        assert_eq!(r.len(), 7);
        for w in ["a", "b", "c"] {
            let n = r.iter().filter(|x| *x == w).count();
            assert!((2..=3).contains(&n), "{r:?}");
        }
        let seeded = obj(&[
            ("input", input),
            ("seed", s("x")),
            ("result_count", Value::int(2)),
        ]);
        let (_, a) = create(&*p, SHUFFLE, &seeded).await;
        let (_, b) = create(&*p, SHUFFLE, &seeded).await;
        assert_eq!(list(&a), list(&b));
        assert_eq!(list(&a).len(), 2);
    }

    /// hashicorp/random's import ids: each imported object, planned against the configuration
    /// that would have made it, plans no change; malformed ids and types without import get
    /// hashicorp's errors.
    #[tokio::test]
    async fn imports_as_hashicorp_random() {
        let provider = RandomProvider::new(Host::default());
        let p = configure(&provider).await;
        let n = Value::int;
        type Case<'a> = (&'a str, &'a str, Value, &'a [(&'a str, &'a str)]);
        let cases: Vec<Case> = vec![
            (
                ID,
                "p-,AAECAw",
                obj(&[("byte_length", n(4)), ("prefix", s("p-"))]),
                &[("id", "AAECAw"), ("hex", "p-00010203"), ("dec", "p-66051")],
            ),
            (
                STRING,
                "abc",
                obj(&[("length", n(3))]),
                &[("id", "abc"), ("result", "abc")],
            ),
            (
                PASSWORD,
                "s3cret",
                obj(&[("length", n(6))]),
                &[("id", "none"), ("result", "s3cret")],
            ),
            (
                INTEGER,
                "7,1,9,seed",
                obj(&[("min", n(1)), ("max", n(9)), ("seed", s("seed"))]),
                &[("id", "7")],
            ),
            (
                UUID,
                "6BA7B810-9DAD-11D1-80B4-00C04FD430C8",
                obj(&[]),
                &[("id", "6ba7b810-9dad-11d1-80b4-00c04fd430c8")],
            ),
            (
                BYTES,
                "AAEC",
                obj(&[("length", n(3))]),
                &[("hex", "000102")],
            ),
        ];
        for (t, id, config, want) in cases {
            let found = p.import(t, id).await.unwrap_or_else(|e| panic!("{t}: {e}"));
            assert_eq!(found.len(), 1, "{t}");
            let st = &found[0].state;
            for (k, v) in want {
                assert_eq!(attr(st, k), *v, "{t}.{k}");
            }
            let plan = p.plan(t, Some(st), &config).expect("plan");
            assert!(plan.requires_replace.is_empty(), "{t}: {plan:?}");
            assert_eq!(&plan.planned, st, "{t}: no change");
        }
        let bcrypt = p.import(PASSWORD, "s3cret").await.unwrap();
        let hash = attr(&bcrypt[0].state, "bcrypt_hash");
        assert!(bcrypt::verify("s3cret", hash).unwrap());
        let e = p.import(INTEGER, "1,2").await.unwrap_err();
        assert_eq!(
            e.diags[0].summary,
            "Invalid import usage: expecting {value},{min},{max} or {value},{min},{max},{seed}"
        );
        assert!(p.import(ID, "!!").await.is_err());
        for t in [PET, SHUFFLE, UUID4, UUID7] {
            let e = p.import(t, "x").await.unwrap_err();
            assert_eq!(e.message, format!("resource {t} doesn't support import"));
        }
    }

    #[tokio::test]
    async fn random_uuids_and_bytes() {
        let provider = RandomProvider::new(Host::default());
        let block = &provider.schema().resources[BYTES];
        assert!(block.attributes["base64"].sensitive && block.attributes["hex"].sensitive);
        let p = configure(&provider).await;
        for (t, version) in [(UUID, 4), (UUID4, 4), (UUID7, 7)] {
            let (plan, st) = create(&*p, t, &obj(&[])).await;
            assert_agrees(&plan.planned, &st);
            let u = uuid::Uuid::parse_str(attr(&st, "result")).expect("a uuid");
            assert_eq!(u.get_version_num(), version, "{t}");
            assert_eq!(attr(&st, "id"), attr(&st, "result"));
        }
        let (_, st) = create(&*p, BYTES, &obj(&[("length", Value::int(16))])).await;
        let hex = attr(&st, "hex");
        assert_eq!(hex.len(), 32);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(attr(&st, "base64"))
            .expect("base64");
        let again: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(again, hex);
        assert!(st.get("id").is_none(), "random_bytes has no id");
    }

    #[tokio::test]
    async fn random_password_bcrypt_hash_verifies_the_result() {
        let provider = RandomProvider::new(Host::default());
        assert!(provider.schema().resources[PASSWORD].attributes["bcrypt_hash"].sensitive);
        let p = configure(&provider).await;
        let (plan, st) = create(&*p, PASSWORD, &obj(&[("length", Value::int(12))])).await;
        assert_agrees(&plan.planned, &st);
        let hash = attr(&st, "bcrypt_hash");
        assert!(bcrypt::verify(attr(&st, "result"), hash).expect("a bcrypt hash"));
    }

    #[test]
    fn validation_messages() {
        let p = RandomProvider::new(Host::default());
        let msgs = |t: &str, c: Value| -> Vec<String> {
            p.validate(Mode::Managed, t, &c)
                .iter()
                .map(|d| d.detail.clone())
                .collect()
        };
        assert_eq!(
            msgs(
                INTEGER,
                obj(&[("min", Value::int(5)), ("max", Value::int(1))])
            ),
            ["The minimum (5) must be smaller than or equal to the maximum (1)."]
        );
        assert_eq!(
            msgs(
                STRING,
                obj(&[("length", Value::int(2)), ("min_upper", Value::int(3))])
            ),
            [
                "Argument \"length\" (2) must be at least min_upper + min_lower + min_numeric + \
              min_special (3)."
            ]
        );
        assert_eq!(
            msgs(ID, obj(&[("byte_length", Value::int(0))])),
            ["Argument \"byte_length\" must be a whole number of at least 1, got: 0."]
        );
        assert!(msgs(STRING, obj(&[("length", Value::Unknown(Type::Number))])).is_empty());
    }
}
