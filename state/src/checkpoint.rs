//! Checkpoints: a snapshot and the sequence number it covers, in a file of its own — a derived
//! cache of the log that makes opening a large state fast.
//!
//! # Files
//!
//! `<state dir>/checkpoints/<seq, 20 digits>.ckpt`. A checkpoint is written to a `.tmp` name,
//! synced and renamed into place, so a file under its final name is complete (a crash leaves
//! at most a `.tmp` file, which the next writer removes). Checkpoints live beside the sled
//! database, not in it: in sled their megabytes went through its log (slowing the appends they
//! interleave with and sled's own recovery scan on open, and keeping dead copies on disk until
//! sled compacts), and a file reads in one call. The sled log keeps its own checksums; a file
//! carries a CRC-32 so that a damaged checkpoint is refused, never read as a different state.
//!
//! # Layout (format 6; 5 added the runs' counts of moved and forgotten objects, which a
//! format 4 checkpoint cannot know; 6 the instance key of a provider instance, OpenTofu's
//! provider `for_each`)
//!
//! ```text
//! "CAIRNCKP" | format u32 | seq u64 | part count u32
//! per part: length u64 | CRC-32 u32 | instance count u64
//! CRC-32 of all the above u32
//! parts…
//! ```
//!
//! Integers are little-endian. Part 0 is the snapshot without its resource instances
//! (rmp-serde, positional: small). Parts 1.. are slices of the resource instances in address
//! order, about [`SLICE`] each whatever the machine that wrote them. Opening is dominated by
//! them: each is read, checked and decoded by a thread of its own straight into its place in
//! one vector, which is then bulk-built into the map (`from_iter` finds it sorted). The newest
//! checkpoint is read while sled opens (`Checkpoints::read_newest_early`) and used if it is
//! still the right one once the lock is held.
//!
//! # The instance encoding
//!
//! Instances use a compact binary encoding written in this file (the `Code` trait): varint
//! lengths, one tag byte per `StoredValue`, strings as length and bytes, fields in declaration
//! order with no names — under half the size of the named rmp form, and decoded without
//! serde's per-field dispatch; small maps are built by ascending insertion. Within a slice
//! all addresses come first, then all instances: the addresses are then allocated next to
//! each other, so building the map (which compares neighbouring keys) reads a few contiguous
//! megabytes instead of chasing pointers through the whole state. The events keep rmp-serde
//! with named fields (the log is the durable record);
//! this encoding is only a cache, and a checkpoint that does not decode — damaged, or of
//! another format — is skipped with a warning and rebuilt from the log. Checkpoints that
//! older versions kept in the sled tree `checkpoints` are not read; a writer drops that tree.

use crate::addr::{
    InstanceKey, Mode, ModulePath, ModuleStep, ProviderAddr, ResourceAddr, ResourceInstanceAddr,
};
use crate::event::{ObjectMeta, ProviderRef, ResourceObject};
use crate::snapshot::{ResourceInstance, Snapshot};
use crate::stored_value::StoredValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The format this version writes and reads.
pub(crate) const FORMAT: u32 = 6;
const MAGIC: &[u8; 8] = b"CAIRNCKP";
/// Deepest nesting of values decoded (a damaged file cannot exhaust the stack).
const MAX_DEPTH: u32 = 1024;
/// Maps with at most this many entries are built by ascending insertion (no vector, no sort).
const SMALL_MAP: usize = 8;

/// The checkpoint files of one state directory.
pub(crate) struct Checkpoints {
    dir: PathBuf,
    crypt: Crypt,
}

/// The state's encryption, if any: every part of a checkpoint is sealed with it.
pub(crate) type Crypt = Option<std::sync::Arc<crate::crypt::Encryption>>;

impl Checkpoints {
    pub(crate) fn new(state_dir: &Path, crypt: Crypt) -> Checkpoints {
        Checkpoints {
            dir: state_dir.join("checkpoints"),
            crypt,
        }
    }

