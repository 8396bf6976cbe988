//! Encryption at rest: OpenTofu's `encryption` block, resolved (`terraform { encryption {
//! key_provider "pbkdf2" "k" { … } method "aes_gcm" "m" { keys = key_provider.pbkdf2.k }
//! state { method = method.aes_gcm.m  fallback { … } } plan { … } } }`).
//!
//! An [`Encryption`] is one target's (the state's or saved plans') methods: the primary one,
//! which writes, and the fallbacks, which only read (key rotation, and `unencrypted` for a
//! migration). It seals and opens byte strings; the log core seals every record and every
//! checkpoint part with it, so every store (sled, PostgreSQL, S3) and the fault journals
//! (`pg-journal`, `s3-journal`, which keep records as stored) hold only sealed bytes.
//!
//! # Sealed bytes
//!
//! ```text
//! 0xC1 "CE" version(1) | key provider address (u8 length, bytes)
//! | hash (1 = sha256, 2 = sha512) | iterations u32 LE | key length u8
//! | salt (u8 length, bytes) | nonce (12) | AES-GCM ciphertext and tag
//! ```
//!
//! 0xC1 is the one byte MessagePack never uses, so a sealed record is never taken for a
//! plaintext one (MessagePack records up to schema v5, v6 records starting `0x91 0x06`) nor
//! the other way round. The header is what a reader needs to
//! derive the key (the passphrase aside) and is authenticated with the ciphertext (it is part
//! of the additional data, after the method's `aad`). The salt is made once per key and kept:
//! a writer that opens a log whose records it can read with its primary key reuses their
//! salt, so PBKDF2's deliberate cost (600,000 rounds by default) is paid once per process
//! and key, not per record.
//!
//! The crypto is RustCrypto's (`aes-gcm`, `pbkdf2`, `sha2`); nothing here is hand-rolled.

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::{Aes128, Aes192, Aes256};
use aes_gcm::AesGcm;
use rand::{RngCore, SeedableRng};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const MAGIC: [u8; 4] = [0xC1, b'C', b'E', 1];
const NONCE: usize = 12;

/// Whether `bytes` are sealed (written under an encryption method).
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// PBKDF2's hash function (`hash_function`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn code(self) -> u8 {
        match self {
            Hash::Sha256 => 1,
            Hash::Sha512 => 2,
        }
    }

    fn of_code(c: u8) -> Option<Hash> {
        match c {
            1 => Some(Hash::Sha256),
            2 => Some(Hash::Sha512),
            _ => None,
        }
    }

    /// The name OpenTofu's `hash_function` takes.
    pub fn parse(s: &str) -> Option<Hash> {
        match s {
            "sha256" => Some(Hash::Sha256),
            "sha512" => Some(Hash::Sha512),
            _ => None,
        }
    }
}

/// A `key_provider "pbkdf2"`: a key derived from a passphrase.
#[derive(Clone)]
pub struct Pbkdf2 {
    /// `key_provider.pbkdf2.NAME`.
    pub address: String,
    pub passphrase: String,
    /// 16, 24 or 32 (AES-128, -192, -256).
    pub key_length: usize,
    pub iterations: u32,
    pub salt_length: usize,
    pub hash: Hash,
}

impl std::fmt::Debug for Pbkdf2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the passphrase.
        write!(f, "Pbkdf2({})", self.address)
    }
}

/// An encryption method.
#[derive(Clone, Debug)]
pub enum Method {
    /// `method "unencrypted" "NAME"`: plaintext (migrating into or out of encryption).
    Unencrypted { address: String },
    /// `method "aes_gcm" "NAME" { keys = key_provider.… aad = […] }`.
    AesGcm {
        address: String,
        keys: Pbkdf2,
        aad: Vec<u8>,
    },
}

impl Method {
    /// `method.TYPE.NAME`.
    pub fn address(&self) -> &str {
        match self {
            Method::Unencrypted { address } | Method::AesGcm { address, .. } => address,
        }
    }
}

/// What a derived key is derived from (the passphrase too, so that two providers of one
/// name with different passphrases never share a cached key).
#[derive(Clone, PartialEq, Eq, Hash)]
struct KeySpec {
    provider: String,
    passphrase: String,
    hash: Hash,
    iterations: u32,
    key_length: usize,
    salt: Vec<u8>,
}

impl KeySpec {
    /// The key a pbkdf2 key provider derives, as configured now, for `salt`.
    fn fresh(keys: &Pbkdf2, salt: Vec<u8>) -> KeySpec {
        KeySpec {
            provider: keys.address.clone(),
            passphrase: keys.passphrase.clone(),
            hash: keys.hash,
            iterations: keys.iterations,
            key_length: keys.key_length,
            salt,
        }
    }
}

