//! `cairn fmt -recursive` against `terraform fmt -recursive` on 10,000 files, run with
//! `cargo bench --bench fmt` (prints figures; not a timed test). Both run as child processes
//! on identical fresh trees: 100 directories of 100 files, the files cycled from
//! `fixtures/fmt/input/` (uglified real modules and hand-written ugly files, so nearly every
//! file is rewritten). After each pair of runs the two trees must be byte-identical.
//!
//! `CAIRN_BENCH_RUNS` (default 3): runs of each, best and median printed;
//! `CAIRN_BENCH_FILES` (default 10,000); `CAIRN_BENCH_TERRAFORM=0` skips Terraform;
//! `TF` names the terraform binary (default: `terraform` on the PATH); `CAIRN_BENCH_BEFORE`
//! measures an older build of `cairn` beside this one (`support.rs`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{env_num, Figure};

/// The fixture inputs, as (file name, bytes).
fn sources() -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                if [".tf", ".tfvars", ".tftest.hcl"]
                    .iter()
                    .any(|e| name.ends_with(e))
                {
                    out.push((name, std::fs::read(&p).unwrap()));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fmt/input"),
        &mut out,
    );
    out
}

/// Writes `n` files under `root` (100 per directory), cycling through `sources`.
fn make_tree(root: &Path, n: usize, sources: &[(String, Vec<u8>)]) {
    let _ = std::fs::remove_dir_all(root);
    for i in 0..n {
        let (name, bytes) = &sources[i % sources.len()];
        let dir = root.join(format!("d{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i:05}_{name}")), bytes).unwrap();
    }
}

/// Wall time of one run of `cmd` in `dir` (its output discarded; exit 0 required).
fn time(cmd: &mut Command, dir: &Path) -> support::Run {
    support::run(cmd.current_dir(dir))
}

fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(root).unwrap().flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            let p = f.path();
            out.push((
                p.strip_prefix(root).unwrap().to_path_buf(),
                std::fs::read(&p).unwrap(),
            ));
        }
    }
    out.sort();
    out
}

fn main() {
    let runs = env_num("CAIRN_BENCH_RUNS", 3).max(1);
    let n = env_num("CAIRN_BENCH_FILES", 10_000);
    let with_tf = std::env::var("CAIRN_BENCH_TERRAFORM").map_or(true, |v| v != "0");
    let tf = std::env::var("TF").unwrap_or_else(|_| "terraform".into());
    let builds = support::builds();
    let sources = sources();
    let tmp = tempfile::tempdir().unwrap();
    let (ca_root, tf_root) = (tmp.path().join("cairn"), tmp.path().join("terraform"));
    let bytes: usize = (0..n).map(|i| sources[i % sources.len()].1.len()).sum();
    println!(
        "fmt -recursive on {n} files ({:.1} MB, cycled from {} fixture inputs), {runs} runs each",
        bytes as f64 / 1e6,
        sources.len()
    );
    let mut ca = vec![Figure::default(); builds.len()];
    let mut tf_fig = Figure::default();
    for round in 0..runs {
        let mut trees = Vec::new();
        for (i, b) in support::in_turn(&builds, round) {
            make_tree(&ca_root, n, &sources);
            ca[i].push(&time(b.command().args(["fmt", "-recursive"]), &ca_root));
            trees.push(snapshot(&ca_root));
        }
        if with_tf {
            make_tree(&tf_root, n, &sources);
            tf_fig.push(&time(
                Command::new(&tf).args(["fmt", "-recursive"]),
                &tf_root,
            ));
            let want = snapshot(&tf_root);
            assert!(
                trees.iter().all(|t| *t == want),
                "cairn's and terraform's formatted trees differ"
            );
        }
    }
    support::report(&builds, "cairn fmt -recursive", &ca);
    if with_tf {
        println!("terraform fmt -recursive: {tf_fig}");
        for (b, f) in builds.iter().zip(&ca) {
            println!(
                "terraform / cairn (medians){}: {:.2}x; the formatted trees are byte-identical",
                b.tag(),
                tf_fig.median() / f.median()
            );
        }
    } else {
        println!("terraform: skipped (CAIRN_BENCH_TERRAFORM=0)");
    }
}