    fn path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("{seq:020}.ckpt"))
    }

    /// The seqs of the checkpoints present, ascending.
    pub(crate) fn seqs(&self) -> Vec<u64> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut seqs: Vec<u64> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name();
                let stem = name.to_str()?.strip_suffix(".ckpt")?;
                (stem.len() == 20).then(|| stem.parse().ok())?
            })
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// Reads and decodes the checkpoint at `seq`.
    pub(crate) fn read(&self, seq: u64) -> Result<Snapshot, String> {
        let file = fs::File::open(self.path(seq)).map_err(|e| e.to_string())?;
        let snapshot = decode_from(&file, self.crypt.as_deref())?;
        if snapshot.head != seq {
            return Err(format!("it holds the state at {}", snapshot.head));
        }
        Ok(snapshot)
    }

    /// The identity of the file of the checkpoint at `seq` (device, inode, size): a file is
    /// never rewritten in place, so an unchanged identity is an unchanged checkpoint.
    fn identity(&self, seq: u64) -> Option<(u64, u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(self.path(seq)).ok()?;
        Some((m.dev(), m.ino(), m.len()))
    }

    /// Starts reading the newest checkpoint on a thread of its own, before the database is
    /// open and locked (opening overlaps with decoding). What it reads is used only if
    /// [`Early::take`] finds it still the right one once the lock is held.
    pub(crate) fn read_newest_early(&self) -> std::thread::JoinHandle<Option<Early>> {
        let dir = self.dir.clone();
        let crypt = self.crypt.clone();
        std::thread::spawn(move || {
            let c = Checkpoints { dir, crypt };
            let seq = *c.seqs().last()?;
            let identity = c.identity(seq)?;
            let snapshot = c.read(seq).ok()?;
            Some(Early {
                seq,
                identity,
                snapshot,
            })
        })
    }

    /// Writes a checkpoint of `snapshot` (durably: synced, then renamed into place), then
    /// removes all but the newest `keep`.
    pub(crate) fn write(&self, snapshot: &Snapshot, keep: usize) -> io::Result<()> {
        let encoded = encode_parts(snapshot, self.crypt.as_deref()).map_err(io::Error::other)?;
        fs::create_dir_all(&self.dir)?;
        let path = self.path(snapshot.head);
        let tmp = path.with_extension("ckpt.tmp");
        {
            let mut f = fs::File::create(&tmp)?;
            encoded.write_to(&mut f)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        self.sync_dir();
        let seqs = self.seqs();
        for old in &seqs[..seqs.len().saturating_sub(keep)] {
            self.remove(*old)?;
        }
        Ok(())
    }

    /// Removes the checkpoint at `seq`.
    pub(crate) fn remove(&self, seq: u64) -> io::Result<()> {
        match fs::remove_file(self.path(seq)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes every checkpoint, and any temporary file a crash left behind.
    pub(crate) fn clear(&self) -> io::Result<()> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".ckpt") || name.ends_with(".ckpt.tmp") {
                fs::remove_file(entry.path())?;
            }
        }
        self.sync_dir();
        Ok(())
    }

    /// Removes temporary files a crash left behind.
    pub(crate) fn remove_temporaries(&self) -> io::Result<()> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for entry in entries.filter_map(|e| e.ok()) {
            if entry.file_name().to_string_lossy().ends_with(".ckpt.tmp") {
                fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }

    /// Makes renames and removals in the directory durable (best effort: a checkpoint is a
    /// cache, and one lost to a crash is rebuilt).
    fn sync_dir(&self) {
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
    }

    /// Test hook: the file of the checkpoint at `seq`.
    #[cfg(test)]
    pub(crate) fn file(&self, seq: u64) -> PathBuf {
        self.path(seq)
    }
}

/// A checkpoint read before the lock was held (see [`Checkpoints::read_newest_early`]).
pub(crate) struct Early {
    seq: u64,
    identity: (u64, u64, u64),
    snapshot: Snapshot,
}