#[derive(Clone)]
enum Cipher {
    A128(AesGcm<Aes128, U12>),
    A192(AesGcm<Aes192, U12>),
    A256(AesGcm<Aes256, U12>),
}

impl Cipher {
    fn new(key: &[u8]) -> Result<Cipher, String> {
        let bad = |_| format!("a key of {} bytes fits no AES variant", key.len());
        Ok(match key.len() {
            16 => Cipher::A128(AesGcm::new_from_slice(key).map_err(bad)?),
            24 => Cipher::A192(AesGcm::new_from_slice(key).map_err(bad)?),
            32 => Cipher::A256(AesGcm::new_from_slice(key).map_err(bad)?),
            n => {
                return Err(format!(
                    "a key of {n} bytes fits no AES variant (16, 24 or 32)"
                ))
            }
        })
    }

    /// Encrypts `buf` in place; the tag.
    fn seal_in_place(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], String> {
        use aes_gcm::aead::AeadInPlace;
        let n = nonce.into();
        match self {
            Cipher::A128(c) => c.encrypt_in_place_detached(n, aad, buf),
            Cipher::A192(c) => c.encrypt_in_place_detached(n, aad, buf),
            Cipher::A256(c) => c.encrypt_in_place_detached(n, aad, buf),
        }
        .map(Into::into)
        .map_err(|_| "AES-GCM refused to encrypt".to_string())
    }

    fn open(&self, nonce: &[u8], msg: &[u8], aad: &[u8]) -> Option<Vec<u8>> {
        let p = Payload { msg, aad };
        let n = nonce.into();
        match self {
            Cipher::A128(c) => c.decrypt(n, p),
            Cipher::A192(c) => c.decrypt(n, p),
            Cipher::A256(c) => c.decrypt(n, p),
        }
        .ok()
    }
}

fn derive(spec: &KeySpec) -> Result<Cipher, String> {
    let mut key = vec![0u8; spec.key_length];
    match spec.hash {
        Hash::Sha256 => pbkdf2::pbkdf2_hmac::<sha2::Sha256>(
            spec.passphrase.as_bytes(),
            &spec.salt,
            spec.iterations,
            &mut key,
        ),
        Hash::Sha512 => pbkdf2::pbkdf2_hmac::<sha2::Sha512>(
            spec.passphrase.as_bytes(),
            &spec.salt,
            spec.iterations,
            &mut key,
        ),
    }
    let c = Cipher::new(&key);
    key.iter_mut().for_each(|b| *b = 0);
    c
}

/// The header of sealed bytes, parsed.
struct Header<'a> {
    provider: &'a str,
    hash: Hash,
    iterations: u32,
    key_length: usize,
    salt: &'a [u8],
    nonce: &'a [u8],
    /// The header's bytes (authenticated).
    raw: &'a [u8],
    body: &'a [u8],
}

fn parse_header(b: &[u8]) -> Option<Header<'_>> {
    let mut at = MAGIC.len();
    let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
        let s = b.get(*at..*at + n)?;
        *at += n;
        Some(s)
    };
    let plen = *take(&mut at, 1)?.first()? as usize;
    let provider = std::str::from_utf8(take(&mut at, plen)?).ok()?;
    let hash = Hash::of_code(*take(&mut at, 1)?.first()?)?;
    let iterations = u32::from_le_bytes(take(&mut at, 4)?.try_into().ok()?);
    let key_length = *take(&mut at, 1)?.first()? as usize;
    let slen = *take(&mut at, 1)?.first()? as usize;
    let salt = take(&mut at, slen)?;
    let raw_end = at;
    let nonce = take(&mut at, NONCE)?;
    Some(Header {
        provider,
        hash,
        iterations,
        key_length,
        salt,
        nonce,
        raw: &b[..raw_end],
        body: &b[at..],
    })
}

/// A key derived (or being derived) once for all its users.
type KeySlot = Arc<std::sync::OnceLock<Result<Cipher, String>>>;

/// The key a writer seals with: its header (without the nonce) and its cipher.
struct WriteKey {
    header: Vec<u8>,
    cipher: Cipher,
    /// The additional data authenticated with every record: the method's `aad`, then the
    /// header.
    aad: Vec<u8>,
}

impl WriteKey {
    fn new(header: Vec<u8>, cipher: Cipher, method_aad: &[u8]) -> WriteKey {
        let aad = [method_aad, &header].concat();
        WriteKey {
            header,
            cipher,
            aad,
        }
    }
}

