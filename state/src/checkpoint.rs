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
//! # Layout (format 7; 5 added the runs' counts of moved and forgotten objects, which a
//! format 4 checkpoint cannot know; 6 the instance key of a provider instance, OpenTofu's
//! provider `for_each`; 7 compresses each part with zstd — a third to a fifth of the size,
//! decompressed by the thread that decodes the part — and format 6 files still read)
//!
//! ```text
//! "CAIRNCKP" | format u32 | seq u64 | part count u32
//! per part: length u64 | CRC-32 u32 | instance count u64
//! CRC-32 of all the above u32
//! parts…
//! ```
//!
//! Integers are little-endian. In format 7 each part is its uncompressed length (u64) and a
//! zstd frame, sealed after compression when the state is encrypted; the CRC covers the bytes
//! as stored. Part 0 is the snapshot without its resource instances
//! (rmp-serde, positional: small). Parts 1.. are slices of the resource instances in address
//! order, about [`SLICE`] each whatever the machine that wrote them. Opening is dominated by
//! them: each is read, checked and decoded by a thread of its own into a vector, bulk-built
//! into a tree (`from_iter` finds it sorted), and the trees are joined pairwise (`build_map`:
//! never all the instances twice in memory). The newest
//! checkpoint is read while sled opens (`Checkpoints::read_newest_early`) and used if it is
//! still the right one once the lock is held.
//!
//! # The instance encoding
//!
//! Instances use the compact binary encoding of `codec.rs` (the `Code` trait): varint
//! lengths, one tag byte per `StoredValue`, strings as length and bytes, fields in declaration
//! order with no names — under half the size of the named rmp form, and decoded without
//! serde's per-field dispatch; small maps are built by ascending insertion. Within a slice
//! all addresses come first, then all instances: the addresses are then allocated next to
//! each other, so building the map (which compares neighbouring keys) reads a few contiguous
//! megabytes instead of chasing pointers through the whole state. The events of schema v6 use
//! the same encoding (`event.rs`); here it is only a cache, and a checkpoint that does not
//! decode — damaged, or of another format — is skipped with a warning and rebuilt from the log. Checkpoints that
//! older versions kept in the sled tree `checkpoints` are not read; a writer drops that tree.

use crate::addr::{Mode, ModulePath, ResourceAddr, ResourceInstanceAddr};
use crate::codec::{Code, Reader};
use crate::snapshot::{ResourceInstance, Snapshot};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The format this version writes (it reads [`UNCOMPRESSED`] too).
pub(crate) const FORMAT: u32 = 7;
/// Format 6: the same layout with the parts stored as they are.
const UNCOMPRESSED: u32 = 6;
/// zstd's level for the parts: its default, fast to write and decompressing at about a
/// gigabyte a second per thread.
const ZSTD_LEVEL: i32 = 3;
/// The most a compressed part may expand to per byte (a damaged length cannot make a reader
/// allocate more).
const MAX_RATIO: usize = 256;
const MAGIC: &[u8; 8] = b"CAIRNCKP";

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
    encode_parts_as(snapshot, crypt, true)
}