impl Early {
    /// The snapshot, if it is what reading now would give: with the lock held, the newest
    /// checkpoint covering at most `upto` is still this one, in the same file. (Checkpoints
    /// change only under the lock: a writer adds newer ones, prunes old ones, and removes
    /// those past the head after setting a torn record aside.)
    pub(crate) fn take(self, checkpoints: &Checkpoints, upto: u64) -> Option<Snapshot> {
        let newest = checkpoints.seqs().into_iter().rev().find(|s| *s <= upto)?;
        (newest == self.seq && checkpoints.identity(self.seq) == Some(self.identity))
            .then_some(self.snapshot)
    }
}

/// How many slices the instances are cut into: about one per [`SLICE`] instances, so a large
/// state decodes on several threads whatever machine wrote it.
fn slices_for(instances: usize) -> usize {
    instances.div_ceil(SLICE).clamp(1, MAX_SLICES)
}
/// Instances per slice (about).
const SLICE: usize = 10_000;
const MAX_SLICES: usize = 16;
/// Bytes before the part table: magic, format, seq, part count.
const FIXED: usize = 24;
/// Bytes per part in the table: length u64, CRC-32 u32, instance count u64.
const ENTRY: usize = 20;

/// A checkpoint encoded: its header (with the part table) and its parts.
pub(crate) struct Encoded {
    header: Vec<u8>,
    parts: Vec<Vec<u8>>,
}

impl Encoded {
    pub(crate) fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.header)?;
        for p in &self.parts {
            w.write_all(p)?;
        }
        Ok(())
    }
}