/// Parses what [`Encryption::hint`] wrote: provider address, hash, iterations, key length,
/// salt.
fn parse_hint(h: &str) -> Option<(String, Hash, u32, usize, Vec<u8>)> {
    let mut parts = h.split_whitespace();
    let (provider, hash, iterations, key_length, salt) = (
        parts.next()?,
        Hash::parse(parts.next()?)?,
        parts.next()?.parse::<u32>().ok()?,
        parts.next()?.parse::<usize>().ok()?,
        parts.next()?,
    );
    let salt = (0..salt.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(salt.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((provider.to_string(), hash, iterations, key_length, salt))
}

/// Keys [`derive_ahead`] derives, before any [`Encryption`] exists: an `Encryption` that
/// needs one of them takes its slot over (waiting for it if it is still being derived).
fn ahead() -> &'static Mutex<HashMap<KeySpec, KeySlot>> {
    static AHEAD: std::sync::OnceLock<Mutex<HashMap<KeySpec, KeySlot>>> =
        std::sync::OnceLock::new();
    AHEAD.get_or_init(Default::default)
}

static AHEAD_USED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many keys [`derive_ahead`] started were taken over by an [`Encryption`] in this
/// process (for `CAIRN_LOG=debug` and the tests).
pub fn keys_derived_ahead_used() -> usize {
    AHEAD_USED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The fresh salts [`derive_ahead`] derives keys for (a new log's first write key), with the
/// key provider they were made for (passphrase and parameters).
fn ahead_salts() -> &'static Mutex<Vec<(KeySpec, usize)>> {
    static SALTS: std::sync::OnceLock<Mutex<Vec<(KeySpec, usize)>>> = std::sync::OnceLock::new();
    SALTS.get_or_init(Default::default)
}

/// The fresh salt [`derive_ahead`] made for `keys` exactly (passphrase, hash, iterations, key
/// and salt length), taken once.
fn take_ahead_salt(keys: &Pbkdf2) -> Option<Vec<u8>> {
    let mut salts = ahead_salts().lock().expect("salts derived ahead");
    let i = salts.iter().position(|(spec, salt_length)| {
        spec.provider == keys.address
            && spec.passphrase == keys.passphrase
            && spec.hash == keys.hash
            && spec.iterations == keys.iterations
            && spec.key_length == keys.key_length
            && *salt_length == keys.salt_length
    })?;
    Some(salts.swap_remove(i).0.salt)
}

/// Starts deriving, on a thread of its own, a key this process will probably need, before
/// its `encryption` block is fully evaluated (the CLI reads the key provider from the root
/// module's files while the configuration loads): the key of the salt `hint` names (see
/// [`Encryption::hint`]) when it names `keys`' provider, else the key of a fresh salt for a
/// new log's first write. A guess only: an [`Encryption`] uses such a key only when its own
/// key provider asks for exactly that key (passphrase, parameters and salt), and takes the
/// fresh salt only for a key provider with exactly these parameters; a wrong guess costs the
/// derivation's time, never a wrong key.
pub fn derive_ahead(keys: &Pbkdf2, hint: Option<&str>) {
    let hinted = hint
        .and_then(parse_hint)
        .filter(|(provider, ..)| *provider == keys.address);
    let spec = match hinted {
        Some((provider, hash, iterations, key_length, salt)) => KeySpec {
            provider,
            passphrase: keys.passphrase.clone(),
            hash,
            iterations,
            key_length,
            salt,
        },
        None => {
            let mut salt = vec![0u8; keys.salt_length];
            rand::rngs::OsRng.fill_bytes(&mut salt);
            let spec = KeySpec::fresh(keys, salt);
            ahead_salts()
                .lock()
                .expect("salts derived ahead")
                .push((spec.clone(), keys.salt_length));
            spec
        }
    };
    let slot = {
        let mut ahead = ahead().lock().expect("keys derived ahead");
        if ahead.contains_key(&spec) {
            return;
        }
        ahead.entry(spec.clone()).or_default().clone()
    };
    let _ = std::thread::Builder::new()
        .name("cairn-kdf-ahead".into())
        .spawn(move || {
            slot.get_or_init(|| derive(&spec));
        });
}

/// One target's encryption (the state's or saved plans'): see the module docs.
pub struct Encryption {
    /// `state` or `plan`, for messages.
    target: &'static str,
    primary: Method,
    fallbacks: Vec<Method>,
    enforced: bool,
    /// Derived keys, each derived once: a key being derived (on the thread
    /// [`Encryption::prefetch`] starts) is waited for, never derived twice.
    keys: Mutex<HashMap<KeySpec, (KeySlot, bool)>>,
    write: Mutex<Option<Arc<WriteKey>>>,
    /// The salt of a new log's first write key, whose key [`Encryption::prefetch`] derives
    /// ahead.
    spare_salt: Mutex<Option<Vec<u8>>>,
    /// How many keys were derived (PBKDF2 runs), for the tests.
    derivations: std::sync::atomic::AtomicUsize,
    rng: Mutex<rand::rngs::StdRng>,
}

impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Encryption({}: {})", self.target, self.describe())
    }
}