/// [`encode_parts`], in format 7 (`compressed`) or 6.
fn encode_parts_as(
    snapshot: &Snapshot,
    crypt: Option<&crate::crypt::Encryption>,
    compressed: bool,
) -> Result<Encoded, String> {
    let head = snapshot.clone_without_resources();
    let entries: Vec<(&ResourceInstanceAddr, &ResourceInstance)> =
        snapshot.resources.iter().collect();
    let per = entries.len().div_ceil(slices_for(entries.len())).max(1);
    // Compressed, then sealed (sealed bytes do not compress).
    let seal = |b: Vec<u8>| {
        let b = match compressed {
            true => compress(&b)?,
            false => b,
        };
        match crypt {
            Some(c) => c.seal(&b),
            None => Ok(b),
        }
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
    let format = if compressed { FORMAT } else { UNCOMPRESSED };
    header.extend_from_slice(&format.to_le_bytes());
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

/// A part compressed: its length (u64, little-endian), then the zstd frame.
fn compress(b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(b.len() / 4 + 16);
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    let z = zstd::bulk::compress(b, ZSTD_LEVEL).map_err(|e| format!("cannot compress: {e}"))?;
    out.extend_from_slice(&z);
    Ok(out)
}

/// A part written by [`compress`].
fn decompress(b: &[u8], i: usize) -> Result<Vec<u8>, String> {
    let bad = || format!("part {i} does not decompress (the file is damaged)");
    if b.len() < 8 {
        return Err(bad());
    }
    let n = usize::try_from(le_u64(b, 0)).map_err(|_| bad())?;
    if n > b.len().saturating_mul(MAX_RATIO) {
        return Err(bad());
    }
    let out = zstd::bulk::decompress(&b[8..], n).map_err(|_| bad())?;
    if out.len() != n {
        return Err(bad());
    }
    Ok(out)
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
fn read_table(src: &(impl Source + ?Sized)) -> Result<(u64, bool, Vec<Part>), String> {
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
    if format != FORMAT && format != UNCOMPRESSED {
        return Err(format!(
            "format {format}; this Cairn reads formats {UNCOMPRESSED} and {FORMAT}"
        ));
    }
    let compressed = format == FORMAT;
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
        let room = match compressed {
            true => len.saturating_mul(MAX_RATIO),
            false => len,
        };
        if count.saturating_mul(MIN_INSTANCE_BYTES) > room || (i == 0 && count != 0) {
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
    Ok((seq, compressed, parts))
}

/// Reads a part, checks its CRC, opens it with the state's encryption and decompresses it
/// (`compressed`: format 7).
fn read_part<'a>(
    src: &'a (impl Source + ?Sized),
    i: usize,
    p: &Part,
    crypt: Option<&crate::crypt::Encryption>,
    compressed: bool,
) -> Result<Cow<'a, [u8]>, String> {
    let bytes = src.read_at(p.offset, p.len).map_err(|e| e.to_string())?;
    if crc32fast::hash(&bytes) != p.crc {
        return Err(format!(
            "the checksum of part {i} does not match (the file is damaged)"
        ));
    }
    let opened = if crypt.is_none() && !crate::crypt::is_sealed(&bytes) {
        bytes
    } else {
        let opened = crate::crypt::open_with(crypt, &format!("checkpoint part {i}"), &bytes)?;
        Cow::Owned(opened.into_owned())
    };
    match compressed {
        true => decompress(&opened, i).map(Cow::Owned),
        false => Ok(opened),
    }
}

fn decode_from(
    src: &(impl Source + ?Sized),
    crypt: Option<&crate::crypt::Encryption>,
) -> Result<Snapshot, String> {
    let (seq, compressed, parts) = read_table(src)?;
    // Each slice is read, checked and decoded by a thread of its own into a vector of its own.
    // As many threads as the machine runs at once, each taking the next slice: the bytes of a
    // slice (read, decompressed) and its vector live only while it is decoded and built into
    // a tree, so a machine with few cores does not hold every slice's buffers at once. Each
    // thread joins its trees as it goes (`join_runs`), while the others still decode, and
    // hands back one: what is left to join once all are decoded is one tree per thread.
    type Tree = BTreeMap<ResourceInstanceAddr, ResourceInstance>;
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, parts.len().saturating_sub(1).max(1));
    let next = std::sync::atomic::AtomicUsize::new(1);
    let (head, slices) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut runs: Vec<Tree> = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(p) = parts.get(i) else {
                            return Ok::<_, String>(build_map(runs));
                        };
                        let mut out = Vec::new();
                        out.resize_with(p.count, placeholder);
                        decode_slice(&read_part(src, i, p, crypt, compressed)?, &mut out)?;
                        // `from_iter` finds the slice sorted and builds the tree in one pass.
                        runs.push(out.into_iter().collect());
                        join_runs(&mut runs);
                    }
                })
            })
            .collect();
        let head = read_part(src, 0, &parts[0], crypt, compressed)
            .and_then(|b| rmp_serde::from_slice::<Snapshot>(&b).map_err(|e| e.to_string()));
        let mut trees: Vec<Tree> = Vec::with_capacity(threads);
        let mut failed = None;
        for h in handles {
            match h.join() {
                Ok(Ok(tree)) => trees.push(tree),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => failed = failed.or(Some("a checkpoint decoder panicked".into())),
            }
        }
        (head, failed.map_or(Ok(trees), Err))
    });
    let mut snapshot = head?;
    let slices = slices?;
    if snapshot.head != seq {
        return Err(format!(
            "its header says {seq} but its state is at {}",
            snapshot.head
        ));
    }
    snapshot.resources = build_map(slices).into();
    Ok(snapshot)
}

