//! Package hashes as the lock file records them.
//!
//! - `h1:` is Go's `dirhash.Hash1` over the package's files: for each file, in byte order of
//!   its `/`-separated relative name, the line `"{sha256 hex}  {name}\n"`; the hash is the
//!   base64 SHA-256 of all those lines. The same value comes from the unpacked directory and
//!   from the zip archive (its file entries), so either can be checked against a lock.
//! - `zh:` is the hex SHA-256 of the zip archive itself, as the registry's `SHA256SUMS` lists
//!   it (Terraform's legacy hash).

use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// A hash as written in the lock file: `h1:…` or `zh:…` (other schemes are kept as text).
pub(crate) type HashText = String;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn h1_of_lines(mut lines: Vec<(String, String)>) -> Result<HashText, String> {
    lines.sort();
    let mut summary = Sha256::new();
    for (name, sum) in &lines {
        if name.contains('\n') {
            return Err(format!("file name {name:?} contains a newline"));
        }
        summary.update(format!("{sum}  {name}\n"));
    }
    Ok(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(summary.finalize())
    ))
}

/// The hex SHA-256 of a reader's bytes.
pub(crate) fn sha256_hex(mut r: impl Read) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// `h1:` of an unpacked package directory (symbolic links followed, as Go's `os.Open` does).
pub fn h1_dir(dir: &Path) -> Result<HashText, String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<(), String> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            let lmeta =
                std::fs::symlink_metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            if lmeta.is_dir() {
                walk(root, &p, out)?;
                continue;
            }
            let rel = p
                .strip_prefix(root)
                .map_err(|e| e.to_string())?
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let f = std::fs::File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let sum = sha256_hex(f).map_err(|e| format!("{}: {e}", p.display()))?;
            out.push((rel, sum));
        }
        Ok(())
    }
    let mut lines = Vec::new();
    walk(dir, dir, &mut lines)?;
    h1_of_lines(lines)
}

/// `h1:` of a zip archive's file entries (the same as of the directory it unpacks to).
pub fn h1_zip(zip: &Path) -> Result<HashText, String> {
    let f = std::fs::File::open(zip).map_err(|e| format!("{}: {e}", zip.display()))?;
    let mut archive = zip::ZipArchive::new(f)
        .map_err(|e| format!("{}: not a zip archive: {e}", zip.display()))?;
    let mut lines = Vec::new();
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| format!("{}: {e}", zip.display()))?;
        if entry.is_dir() {
            continue;
        }
        let name = entry.name().to_string();
        let sum = sha256_hex(&mut entry).map_err(|e| format!("{}: {name}: {e}", zip.display()))?;
        lines.push((name, sum));
    }
    h1_of_lines(lines)
}

/// `zh:` of a zip archive: the SHA-256 of its bytes.
pub(crate) fn zh_zip(zip: &Path) -> Result<HashText, String> {
    let f = std::fs::File::open(zip).map_err(|e| format!("{}: {e}", zip.display()))?;
    sha256_hex(f)
        .map(|s| format!("zh:{s}"))
        .map_err(|e| format!("{}: {e}", zip.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_and_zip_agree_and_match_go() {
        let d = tempfile::tempdir().unwrap();
        let pkg = d.path().join("pkg");
        std::fs::create_dir_all(pkg.join("sub")).unwrap();
        std::fs::write(pkg.join("terraform-provider-x_v1.0.0"), b"hello\n").unwrap();
        std::fs::write(pkg.join("sub/README"), b"readme\n").unwrap();
        let h = h1_dir(&pkg).unwrap();
        // Go: dirhash.HashDir(pkg, "", dirhash.Hash1) over the same two files.
        let lines = format!(
            "{}  sub/README\n{}  terraform-provider-x_v1.0.0\n",
            sha256_hex(&b"readme\n"[..]).unwrap(),
            sha256_hex(&b"hello\n"[..]).unwrap()
        );
        let expect = format!(
            "h1:{}",
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(lines.as_bytes()))
        );
        assert_eq!(h, expect);

        let zpath = d.path().join("p.zip");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&zpath).unwrap());
        let o = zip::write::SimpleFileOptions::default();
        w.start_file("terraform-provider-x_v1.0.0", o).unwrap();
        std::io::Write::write_all(&mut w, b"hello\n").unwrap();
        w.add_directory("sub/", o).unwrap();
        w.start_file("sub/README", o).unwrap();
        std::io::Write::write_all(&mut w, b"readme\n").unwrap();
        w.finish().unwrap();
        assert_eq!(h1_zip(&zpath).unwrap(), h);
        assert!(zh_zip(&zpath).unwrap().starts_with("zh:"));
    }

    #[test]
    fn same_h1_as_terraform() {
        // `terraform init` (1.11) from a filesystem mirror holding this one file locked
        // exactly this hash.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("terraform-provider-thing_v1.5.0"),
            b"#!/bin/sh\necho hi\n",
        )
        .unwrap();
        assert_eq!(
            h1_dir(d.path()).unwrap(),
            "h1:GOaQm7BdE7YQJHqkaAh3UfV1oUCp5a3PjZ57nDqcwRo="
        );
    }
}