impl Encryption {
    /// A target's encryption. `enforced` with an `unencrypted` primary method is refused.
    pub fn new(
        target: &'static str,
        primary: Method,
        fallbacks: Vec<Method>,
        enforced: bool,
    ) -> Result<Encryption, String> {
        if enforced && matches!(primary, Method::Unencrypted { .. }) {
            return Err(format!(
                "the {target} is enforced to be encrypted, but its method {} is unencrypted",
                primary.address()
            ));
        }
        Ok(Encryption {
            target,
            primary,
            fallbacks,
            enforced,
            keys: Mutex::new(HashMap::new()),
            write: Mutex::new(None),
            spare_salt: Mutex::new(None),
            derivations: std::sync::atomic::AtomicUsize::new(0),
            rng: Mutex::new(rand::rngs::StdRng::from_entropy()),
        })
    }

    /// How many keys this target derived itself (PBKDF2 runs), not counting those
    /// [`derive_ahead`] started.
    pub fn derivations(&self) -> usize {
        self.derivations.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether this target writes plaintext (its primary method is `unencrypted`).
    pub fn writes_plaintext(&self) -> bool {
        matches!(self.primary, Method::Unencrypted { .. })
    }

    /// Whether `enforced = true`.
    pub fn enforced(&self) -> bool {
        self.enforced
    }

    /// The methods in the order they are tried: `method.aes_gcm.new, then method.aes_gcm.old`.
    pub fn describe(&self) -> String {
        let mut s = self.primary.address().to_string();
        for f in &self.fallbacks {
            s.push_str(", then ");
            s.push_str(f.address());
        }
        s
    }

    fn methods(&self) -> impl Iterator<Item = &Method> {
        std::iter::once(&self.primary).chain(&self.fallbacks)
    }

    /// The slot of `spec`'s key: this target's, else one [`derive_ahead`] is filling (taken
    /// over, so the key is derived once), else a new one. And whether it was derived ahead.
    fn slot(&self, spec: &KeySpec) -> (KeySlot, bool) {
        let mut keys = self.keys.lock().expect("keys");
        if let Some(s) = keys.get(spec) {
            return s.clone();
        }
        let s = match ahead().lock().expect("keys derived ahead").get(spec) {
            Some(s) => {
                AHEAD_USED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (s.clone(), true)
            }
            None => (KeySlot::default(), false),
        };
        keys.insert(spec.clone(), s.clone());
        s
    }

    fn cipher(&self, spec: KeySpec) -> Result<Cipher, String> {
        let (slot, ahead) = self.slot(&spec);
        slot.get_or_init(|| {
            // Whoever comes first derives it (the thread `derive_ahead` started, or this
            // one); only this target's own keys are counted.
            if !ahead {
                self.derivations
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            derive(&spec)
        })
        .clone()
    }

    /// The primary key's spec for `salt`, if the primary method has a key.
    fn primary_spec(&self, salt: Vec<u8>) -> Option<KeySpec> {
        let Method::AesGcm { keys, .. } = &self.primary else {
            return None;
        };
        Some(KeySpec::fresh(keys, salt))
    }

    /// Starts deriving the keys this process will need, each on a thread of its own, so
    /// that PBKDF2's deliberate cost overlaps the work before the state is opened (loading
    /// the configuration) and each other: the key of the salt `hint` names (what
    /// [`Encryption::hint`] said of this state's log last time) with the method that has its
    /// key provider, primary or fallback; and unless that is the primary's, the primary's key
    /// for a fresh salt, the one its first write will take. Only those: a fallback the log
    /// was not written with is derived if a record asks for it. A key is derived once
    /// either way: whoever needs it first waits for its thread.
    pub fn prefetch(self: &Arc<Self>, hint: Option<&str>) {
        // The hint: the parameters and salt of the key the log was last written with.
        let hinted = hint.and_then(parse_hint);
        let mut specs = Vec::new();
        let mut primary_hinted = false;
        if let Some((provider, hash, iterations, key_length, salt)) = hinted {
            for (i, m) in self.methods().enumerate() {
                let Method::AesGcm { keys, .. } = m else {
                    continue;
                };
                if keys.address != provider {
                    continue;
                }
                // The primary's key only with its own parameters (else a new salt is
                // derived for writing, below); a fallback's with the log's (it only reads).
                let same = keys.hash == hash
                    && keys.iterations == iterations
                    && keys.key_length == key_length;
                if i == 0 && !same {
                    continue;
                }
                primary_hinted |= i == 0;
                specs.push(KeySpec {
                    provider: keys.address.clone(),
                    passphrase: keys.passphrase.clone(),
                    hash,
                    iterations,
                    key_length,
                    salt: salt.clone(),
                });
                // The log was written with one key: the first method that has it reads it.
                break;
            }
        }
        if !primary_hinted {
            if let Method::AesGcm { keys, .. } = &self.primary {
                // The fresh salt whose key `derive_ahead` is deriving for these parameters,
                // if any; else a new one.
                let salt = take_ahead_salt(keys).unwrap_or_else(|| {
                    let mut salt = vec![0u8; keys.salt_length];
                    self.rng.lock().expect("rng").fill_bytes(&mut salt);
                    salt
                });
                *self.spare_salt.lock().expect("spare salt") = Some(salt.clone());
                specs.extend(self.primary_spec(salt));
            }
        }
        // Each key on a thread of its own: a rotated log's old key (to read it) and the new
        // one (to write) are derived side by side.
        for spec in specs {
            let me = self.clone();
            let _ = std::thread::Builder::new()
                .name("cairn-kdf".into())
                .spawn(move || {
                    let _ = me.cipher(spec);
                });
        }
    }

    /// What [`Encryption::prefetch`] takes as its hint: the primary key's parameters and the
    /// salt this process writes with (none written or read: `None`). No secret: every sealed
    /// record's header holds the same in the clear.
    pub fn hint(&self) -> Option<String> {
        let w = self.write.lock().expect("write key").clone()?;
        let h = parse_header(&[w.header.as_slice(), &[0u8; NONCE]].concat()).map(|h| {
            (
                h.provider.to_string(),
                h.hash,
                h.iterations,
                h.key_length,
                h.salt.to_vec(),
            )
        })?;
        let hash = match h.1 {
            Hash::Sha256 => "sha256",
            Hash::Sha512 => "sha512",
        };
        let salt: String = h.4.iter().map(|b| format!("{b:02x}")).collect();
        Some(format!("{} {hash} {} {} {salt}", h.0, h.2, h.3))
    }

    /// Whether sealing now would not wait for a key: the write key is known, the primary
    /// method is `unencrypted`, or the key [`Encryption::prefetch`] derives for a new log's
    /// first write is done. A log that begins a run before that keeps the run's first
    /// records back until its next append or commit (`log.rs`), so that PBKDF2's cost
    /// overlaps the work after the state is open (planning) rather than holding it up.
    pub fn ready_to_seal(&self) -> bool {
        let Method::AesGcm { keys, .. } = &self.primary else {
            return true;
        };
        if self.write.lock().expect("write key").is_some() {
            return true;
        }
        let Some(salt) = self.spare_salt.lock().expect("spare salt").clone() else {
            // No key derived ahead: sealing derives it whenever it comes.
            return false;
        };
        let spec = KeySpec::fresh(keys, salt);
        self.slot(&spec).0.get().is_some()
    }

    fn write_key(&self) -> Result<Option<Arc<WriteKey>>, String> {
        let Method::AesGcm { keys, aad, .. } = &self.primary else {
            return Ok(None);
        };
        if let Some(k) = &*self.write.lock().expect("write key") {
            return Ok(Some(k.clone()));
        }
        // The salt whose key `prefetch` is deriving, if any; else a fresh one.
        let spare = self.spare_salt.lock().expect("spare salt").take();
        let salt = match spare {
            Some(s) if s.len() == keys.salt_length => s,
            _ => {
                let mut salt = vec![0u8; keys.salt_length];
                self.rng.lock().expect("rng").fill_bytes(&mut salt);
                salt
            }
        };
        let k = Arc::new(self.make_write_key(keys, aad, salt)?);
        *self.write.lock().expect("write key") = Some(k.clone());
        Ok(Some(k))
    }

    fn make_write_key(&self, keys: &Pbkdf2, aad: &[u8], salt: Vec<u8>) -> Result<WriteKey, String> {
        if keys.address.len() > 255 || salt.len() > 255 || keys.key_length > 255 {
            return Err(format!("{}: key parameters too long", keys.address));
        }
        let mut header = MAGIC.to_vec();
        header.push(keys.address.len() as u8);
        header.extend_from_slice(keys.address.as_bytes());
        header.push(keys.hash.code());
        header.extend_from_slice(&keys.iterations.to_le_bytes());
        header.push(keys.key_length as u8);
        header.push(salt.len() as u8);
        header.extend_from_slice(&salt);
        let cipher = self.cipher(KeySpec::fresh(keys, salt))?;
        Ok(WriteKey::new(header, cipher, aad))
    }

    /// Seals `plain` with the primary method into `out` (cleared first). With an
    /// `unencrypted` primary method, `out` is `plain`.
    pub fn seal_into(&self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        out.clear();
        let Some(k) = self.write_key()? else {
            out.extend_from_slice(plain);
            return Ok(());
        };
        let mut nonce = [0u8; NONCE];
        self.rng.lock().expect("rng").fill_bytes(&mut nonce);
        // header | nonce | plaintext encrypted in place | tag: no allocation per record.
        out.reserve(k.header.len() + NONCE + plain.len() + 16);
        out.extend_from_slice(&k.header);
        out.extend_from_slice(&nonce);
        let body = out.len();
        out.extend_from_slice(plain);
        let tag = k.cipher.seal_in_place(&nonce, &k.aad, &mut out[body..])?;
        out.extend_from_slice(&tag);
        Ok(())
    }

    /// [`seal_into`](Encryption::seal_into) into a new vector.
    pub fn seal(&self, plain: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        self.seal_into(plain, &mut out)?;
        Ok(out)
    }

    /// Opens bytes sealed by any of the methods (primary first), or plaintext when one of
    /// them is `unencrypted`. `what` names the bytes in the error ("state log record 42").
    /// A key the primary method opens is kept for writing, with its salt.
    pub fn open<'a>(
        &self,
        what: &str,
        bytes: &'a [u8],
    ) -> Result<std::borrow::Cow<'a, [u8]>, String> {
        if !is_sealed(bytes) {
            if let Some(m) = self
                .methods()
                .find(|m| matches!(m, Method::Unencrypted { .. }))
            {
                let _ = m;
                return Ok(std::borrow::Cow::Borrowed(bytes));
            }
            return Err(format!(
                "{what} is not encrypted, and the {target} encryption ({tried}) has no \
                 `unencrypted` method to read it with; to encrypt an unencrypted {target}, add \
                 `method \"unencrypted\" \"migrate\" {{}}` and `fallback {{ method = \
                 method.unencrypted.migrate }}` to the {target} block",
                target = self.target,
                tried = self.describe()
            ));
        }
        let Some(h) = parse_header(bytes) else {
            return Err(format!("{what} is encrypted but its header is damaged"));
        };
        let mut tried = Vec::new();
        for (i, m) in self.methods().enumerate() {
            let Method::AesGcm { address, keys, aad } = m else {
                continue;
            };
            if keys.address != h.provider {
                tried.push(format!("{address} (its key is {})", keys.address));
                continue;
            }
            let spec = KeySpec {
                provider: keys.address.clone(),
                passphrase: keys.passphrase.clone(),
                hash: h.hash,
                iterations: h.iterations,
                key_length: h.key_length,
                salt: h.salt.to_vec(),
            };
            let cipher = self.cipher(spec)?;
            let mut full_aad = aad.clone();
            full_aad.extend_from_slice(h.raw);
            match cipher.open(h.nonce, h.body, &full_aad) {
                Some(plain) => {
                    if i == 0
                        && keys.hash == h.hash
                        && keys.iterations == h.iterations
                        && keys.key_length == h.key_length
                    {
                        let mut w = self.write.lock().expect("write key");
                        if w.is_none() {
                            *w = Some(Arc::new(WriteKey::new(h.raw.to_vec(), cipher, aad)));
                        }
                    }
                    return Ok(std::borrow::Cow::Owned(plain));
                }
                None => tried.push(format!(
                    "{address} with {} (wrong passphrase, or the data was altered)",
                    keys.address
                )),
            }
        }
        Err(format!(
            "cannot decrypt {what}: it was encrypted with {}; tried {}",
            h.provider,
            if tried.is_empty() {
                format!("{} (no method that decrypts)", self.describe())
            } else {
                tried.join("; ")
            }
        ))
    }
}