/// Encodes a snapshot as checkpoint bytes (PostgreSQL keeps them in a table).
pub(crate) fn encode(
    snapshot: &Snapshot,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Vec<u8>, String> {
    let e = encode_parts(snapshot, crypt)?;
    let mut out = Vec::new();
    e.write_to(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Encodes a snapshot: the slices of instances on threads of their own.
/// With `crypt`, each part is sealed (the header and its table stay readable: sequence
/// number, sizes and counts).
pub(crate) fn encode_parts(
    snapshot: &Snapshot,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Encoded, String> {
    let head = snapshot.clone_without_resources();
    let entries: Vec<(&ResourceInstanceAddr, &ResourceInstance)> =
        snapshot.resources.iter().collect();
    let per = entries.len().div_ceil(slices_for(entries.len())).max(1);
    let seal = |b: Vec<u8>| match crypt {
        Some(c) => c.seal(&b),
        None => Ok(b),
    };
    let mut parts = vec![seal(rmp_serde::to_vec(&head).map_err(|e| e.to_string())?)?];
    let mut table = vec![(crc32fast::hash(&parts[0]), 0usize)];
    std::thread::scope(|scope| {
        let handles: Vec<_> = entries
            .chunks(per)
            .map(|slice| {
                scope.spawn(move || {
                    let bytes = seal(encode_slice(slice))?;
                    Ok::<_, String>((crc32fast::hash(&bytes), slice.len(), bytes))
                })
            })
            .collect();
        for h in handles {
            let (crc, count, bytes) = h
                .join()
                .map_err(|_| "a checkpoint encoder panicked".to_string())??;
            table.push((crc, count));
            parts.push(bytes);
        }
        Ok::<(), String>(())
    })?;
    let mut header = Vec::with_capacity(FIXED + parts.len() * ENTRY + 4);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&FORMAT.to_le_bytes());
    header.extend_from_slice(&snapshot.head.to_le_bytes());
    header.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    for (p, (crc, count)) in parts.iter().zip(&table) {
        header.extend_from_slice(&(p.len() as u64).to_le_bytes());
        header.extend_from_slice(&crc.to_le_bytes());
        header.extend_from_slice(&(*count as u64).to_le_bytes());
    }
    let crc = crc32fast::hash(&header);
    header.extend_from_slice(&crc.to_le_bytes());
    Ok(Encoded { header, parts })
}

fn encode_slice(slice: &[(&ResourceInstanceAddr, &ResourceInstance)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(slice.len() * 160);
    for (addr, _) in slice {
        addr.put(&mut out);
    }
    for (_, instance) in slice {
        instance.put(&mut out);
    }
    out
}

/// Where checkpoint bytes are read from: a file (each part read by the thread that decodes
/// it), or bytes in memory.
trait Source: Sync {
    fn size(&self) -> io::Result<u64>;
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Cow<'_, [u8]>>;
}

impl Source for fs::File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Cow<'_, [u8]>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(Cow::Owned(buf))
    }
}

impl Source for [u8] {
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Cow<'_, [u8]>> {
        usize::try_from(offset)
            .ok()
            .and_then(|o| self.get(o..o.checked_add(len)?))
            .map(Cow::Borrowed)
            .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
    }
}

/// One part, as the table describes it.
struct Part {
    offset: u64,
    len: usize,
    crc: u32,
    count: usize,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Decodes checkpoint bytes.
pub(crate) fn decode(
    bytes: &[u8],
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Snapshot, String> {
    decode_from(bytes, crypt)
}

/// Reads the header and its table, checked against each other and the size.
fn read_table(src: &(impl Source + ?Sized)) -> Result<(u64, Vec<Part>), String> {
    let io = |e: io::Error| e.to_string();
    let size = src.size().map_err(io)?;
    if size < (FIXED + 4) as u64 {
        return Err("the file is truncated".into());
    }
    let fixed = src.read_at(0, FIXED).map_err(io)?;
    if fixed[..8] != MAGIC[..] {
        return Err("not a Cairn checkpoint".into());
    }
    let format = le_u32(&fixed, 8);
    if format != FORMAT {
        return Err(format!("format {format}; this Cairn reads format {FORMAT}"));
    }
    let seq = le_u64(&fixed, 12);
    let n = le_u32(&fixed, 20) as usize;
    let table_len = n * ENTRY + 4;
    if n == 0 || (FIXED + table_len) as u64 > size {
        return Err("the file is truncated".into());
    }
    let table = src.read_at(FIXED as u64, table_len).map_err(io)?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&fixed);
    crc.update(&table[..n * ENTRY]);
    if crc.finalize() != le_u32(&table, n * ENTRY) {
        return Err("the checksum of its header does not match (the file is damaged)".into());
    }
    let mut parts = Vec::with_capacity(n);
    let mut offset = (FIXED + table_len) as u64;
    for i in 0..n {
        let e = &table[i * ENTRY..(i + 1) * ENTRY];
        let (len, count) = (le_u64(e, 0), le_u64(e, 12));
        let len = usize::try_from(len).map_err(|_| "a part is too large".to_string())?;
        let count = usize::try_from(count).map_err(|_| "a part is too large".to_string())?;
        if count.saturating_mul(MIN_INSTANCE_BYTES) > len || (i == 0 && count != 0) {
            return Err(format!("part {i} cannot hold {count} instances"));
        }
        parts.push(Part {
            offset,
            len,
            crc: le_u32(e, 8),
            count,
        });
        offset = offset.saturating_add(len as u64);
    }
    if offset != size {
        return Err(format!("its parts add up to {offset} bytes, not {size}"));
    }
    Ok((seq, parts))
}

/// Reads a part, checks its CRC and opens it with the state's encryption.
fn read_part<'a>(
    src: &'a (impl Source + ?Sized),
    i: usize,
    p: &Part,
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Cow<'a, [u8]>, String> {
    let bytes = src.read_at(p.offset, p.len).map_err(|e| e.to_string())?;
    if crc32fast::hash(&bytes) != p.crc {
        return Err(format!(
            "the checksum of part {i} does not match (the file is damaged)"
        ));
    }
    if crypt.is_none() && !crate::crypt::is_sealed(&bytes) {
        return Ok(bytes);
    }
    let opened = crate::crypt::open_with(crypt, &format!("checkpoint part {i}"), &bytes)?;
    Ok(Cow::Owned(opened.into_owned()))
}

fn decode_from(
    src: &(impl Source + ?Sized),
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Snapshot, String> {
    let (seq, parts) = read_table(src)?;
    // The instances go straight into their places in one vector (no per-slice vectors to
    // join), each slice read, checked and decoded by a thread of its own.
    let mut all: Vec<(ResourceInstanceAddr, ResourceInstance)> = Vec::new();
    all.resize_with(parts.iter().map(|p| p.count).sum(), placeholder);
    let (head, decoded) = std::thread::scope(|scope| {
        let mut rest = &mut all[..];
        let mut handles = Vec::with_capacity(parts.len());
        for (i, p) in parts.iter().enumerate().skip(1) {
            let (chunk, tail) = rest.split_at_mut(p.count);
            rest = tail;
            handles.push(scope.spawn(move || decode_slice(&read_part(src, i, p, crypt)?, chunk)));
        }
        let head = read_part(src, 0, &parts[0], crypt)
            .and_then(|b| rmp_serde::from_slice::<Snapshot>(&b).map_err(|e| e.to_string()));
        let decoded: Result<(), String> = handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err("a checkpoint decoder panicked".into()))
        });
        (head, decoded)
    });
    let mut snapshot = head?;
    decoded?;
    if snapshot.head != seq {
        return Err(format!(
            "its header says {seq} but its state is at {}",
            snapshot.head
        ));
    }
    // `from_iter` reuses the vector, finds it sorted, and builds the tree in one pass.
    snapshot.resources = all.into_iter().collect();
    Ok(snapshot)
}

