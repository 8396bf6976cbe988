//! The compact binary encoding of the state's values, written once for the checkpoints'
//! instances and the events of schema v6 (`event.rs`): varint lengths and integers, one tag byte
//! per [`StoredValue`], strings as length and bytes, struct fields in declaration order with no
//! names. Every read is bounds-checked and nesting is limited, so damaged bytes are an error,
//! never a panic or a huge allocation.

use crate::addr::{
    InstanceKey, Mode, ModulePath, ModuleStep, ProviderAddr, ResourceAddr, ResourceInstanceAddr,
};
use crate::stored_value::{StoredValue, ValueMap};
use std::collections::BTreeMap;

/// Deepest nesting of values decoded (damaged bytes cannot exhaust the stack).
pub(crate) const MAX_DEPTH: u32 = 1024;
/// Maps with at most this many entries are built by ascending insertion (no vector, no sort).
const SMALL_MAP: usize = 8;

pub(crate) fn put_uint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
    depth: u32,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            depth: 0,
        }
    }

    pub(crate) fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.pos))
    }

    pub(crate) fn byte(&mut self) -> Result<u8, String> {
        match self.bytes.get(self.pos) {
            Some(b) => {
                self.pos += 1;
                Ok(*b)
            }
            None => self.fail("unexpected end"),
        }
    }

    pub(crate) fn uint(&mut self) -> Result<u64, String> {
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
    pub(crate) fn len(&mut self) -> Result<usize, String> {
        let n = self.uint()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.bytes.len() - self.pos => Ok(n),
            _ => self.fail("impossible length"),
        }
    }

    /// `n` raw bytes (`n` from [`Reader::len`]).
    pub(crate) fn raw(&mut self, n: usize) -> Result<&'a [u8], String> {
        match self.bytes.get(self.pos..self.pos.saturating_add(n)) {
            Some(b) => {
                self.pos += n;
                Ok(b)
            }
            None => self.fail("unexpected end"),
        }
    }

    /// True when every byte has been read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    pub(crate) fn str(&mut self) -> Result<&'a str, String> {
        let n = self.len()?;
        let bytes = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        std::str::from_utf8(bytes).or_else(|_| self.fail("invalid UTF-8"))
    }

    pub(crate) fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, String>,
    ) -> Result<T, String> {
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
pub(crate) trait Code: Sized {
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

impl Code for u64 {
    fn put(&self, out: &mut Vec<u8>) {
        put_uint(out, *self);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        r.uint()
    }
}

impl Code for u32 {
    fn put(&self, out: &mut Vec<u8>) {
        put_uint(out, u64::from(*self));
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        let v = r.uint()?;
        u32::try_from(v).or_else(|_| r.fail("integer out of range"))
    }
}

/// Bytes as their length and themselves.
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Bytes written by [`put_bytes`].
pub(crate) fn read_bytes(r: &mut Reader<'_>) -> Result<Vec<u8>, String> {
    let n = r.len()?;
    r.raw(n).map(<[u8]>::to_vec)
}

impl<A: Code, B: Code> Code for (A, B) {
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out);
        self.1.put(out);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        Ok((A::read(r)?, B::read(r)?))
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

impl Code for ValueMap {
    fn put(&self, out: &mut Vec<u8>) {
        put_uint(out, self.len() as u64);
        for (k, v) in self {
            put_str(out, k);
            v.put(out);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        let n = r.len()?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let k = String::read(r)?;
            entries.push((k, StoredValue::read(r)?));
        }
        Ok(ValueMap::from_vec(entries))
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
            StoredValue::String(s) => match uuid_bytes(s) {
                Some(b) => {
                    out.push(11);
                    out.extend_from_slice(&b);
                }
                None => {
                    out.push(4);
                    put_str(out, s);
                }
            },
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
            8 => StoredValue::Map(r.nested(ValueMap::read)?),
            9 => StoredValue::Object(r.nested(ValueMap::read)?),
            10 => StoredValue::Sensitive(Box::new(r.nested(StoredValue::read)?)),
            11 => StoredValue::String(read_uuid(r)?),
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

impl Code for ProviderAddr {
    fn put(&self, out: &mut Vec<u8>) {
        let ProviderAddr {
            module,
            package,
            alias,
            key,
        } = self;
        module.put(out);
        put_str(out, package);
        alias.put(out);
        key.put(out);
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, String> {
        Ok(ProviderAddr {
            module: ModulePath::read(r)?,
            package: String::read(r)?,
            alias: Option::read(r)?,
            key: Option::read(r)?,
        })
    }
}

/// A string in the canonical text form of a UUID (lowercase hex, hyphens at 8, 13, 18, 23) as
/// its 16 bytes: ids and create tokens are mostly such, and take 16 bytes instead of 37.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut n = 0;
    let mut i = 0;
    while i < 36 {
        if matches!(i, 8 | 13 | 18 | 23) {
            if b[i] != b'-' {
                return None;
            }
            i += 1;
            continue;
        }
        let hex = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        out[n] = hex(b[i])? << 4 | hex(b[i + 1])?;
        n += 1;
        i += 2;
    }
    Some(out)
}

/// The text of a UUID written by [`uuid_bytes`].
fn read_uuid(r: &mut Reader<'_>) -> Result<String, String> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = r.raw(16)?;
    let mut s = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[usize::from(x >> 4)] as char);
        s.push(HEX[usize::from(x & 15)] as char);
    }
    Ok(s)
}

/// An optional token (a create token: mostly a UUID): `0` none, `1` and the string, `2` and
/// the 16 bytes of a UUID.
pub(crate) fn put_token(out: &mut Vec<u8>, t: &Option<String>) {
    match t {
        None => out.push(0),
        Some(s) => match uuid_bytes(s) {
            Some(b) => {
                out.push(2);
                out.extend_from_slice(&b);
            }
            None => {
                out.push(1);
                put_str(out, s);
            }
        },
    }
}

/// A token written by [`put_token`].
pub(crate) fn read_token(r: &mut Reader<'_>) -> Result<Option<String>, String> {
    match r.byte()? {
        0 => Ok(None),
        1 => String::read(r).map(Some),
        2 => read_uuid(r).map(Some),
        _ => r.fail("invalid token"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// UUID strings take their 16 bytes and come back as the same text; anything else that
    /// looks like one (upper case, other lengths, misplaced hyphens) stays a string.
    #[test]
    fn uuids_are_stored_as_their_bytes() {
        for (text, compact) in [
            ("0b6f8d7e-3c2a-4f1e-9a8b-7c6d5e4f3a2b", true),
            ("00000000-0000-0000-0000-000000000000", true),
            ("0B6F8D7E-3C2A-4F1E-9A8B-7C6D5E4F3A2B", false),
            ("0b6f8d7e3c2a-4f1e-9a8b-7c6d5e4f3a2b-", false),
            ("0b6f8d7e-3c2a-4f1e-9a8b-7c6d5e4f3a2", false),
            ("0b6f8d7e-3c2a-4f1e-9a8b-7c6d5e4f3a2g", false),
            ("", false),
        ] {
            let v = StoredValue::String(text.into());
            let mut out = Vec::new();
            v.put(&mut out);
            assert_eq!(out.len() == 17, compact, "{text}");
            let mut r = Reader::new(&out);
            assert_eq!(StoredValue::read(&mut r).unwrap(), v);
            assert!(r.at_end());
            let t = Some(text.to_string());
            let mut out = Vec::new();
            put_token(&mut out, &t);
            let mut r = Reader::new(&out);
            assert_eq!(read_token(&mut r).unwrap(), t);
            assert!(r.at_end());
        }
    }
}