/// Reads `bytes` that must not be sealed because no encryption is configured: an error
/// naming `what` and the key it was sealed with when they are.
pub fn require_plain(what: &str, bytes: &[u8]) -> Result<(), String> {
    if !is_sealed(bytes) {
        return Ok(());
    }
    let key = parse_header(bytes).map_or("an unknown key", |h| h.provider);
    Err(format!(
        "{what} is encrypted (with {key}), and no encryption is configured: add the \
         `terraform {{ encryption {{ … }} }}` block that names its key (or set TF_ENCRYPTION)"
    ))
}

/// Opens `bytes` with `enc`, or checks they are plaintext when there is none.
pub fn open_with<'a>(
    enc: Option<&Encryption>,
    what: &str,
    bytes: &'a [u8],
) -> Result<std::borrow::Cow<'a, [u8]>, String> {
    match enc {
        Some(e) => e.open(what, bytes),
        None => require_plain(what, bytes).map(|()| std::borrow::Cow::Borrowed(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, pass: &str) -> Pbkdf2 {
        Pbkdf2 {
            address: format!("key_provider.pbkdf2.{name}"),
            passphrase: pass.into(),
            key_length: 32,
            iterations: 1000,
            salt_length: 32,
            hash: Hash::Sha512,
        }
    }

    fn gcm(name: &str, k: Pbkdf2) -> Method {
        Method::AesGcm {
            address: format!("method.aes_gcm.{name}"),
            keys: k,
            aad: Vec::new(),
        }
    }

    #[test]
    fn seals_opens_and_names_the_key_on_failure() {
        let e = Encryption::new(
            "state",
            gcm("m", key("k", "correct horse battery")),
            vec![],
            true,
        )
        .unwrap();
        let sealed = e.seal(b"secret-value").unwrap();
        assert!(is_sealed(&sealed));
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(&*e.open("record 1", &sealed).unwrap(), b"secret-value");

        let wrong = Encryption::new(
            "state",
            gcm("m", key("k", "wrong passphrase!!")),
            vec![],
            true,
        )
        .unwrap();
        let err = wrong.open("record 1", &sealed).unwrap_err();
        assert!(
            err.contains("record 1") && err.contains("key_provider.pbkdf2.k"),
            "{err}"
        );
        assert!(err.contains("wrong passphrase"), "{err}");

        let plain_err = e.open("record 2", b"\x82plain").unwrap_err();
        assert!(plain_err.contains("not encrypted"), "{plain_err}");
        assert!(require_plain("record 1", &sealed)
            .unwrap_err()
            .contains("key_provider.pbkdf2.k"));
    }

    #[test]
    fn keys_derived_ahead_serve_the_log_and_are_derived_once() {
        let derived = |e: &Encryption| e.derivations.load(std::sync::atomic::Ordering::Relaxed);
        let m = || gcm("m", key("k", "correct horse battery"));
        // A new log: the first write takes the salt whose key was derived ahead.
        let first = Arc::new(Encryption::new("state", m(), vec![], true).unwrap());
        first.prefetch(None);
        let sealed = first.seal(b"one").unwrap();
        assert_eq!(derived(&first), 1);
        let hint = first.hint().expect("a write key");
        assert!(
            hint.starts_with("key_provider.pbkdf2.k sha512 1000 32 "),
            "{hint}"
        );
        // The next process, with the hint: the key of the log's salt, derived once, reads
        // the log and writes under the same salt.
        let next = Arc::new(Encryption::new("state", m(), vec![], true).unwrap());
        next.prefetch(Some(&hint));
        assert_eq!(&*next.open("record 1", &sealed).unwrap(), b"one");
        next.seal(b"two").unwrap();
        assert_eq!(next.hint().as_deref(), Some(hint.as_str()));
        assert_eq!(derived(&next), 1);
        // A hint for another key, or garbage, is ignored: a fresh salt is derived ahead.
        let other = Arc::new(Encryption::new("state", m(), vec![], true).unwrap());
        other.prefetch(Some("key_provider.pbkdf2.zz sha512 1000 32 00ff"));
        other.prefetch(Some("not a hint"));
        other.seal(b"x").unwrap();
        assert_ne!(other.hint().as_deref(), Some(hint.as_str()));
    }

    #[test]
    fn keys_derived_before_the_block_is_evaluated_are_taken_over_when_they_match() {
        let derived = |e: &Encryption| e.derivations.load(std::sync::atomic::Ordering::Relaxed);
        let m = |pass: &str| gcm("m", key("ahead", pass));
        // A new log: the fresh salt derived ahead is the one the first write takes.
        derive_ahead(&key("ahead", "passphrase derived ahead"), None);
        let first = Arc::new(
            Encryption::new("state", m("passphrase derived ahead"), vec![], true).unwrap(),
        );
        first.prefetch(None);
        let sealed = first.seal(b"one").unwrap();
        assert_eq!(
            derived(&first),
            0,
            "the key derived ahead was derived again"
        );
        let hint = first.hint().unwrap();
        // An existing log: the hinted salt's key, derived ahead, reads it and writes on.
        derive_ahead(&key("ahead", "passphrase derived ahead"), Some(&hint));
        let next = Arc::new(
            Encryption::new("state", m("passphrase derived ahead"), vec![], true).unwrap(),
        );
        next.prefetch(Some(&hint));
        assert_eq!(&*next.open("record 1", &sealed).unwrap(), b"one");
        next.seal(b"two").unwrap();
        assert_eq!(next.hint().as_deref(), Some(hint.as_str()));
        assert_eq!(derived(&next), 0);
        // A wrong guess (another passphrase) is never used: the real key is derived, and
        // a wrong passphrase still fails.
        derive_ahead(&key("ahead", "a guess that is wrong"), Some(&hint));
        derive_ahead(&key("ahead", "a guess that is wrong"), None);
        let other = Arc::new(
            Encryption::new("state", m("passphrase derived ahead"), vec![], true).unwrap(),
        );
        other.prefetch(Some(&hint));
        assert_eq!(&*other.open("record 1", &sealed).unwrap(), b"one");
        let wrong =
            Arc::new(Encryption::new("state", m("a guess that is wrong"), vec![], true).unwrap());
        wrong.prefetch(Some(&hint));
        assert!(wrong.open("record 1", &sealed).is_err());
        let fresh = Arc::new(
            Encryption::new(
                "state",
                gcm("m", key("other", "a guess that is wrong")),
                vec![],
                true,
            )
            .unwrap(),
        );
        fresh.prefetch(None);
        fresh.seal(b"x").unwrap();
        assert_eq!(
            derived(&fresh),
            1,
            "a salt made for another key provider was taken"
        );
    }

    #[test]
    fn a_rotated_logs_old_and_new_keys_are_derived_ahead_once_each() {
        let derived = |e: &Encryption| e.derivations.load(std::sync::atomic::Ordering::Relaxed);
        let old = Arc::new(
            Encryption::new(
                "state",
                gcm("old", key("old", "old passphrase 123")),
                vec![],
                true,
            )
            .unwrap(),
        );
        let sealed = old.seal(b"before the rotation").unwrap();
        let hint = old.hint().unwrap();
        let rotated = Arc::new(
            Encryption::new(
                "state",
                gcm("new", key("new", "new passphrase 456")),
                vec![gcm("old", key("old", "old passphrase 123"))],
                true,
            )
            .unwrap(),
        );
        rotated.prefetch(Some(&hint));
        assert_eq!(
            &*rotated.open("r", &sealed).unwrap(),
            b"before the rotation"
        );
        let new = rotated.seal(b"after").unwrap();
        assert_eq!(
            parse_header(&new).unwrap().provider,
            "key_provider.pbkdf2.new"
        );
        // The old key for reading, the new one (a fresh salt) for writing: nothing more.
        assert_eq!(derived(&rotated), 2);
    }

    #[test]
    fn rotation_reads_old_writes_new_and_reuses_salt() {
        let old = Encryption::new(
            "state",
            gcm("old", key("old", "old passphrase 123")),
            vec![],
            false,
        )
        .unwrap();
        let a = old.seal(b"first").unwrap();
        let b = old.seal(b"second").unwrap();
        // One salt per key: both records carry the same header.
        let ha = parse_header(&a).unwrap().raw.to_vec();
        assert_eq!(ha, parse_header(&b).unwrap().raw);
        let rotated = Encryption::new(
            "state",
            gcm("new", key("new", "new passphrase 456")),
            vec![gcm("old", key("old", "old passphrase 123"))],
            true,
        )
        .unwrap();
        assert_eq!(&*rotated.open("r", &a).unwrap(), b"first");
        let c = rotated.seal(b"third").unwrap();
        assert_eq!(
            parse_header(&c).unwrap().provider,
            "key_provider.pbkdf2.new"
        );
        assert!(old.open("r", &c).is_err());
        // A reopened writer adopts the salt it can read with its primary key.
        let again = Encryption::new(
            "state",
            gcm("new", key("new", "new passphrase 456")),
            vec![],
            true,
        )
        .unwrap();
        again.open("r", &c).unwrap();
        let d = again.seal(b"fourth").unwrap();
        assert_eq!(parse_header(&c).unwrap().raw, parse_header(&d).unwrap().raw);
    }

    #[test]
    fn unencrypted_fallback_reads_plaintext() {
        let e = Encryption::new(
            "state",
            gcm("m", key("k", "correct horse battery")),
            vec![Method::Unencrypted {
                address: "method.unencrypted.migrate".into(),
            }],
            false,
        )
        .unwrap();
        assert_eq!(&*e.open("r", b"\x82plain").unwrap(), b"\x82plain");
        assert!(Encryption::new(
            "state",
            Method::Unencrypted {
                address: "method.unencrypted.u".into()
            },
            vec![],
            true
        )
        .is_err());
    }
}