/// The fewest bytes an instance and its address take (so that a damaged count cannot make
/// the decoder allocate more than the file could hold).
const MIN_INSTANCE_BYTES: usize = 7;

/// An entry to overwrite (allocates nothing).
fn placeholder() -> (ResourceInstanceAddr, ResourceInstance) {
    let resource = ResourceAddr {
        module: ModulePath(Vec::new()),
        mode: Mode::Managed,
        type_: String::new(),
        name: String::new(),
    };
    (
        ResourceInstanceAddr {
            resource,
            key: None,
        },
        ResourceInstance::default(),
    )
}

/// Decodes a slice of instances into `out` (as many as it holds): first all the addresses,
/// then all the instances.
fn decode_slice(
    bytes: &[u8],
    out: &mut [(ResourceInstanceAddr, ResourceInstance)],
) -> Result<(), String> {
    let mut r = Reader::new(bytes);
    for entry in out.iter_mut() {
        entry.0 = ResourceInstanceAddr::read(&mut r)?;
    }
    for entry in out.iter_mut() {
        entry.1 = ResourceInstance::read(&mut r)?;
    }
    if r.pos != bytes.len() {
        return Err(format!(
            "{} stray bytes after the instances",
            bytes.len() - r.pos
        ));
    }
    Ok(())
}

// ---- The instance encoding ----

fn put_uint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: u32,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            depth: 0,
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!(
            "{what} at byte {} of a slice of instances",
            self.pos
        ))
    }

    fn byte(&mut self) -> Result<u8, String> {
        match self.bytes.get(self.pos) {
            Some(b) => {
                self.pos += 1;
                Ok(*b)
            }
            None => self.fail("unexpected end"),
        }
    }

    fn uint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        self.fail("overlong integer")
    }

    /// A count of things that take at least one byte each (so a damaged count cannot make
    /// anyone allocate more than the input could hold).
    fn len(&mut self) -> Result<usize, String> {
        let n = self.uint()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.bytes.len() - self.pos => Ok(n),
            _ => self.fail("impossible length"),
        }
    }

    fn str(&mut self) -> Result<&'a str, String> {
        let n = self.len()?;
        let bytes = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        std::str::from_utf8(bytes).or_else(|_| self.fail("invalid UTF-8"))
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        if self.depth >= MAX_DEPTH {
            return self.fail("values nested too deep");
        }
        self.depth += 1;
        let v = f(self);
        self.depth -= 1;
        v
    }
}