/// Joins the newest trees of `runs` while the one before the newest is no larger than it (as
/// a binary counter carries): each instance is moved about log2(slices) times, a thread's
/// trees stay few, and the joins run while other threads still decode.
fn join_runs(runs: &mut Vec<BTreeMap<ResourceInstanceAddr, ResourceInstance>>) {
    while let [.., a, b] = &runs[..] {
        if a.len() > b.len() {
            break;
        }
        let mut b = runs.pop().expect("two runs");
        runs.last_mut().expect("two runs").append(&mut b);
    }
}

/// The map of the slices' trees (disjoint: in any order), joined pairwise (`append` walks
/// both, freeing their nodes as it builds the joined one): at no time are all the instances
/// held twice, as one vector and one tree (issue 31: that was 40 MB at 100,000 instances).
fn build_map(
    mut maps: Vec<BTreeMap<ResourceInstanceAddr, ResourceInstance>>,
) -> BTreeMap<ResourceInstanceAddr, ResourceInstance> {
    while maps.len() > 1 {
        let mut joined = Vec::with_capacity(maps.len().div_ceil(2));
        let mut it = maps.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(mut b) = it.next() {
                a.append(&mut b);
            }
            joined.push(a);
        }
        maps = joined;
    }
    maps.pop().unwrap_or_default()
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
    use crate::codec::MAX_DEPTH;
    use crate::event::{ObjectMeta, ProviderRef, ResourceObject};
    use crate::stored_value::StoredValue;

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
            provider: ProviderRef::new(
                "module.m[\"x\"].provider[\"sim\"].east".parse().unwrap(),
                "p".into(),
            ),
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

    /// Trees of disjoint, interleaved slices (as the decoding threads take them) joined as
    /// they come and then all together: the union, whatever the order.
    #[test]
    fn slice_trees_join_to_their_union() {
        let s = snapshot(23);
        let all: Vec<_> = s
            .resources
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for slices in [1, 2, 3, 5, 7, 23] {
            let mut threads: Vec<Vec<BTreeMap<_, _>>> = vec![Vec::new(); 2];
            for j in 0..slices {
                let tree: BTreeMap<_, _> = all
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % slices == j)
                    .map(|(_, e)| e.clone())
                    .collect();
                let runs = &mut threads[j % 2];
                runs.push(tree);
                join_runs(runs);
                assert!(runs.windows(2).all(|w| w[0].len() > w[1].len()), "{slices}");
            }
            let joined = build_map(threads.into_iter().map(build_map).collect());
            assert_eq!(
                joined.into_iter().collect::<Vec<_>>(),
                all,
                "{slices} slices"
            );
        }
    }

    /// Format 6 checkpoints (parts uncompressed, written before 7) read as they are; format 7
    /// ones are smaller.
    #[test]
    fn uncompressed_checkpoints_still_read() {
        let s = snapshot(200);
        let mut old = Vec::new();
        encode_parts_as(&s, None, false)
            .unwrap()
            .write_to(&mut old)
            .unwrap();
        assert_eq!(le_u32(&old, 8), 6);
        assert_eq!(decode(&old, None).unwrap(), s);
        let new = encode(&s, None).unwrap();
        assert_eq!(le_u32(&new, 8), 7);
        assert!(new.len() * 3 < old.len(), "{} vs {}", new.len(), old.len());
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
            (
                &damaged(8, 9),
                "format 9; this Cairn reads formats 6 and 7".into(),
            ),
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