/// A type in the instance encoding. `put` destructures structs without `..`, so a field
/// added to one of them does not compile until it is encoded here too.
trait Code: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn read(r: &mut Reader<'_>) -> Result<Self, String>;
}

impl Code for String {
    fn put(&self, out: &mut Vec<u8>) {
        put_str(out, self);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        r.str().map(str::to_owned)
    }
}

impl Code for bool {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        match r.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => r.fail("invalid bool"),
        }
    }
}

impl<T: Code> Code for Option<T> {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                v.put(out);
            }
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        match r.byte()? {
            0 => Ok(None),
            1 => T::read(r).map(Some),
            _ => r.fail("invalid option"),
        }
    }
}

impl<T: Code> Code for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) {
        put_uint(out, self.len() as u64);
        for v in self {
            v.put(out);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        let n = r.len()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(T::read(r)?);
        }
        Ok(v)
    }
}

impl<K: Code + Ord, V: Code> Code for BTreeMap<K, V> {
    fn put(&self, out: &mut Vec<u8>) {
        put_uint(out, self.len() as u64);
        for (k, v) in self {
            k.put(out);
            v.put(out);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        let n = r.len()?;
        if n <= SMALL_MAP {
            let mut m = BTreeMap::new();
            for _ in 0..n {
                let k = K::read(r)?;
                m.insert(k, V::read(r)?);
            }
            return Ok(m);
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let k = K::read(r)?;
            entries.push((k, V::read(r)?));
        }
        Ok(entries.into_iter().collect())
    }
}

impl Code for StoredValue {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            StoredValue::Null => out.push(0),
            StoredValue::Bool(false) => out.push(1),
            StoredValue::Bool(true) => out.push(2),
            StoredValue::Number(n) => {
                out.push(3);
                put_str(out, n);
            }
            StoredValue::String(s) => {
                out.push(4);
                put_str(out, s);
            }
            StoredValue::List(v) => {
                out.push(5);
                v.put(out);
            }
            StoredValue::Set(v) => {
                out.push(6);
                v.put(out);
            }
            StoredValue::Tuple(v) => {
                out.push(7);
                v.put(out);
            }
            StoredValue::Map(m) => {
                out.push(8);
                m.put(out);
            }
            StoredValue::Object(m) => {
                out.push(9);
                m.put(out);
            }
            StoredValue::Sensitive(v) => {
                out.push(10);
                v.put(out);
            }
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        Ok(match r.byte()? {
            0 => StoredValue::Null,
            1 => StoredValue::Bool(false),
            2 => StoredValue::Bool(true),
            3 => StoredValue::Number(String::read(r)?),
            4 => StoredValue::String(String::read(r)?),
            5 => StoredValue::List(r.nested(Vec::read)?),
            6 => StoredValue::Set(r.nested(Vec::read)?),
            7 => StoredValue::Tuple(r.nested(Vec::read)?),
            8 => StoredValue::Map(r.nested(BTreeMap::read)?),
            9 => StoredValue::Object(r.nested(BTreeMap::read)?),
            10 => StoredValue::Sensitive(Box::new(r.nested(StoredValue::read)?)),
            _ => return r.fail("invalid value tag"),
        })
    }
}

impl Code for InstanceKey {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            InstanceKey::Int(i) => {
                out.push(0);
                // Zigzag: small magnitudes of either sign stay short.
                put_uint(out, ((i << 1) ^ (i >> 63)) as u64);
            }
            InstanceKey::Str(s) => {
                out.push(1);
                put_str(out, s);
            }
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        match r.byte()? {
            0 => {
                let z = r.uint()?;
                Ok(InstanceKey::Int((z >> 1) as i64 ^ -((z & 1) as i64)))
            }
            1 => String::read(r).map(InstanceKey::Str),
            _ => r.fail("invalid instance key"),
        }
    }
}

impl Code for ModulePath {
    fn put(&self, out: &mut Vec<u8>) {
        put_uint(out, self.0.len() as u64);
        for ModuleStep { name, key } in &self.0 {
            put_str(out, name);
            key.put(out);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        let n = r.len()?;
        let mut steps = Vec::with_capacity(n);
        for _ in 0..n {
            steps.push(ModuleStep {
                name: String::read(r)?,
                key: Option::read(r)?,
            });
        }
        Ok(ModulePath(steps))
    }
}

impl Code for ResourceInstanceAddr {
    fn put(&self, out: &mut Vec<u8>) {
        let ResourceInstanceAddr {
            resource:
                ResourceAddr {
                    module,
                    mode,
                    type_,
                    name,
                },
            key,
        } = self;
        module.put(out);
        out.push(match mode {
            Mode::Managed => 0,
            Mode::Data => 1,
            // Never in state; encoded only so that the match is whole.
            Mode::Ephemeral => 2,
        });
        put_str(out, type_);
        put_str(out, name);
        key.put(out);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        let module = ModulePath::read(r)?;
        let mode = match r.byte()? {
            0 => Mode::Managed,
            1 => Mode::Data,
            2 => Mode::Ephemeral,
            _ => return r.fail("invalid mode"),
        };
        Ok(ResourceInstanceAddr {
            resource: ResourceAddr {
                module,
                mode,
                type_: String::read(r)?,
                name: String::read(r)?,
            },
            key: Option::read(r)?,
        })
    }
}

impl Code for ProviderRef {
    fn put(&self, out: &mut Vec<u8>) {
        let ProviderRef {
            addr:
                ProviderAddr {
                    module,
                    package,
                    alias,
                    key,
                },
            id,
        } = self;
        module.put(out);
        put_str(out, package);
        alias.put(out);
        key.put(out);
        put_str(out, id);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        Ok(ProviderRef {
            addr: ProviderAddr {
                module: ModulePath::read(r)?,
                package: String::read(r)?,
                alias: Option::read(r)?,
                key: Option::read(r)?,
            },
            id: String::read(r)?,
        })
    }
}

impl Code for ResourceObject {
    fn put(&self, out: &mut Vec<u8>) {
        let ResourceObject {
            attrs,
            deps,
            provider,
            create_token,
            tainted,
            meta,
        } = self;
        attrs.put(out);
        deps.put(out);
        provider.put(out);
        create_token.put(out);
        tainted.put(out);
        put_uint(out, meta.schema_version);
        put_uint(out, meta.private.len() as u64);
        out.extend_from_slice(&meta.private);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        Ok(ResourceObject {
            attrs: StoredValue::read(r)?,
            deps: Vec::read(r)?,
            provider: ProviderRef::read(r)?,
            create_token: Option::read(r)?,
            tainted: bool::read(r)?,
            meta: {
                let schema_version = r.uint()?;
                let n = r.len()?;
                let private = r.bytes[r.pos..r.pos + n].to_vec();
                r.pos += n;
                ObjectMeta {
                    schema_version,
                    private,
                }
            },
        })
    }
}

impl Code for ResourceInstance {
    fn put(&self, out: &mut Vec<u8>) {
        let ResourceInstance { current, deposed } = self;
        current.put(out);
        deposed.put(out);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        Ok(ResourceInstance {
            current: Option::read(r)?,
            deposed: BTreeMap::read(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(i: i64) -> ResourceObject {
        let nested = StoredValue::Object(
            [
                ("b".to_string(), StoredValue::Bool(i % 2 == 0)),
                ("n".to_string(), StoredValue::Number(format!("-{i}.5"))),
                ("null".to_string(), StoredValue::Null),
                (
                    "secret".to_string(),
                    StoredValue::Sensitive(Box::new(StoredValue::String("ü".into()))),
                ),
            ]
            .into(),
        );
        ResourceObject {
            attrs: StoredValue::Map(
                (0..(i % 12))
                    .map(|k| {
                        let v = match k % 4 {
                            0 => StoredValue::List(vec![nested.clone()]),
                            1 => StoredValue::Set(vec![StoredValue::String(k.to_string())]),
                            2 => StoredValue::Tuple(vec![]),
                            _ => nested.clone(),
                        };
                        (format!("k{k}"), v)
                    })
                    .collect(),
            ),
            deps: vec![format!("module.m[\"x\"].sim_thing.d[{}]", -i)
                .parse()
                .unwrap()],
            provider: ProviderRef {
                addr: "module.m[\"x\"].provider[\"sim\"].east".parse().unwrap(),
                id: "p".into(),
            },
            create_token: (i % 3 == 0).then(|| format!("t{i}")),
            tainted: i % 5 == 0,
            meta: ObjectMeta {
                schema_version: (i % 4) as u64,
                private: (0..(i % 7) as u8).map(|b| b.wrapping_mul(97)).collect(),
            },
        }
    }

    fn snapshot(n: i64) -> Snapshot {
        let mut s = Snapshot::new();
        s.head = 42;
        for i in 0..n {
            let key = if i % 2 == 0 {
                format!("sim_thing.a[{i}]")
            } else {
                format!("module.m[{i}].sim_thing.a[\"k{i}\"]")
            };
            s.resources.insert(
                key.parse().unwrap(),
                ResourceInstance {
                    current: (i % 7 != 0).then(|| object(i)),
                    deposed: (0..i % 3)
                        .map(|d| (format!("d{d}"), object(i + d)))
                        .collect(),
                },
            );
        }
        s
    }

    #[test]
    fn checkpoints_round_trip() {
        for n in [0, 5, SLICE as i64 + 7] {
            let s = snapshot(n);
            let bytes = encode(&s, None).unwrap();
            assert_eq!(decode(&bytes, None).unwrap(), s, "{n} instances");
        }
    }

    #[test]
    fn damaged_checkpoints_are_refused() {
        let bytes = encode(&snapshot(30), None).unwrap();
        let damaged = |at: usize, value: u8| {
            let mut b = bytes.clone();
            b[at] = value;
            b
        };
        let size = bytes.len();
        let cases: [(&[u8], String); 6] = [
            (
                &bytes[..size - 1],
                format!("its parts add up to {size} bytes, not {}", size - 1),
            ),
            (&bytes[..3], "the file is truncated".into()),
            (
                &damaged(size - 10, bytes[size - 10] ^ 0x10),
                "the checksum of part 1 does not match".into(),
            ),
            (
                &damaged(FIXED + 1, bytes[FIXED + 1] ^ 1),
                "the checksum of its header does not match".into(),
            ),
            (&damaged(8, 9), "format 9; this Cairn reads format 6".into()),
            (
                b"garbage, garbage and more garbage",
                "not a Cairn checkpoint".into(),
            ),
        ];
        for (damaged, error) in cases {
            let e = decode(damaged, None).unwrap_err();
            assert!(e.starts_with(&error), "{e}");
        }
    }

    /// Structural checks hold even for bytes whose checksums match.
    #[test]
    fn malformed_slices_are_errors_not_panics() {
        let cases: [(usize, &[u8], &str); 5] = [
            (1, &[], "unexpected end"),
            (1, &[0xff; 12], "overlong integer"),
            (1, &[0, 0, 9, 0, 0, 0, 0], "impossible length"),
            (1, &[0, 0, 1, 0xff, 0, 0, 0], "invalid UTF-8"),
            (0, &[1], "1 stray bytes after the instances"),
        ];
        for (n, bytes, error) in cases {
            let mut out: Vec<_> = (0..n).map(|_| placeholder()).collect();
            let e = decode_slice(bytes, &mut out).unwrap_err();
            assert!(e.starts_with(error), "{e}");
        }
        let mut deep = vec![10u8; MAX_DEPTH as usize + 1];
        deep.push(0);
        let mut r = Reader::new(&deep);
        let e = StoredValue::read(&mut r).unwrap_err();
        assert!(e.starts_with("values nested too deep"), "{e}");
        deep.remove(0);
        let mut r = Reader::new(&deep);
        assert!(StoredValue::read(&mut r).is_ok());
    }
}
