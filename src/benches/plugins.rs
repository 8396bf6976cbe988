//! Benchmarks of plugin providers, run with `cargo bench --bench plugins` (they print figures
//! beside Terraform 1.11's on the same provider binary, measured in the same run; they are not
//! timed tests). Cairn and Terraform run as child processes, with the provider through the
//! same CLI configuration's `dev_overrides`.
//!
//! 1. `fast`: engine cost with a fast provider. The protocol 6 test provider
//!    `terraform-provider-kv6` (fixtures/provider-v6, on the `tf-provider` framework, one small
//!    file per item, in `/dev/shm` where there is one) with 1,000 and 10,000 `kv6_item`s:
//!    `plan` (fresh), `apply -auto-approve` (fresh), no-op `plan`; Cairn against Terraform, and
//!    the ratios (goal: Cairn ≥ 10×).
//! 2. `sim`: a slow provider is the floor. The oracle's Python `sim` plugin (protocol 6) with
//!    1,000 `sim_thing`s and 1,000 `sim_lookup`s reading them (the configuration of
//!    `../shared/oracle/bench.sh`): `plan`, `apply`, no-op `plan`, each engine's wall time beside
//!    the provider CPU it caused and its RPCs, counted by the provider (`SIM_STATS`). Goals:
//!    Cairn's wall time ≤ 1.3 × that provider CPU; no more RPCs than Terraform.
//! 3. `calls`: calls/s of Cairn's plugin client (`PluginProvider`, encoding included) against
//!    `terraform-provider-kv6` with its store in memory, `PlanResourceChange` at parallelism 10.
//!
//! The machine is shared: every figure is one run (`CAIRN_BENCH_RUNS` for more: best and
//! median are printed). `CAIRN_BENCH_ONLY=fast|sim|calls` runs one part;
//! `CAIRN_BENCH_SIZES="1000 10000"` the sizes of part 1; `CAIRN_BENCH_TERRAFORM=0` skips
//! Terraform; `CAIRN_BENCH_TF_MAX` the largest size Terraform runs at (default 10,000);
//! `CAIRN_BENCH_KV6` a `terraform-provider-kv6` binary to use instead of building one;
//! `CAIRN_BENCH_BEFORE` an older build of `cairn` measured beside this one in parts 1 and 2
//! (`support.rs`; part 3 runs this build's plugin client in this process).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use cairn::provider::plugin::PluginProvider;
use cairn::provider::Provider;
use cairn::value::Value;
use support::Build;

mod support;

use support::env_num;

/// Runs a command to its end; its wall time in seconds (a failure stops the benchmark with the
/// command's output).
fn run(cmd: &mut Command) -> f64 {
    cmd.stdin(Stdio::null());
    let start = Instant::now();
    let out = cmd.output().expect("the command starts");
    let t = start.elapsed().as_secs_f64();
    // `plan -detailed-exitcode` exits 0 when there is nothing to do, the only case measured.
    if !out.status.success() {
        let s = String::from_utf8_lossy(&out.stdout);
        let e = String::from_utf8_lossy(&out.stderr);
        panic!(
            "{cmd:?} failed ({}):\n{}\n{}",
            out.status,
            s.chars()
                .rev()
                .take(3000)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>(),
            e.chars().take(3000).collect::<String>()
        );
    }
    t
}

/// Best and median of some wall times.
fn best_median(mut times: Vec<f64>) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[0], times[times.len() / 2])
}

fn show((best, median): (f64, f64)) -> String {
    if (best - median).abs() < 1e-9 {
        format!("{best:8.3} s")
    } else {
        format!("{best:8.3} s (median {median:.3})")
    }
}

/// The tool's invocation in `dir` with the CLI configuration `rc`.
#[derive(Clone, Copy)]
enum Tool<'a> {
    Cairn(&'a Build),
    Terraform,
}

impl Tool<'_> {
    /// `cairn`, `cairn [before]`, `terraform`.
    fn name(self) -> String {
        match self {
            Tool::Cairn(b) => format!("cairn{}", b.tag()),
            Tool::Terraform => "terraform".into(),
        }
    }

    fn cmd(self, dir: &Path, rc: &Path, args: &[&str]) -> Command {
        let mut c = match self {
            Tool::Cairn(b) => b.command(),
            Tool::Terraform => Command::new("terraform"),
        };
        c.current_dir(dir)
            .args(args)
            .arg("-input=false")
            .env("TF_CLI_CONFIG_FILE", rc)
            .env_remove("CAIRN_CLI_CONFIG_FILE")
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("NO_COLOR", "1");
        c
    }

    /// Forgets the state (and the plugin's `store`): the next command starts from nothing.
    fn fresh(&self, dir: &Path, store: &Path) {
        let _ = std::fs::remove_dir_all(store);
        let _ = std::fs::remove_dir_all(dir.join(".cairn"));
        let _ = std::fs::remove_file(dir.join("terraform.tfstate"));
        let _ = std::fs::remove_file(dir.join("terraform.tfstate.backup"));
    }
}

fn terraform_wanted() -> bool {
    std::env::var("CAIRN_BENCH_TERRAFORM").map_or(true, |v| v != "0")
        && Command::new("terraform")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// A CLI configuration whose `dev_overrides` runs `dir`'s plugin for `source`.
fn rc_file(path: &Path, source: &str, dir: &Path) {
    std::fs::write(
        path,
        format!(
            "disable_checkpoint = true\nprovider_installation {{\n  dev_overrides {{\n    \"{source}\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            dir.display()
        ),
    )
    .unwrap();
}

/// `terraform-provider-kv6`, built with the profile of this benchmark, beside `cairn` (or the
/// binary `CAIRN_BENCH_KV6` names).
fn kv6() -> PathBuf {
    if let Some(p) = std::env::var_os("CAIRN_BENCH_KV6") {
        return PathBuf::from(p);
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_cairn"));
    let profile_dir = exe.parent().unwrap();
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "-p", "terraform-provider-kv6"]);
    if profile_dir.ends_with("release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo starts");
    assert!(status.success(), "building terraform-provider-kv6 failed");
    let p = profile_dir.join("terraform-provider-kv6");
    assert!(p.exists(), "{} is missing", p.display());
    p
}

/// Every build of Cairn, then Terraform when `tf`.
fn tools(builds: &[Build], tf: bool) -> Vec<Tool<'_>> {
    let mut v: Vec<Tool> = builds.iter().map(Tool::Cairn).collect();
    if tf {
        v.push(Tool::Terraform);
    }
    v
}

fn fast(builds: &[Build], runs: usize, tmp: &Path, tf: bool) {
    let plugin = kv6();
    let rc = tmp.join("kv6.rc");
    rc_file(&rc, "example.com/cairn/kv6", plugin.parent().unwrap());
    let sizes: Vec<usize> = std::env::var("CAIRN_BENCH_SIZES")
        .unwrap_or_else(|_| "1000 10000".into())
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    let tf_max = env_num("CAIRN_BENCH_TF_MAX", 10_000);
    println!(
        "== fast provider: {} (protocol 6, tf-provider)",
        plugin.display()
    );
    for n in sizes {
        let dir = tmp.join(format!("kv6-{n}"));
        // The provider's items in memory (`/dev/shm`) where there is one: on disk, ext4's
        // inode allocation after the previous run's deletes (`recently_deleted` in
        // `ext4_create`, `perf`) cost the provider 0.1–1.6 s of system time per 1,000 items,
        // varying from run to run, which hid the engines' own cost this part measures.
        let shm = Path::new("/dev/shm")
            .is_dir()
            .then(|| tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm"));
        let store = shm
            .as_ref()
            .map_or_else(|| dir.join("store"), |d| d.path().join("store"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = format!(
            "terraform {{\n  required_providers {{\n    kv6 = {{ source = \"example.com/cairn/kv6\" }}\n  }}\n}}\nprovider \"kv6\" {{\n  store = \"{}\"\n}}\n",
            store.display()
        );
        for i in 0..n {
            text.push_str(&format!(
                "resource \"kv6_item\" \"r{i}\" {{\n  name  = \"r{i}\"\n  value = \"v{i}\"\n}}\n"
            ));
        }
        std::fs::write(dir.join("main.tf"), text).unwrap();
        // Rounds, the tools' order turned at each: a fresh plan, a fresh apply, then a no-op
        // plan on what that apply made.
        let tools = tools(builds, tf && n <= tf_max);
        let mut times: Vec<[Vec<f64>; 3]> = tools.iter().map(|_| Default::default()).collect();
        for round in 0..runs.max(1) {
            let mut order: Vec<usize> = (0..tools.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for t in order {
                let tool = tools[t];
                // Terraform at 10,000 takes minutes per command: once.
                if matches!(tool, Tool::Terraform) && n > 1000 && round > 0 {
                    continue;
                }
                tool.fresh(&dir, &store);
                times[t][0].push(run(&mut tool.cmd(&dir, &rc, &["plan"])));
                tool.fresh(&dir, &store);
                times[t][1].push(run(&mut tool.cmd(&dir, &rc, &["apply", "-auto-approve"])));
                times[t][2].push(run(&mut tool.cmd(
                    &dir,
                    &rc,
                    &["plan", "-detailed-exitcode"],
                )));
                let items = std::fs::read_dir(store.join("items")).unwrap().count();
                assert_eq!(items, n, "{} made {items} items, not {n}", tool.name());
                tool.fresh(&dir, &store);
            }
        }
        let mut rows: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (tool, times) in tools.iter().zip(times) {
            let [plan, apply, noop] = times.map(best_median);
            println!(
                "{:9} {n:>6} kv6_item: plan {}  apply {}  no-op plan {}",
                tool.name(),
                show(plan),
                show(apply),
                show(noop)
            );
            rows.insert(tool.name(), vec![plan, apply, noop]);
        }
        for b in builds {
            let c = &rows[&Tool::Cairn(b).name()];
            if let Some(t) = rows.get("terraform") {
                println!(
                    "  at {n}{}: cairn faster than terraform (medians): plan {:.1}x, apply {:.1}x, no-op plan {:.1}x (goal >= 10x)",
                    b.tag(),
                    t[0].1 / c[0].1,
                    t[1].1 / c[1].1,
                    t[2].1 / c[2].1
                );
            }
        }
        if tf && !rows.contains_key("terraform") {
            println!("  at {n}: terraform not run (CAIRN_BENCH_TF_MAX={tf_max})");
        }
        for (k, what) in ["plan", "apply", "no-op plan"].into_iter().enumerate() {
            let medians: Vec<f64> = builds
                .iter()
                .map(|b| rows[&Tool::Cairn(b).name()][k].1)
                .collect();
            support::compare(
                builds,
                &format!("  at {n}: cairn {what} (median s)"),
                &medians,
            );
        }
    }
}

/// What the sim plugin's processes reported through `SIM_STATS`: processes, their CPU seconds,
/// RPCs by method.
#[derive(Default)]
struct SimStats {
    procs: usize,
    cpu: f64,
    rpcs: BTreeMap<String, u64>,
}

impl SimStats {
    fn read(path: &Path) -> SimStats {
        let mut s = SimStats::default();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let r: serde_json::Value = serde_json::from_str(line).expect("a SIM_STATS line");
            s.procs += 1;
            s.cpu += r["cpu_s"].as_f64().unwrap_or(0.0);
            for (k, v) in r["rpcs"].as_object().into_iter().flatten() {
                *s.rpcs.entry(k.clone()).or_default() += v.as_u64().unwrap_or(0);
            }
        }
        let _ = std::fs::remove_file(path);
        s
    }

    fn total(&self) -> u64 {
        self.rpcs.values().sum()
    }
}

fn sim(builds: &[Build], tmp: &Path, tf: bool) {
    let plugins = PathBuf::from(
        std::env::var("ORACLE_PLUGINS").unwrap_or_else(|_| "/tmp/oracle-plugins".into()),
    );
    if !plugins.join("terraform-provider-sim").exists() {
        println!("== sim plugin: skipped ({} has no terraform-provider-sim; run ../shared/oracle/setup.sh)", plugins.display());
        return;
    }
    let n = env_num("CAIRN_BENCH_SIM_N", 1000);
    let rc = tmp.join("sim.rc");
    rc_file(&rc, "example.com/sim/sim", &plugins);
    let dir = tmp.join("sim");
    let store = dir.join("store");
    let stats = dir.join("stats.jsonl");
    std::fs::create_dir_all(&dir).unwrap();
    // As ../shared/oracle/bench.sh generates it (STYLE=blocks, latency_ms = 0).
    let mut text = String::from("terraform {\n  required_providers {\n    sim = {\n      source = \"example.com/sim/sim\"\n    }\n  }\n}\nprovider \"sim\" {\n  region     = \"bench\"\n  latency_ms = 0\n}\n");
    for i in 0..n {
        text.push_str(&format!(
            "resource \"sim_thing\" \"t{i}\" {{\n  name  = \"t{i}\"\n  value = \"v{i}\"\n}}\ndata \"sim_lookup\" \"t{i}\" {{\n  key = sim_thing.t{i}.id\n}}\n"
        ));
    }
    std::fs::write(dir.join("main.tf"), text).unwrap();
    println!(
        "== slow provider: the Python sim plugin, {n} sim_thing + {n} sim_lookup (one run each)"
    );
    let mut all: BTreeMap<(String, &str), SimStats> = BTreeMap::new();
    let mut walls: BTreeMap<(String, &str), f64> = BTreeMap::new();
    for tool in tools(builds, tf) {
        // One plan first, not measured, so that neither tool pays for files that are cold in
        // the page cache (the Python interpreter and its gRPC and crypto libraries, the tool's
        // own binary): each figure is one run, and the first run on this machine can take
        // twice as long.
        tool.fresh(&dir, &store);
        let mut warm = tool.cmd(&dir, &rc, &["plan"]);
        warm.env("SIM_STORE", &store);
        run(&mut warm);
        tool.fresh(&dir, &store);
        for (label, args) in [
            ("plan", &["plan"][..]),
            ("apply", &["apply", "-auto-approve"][..]),
            ("no-op plan", &["plan", "-detailed-exitcode"][..]),
        ] {
            let mut cmd = tool.cmd(&dir, &rc, args);
            cmd.env("SIM_STORE", &store).env("SIM_STATS", &stats);
            let wall = run(&mut cmd);
            let s = SimStats::read(&stats);
            if s.procs == 0 {
                println!(
                    "{:9} {label:10}: wall {wall:7.2} s; the provider wrote no figures (SIM_STATS)",
                    tool.name()
                );
                continue;
            }
            println!(
                "{:9} {label:10}: wall {wall:7.2} s, provider CPU {:6.2} s in {} process(es), wall/CPU {:.2} (cairn goal <= 1.3), {} RPCs",
                tool.name(),
                s.cpu,
                s.procs,
                wall / s.cpu.max(1e-9),
                s.total()
            );
            all.insert((tool.name(), label), s);
            walls.insert((tool.name(), label), wall);
        }
        tool.fresh(&dir, &store);
    }
    for label in ["plan", "apply", "no-op plan"] {
        let w: Vec<f64> = builds
            .iter()
            .map(|b| {
                walls
                    .get(&(Tool::Cairn(b).name(), label))
                    .copied()
                    .unwrap_or(f64::NAN)
            })
            .collect();
        support::compare(builds, &format!("  {label}: cairn wall (s)"), &w);
    }
    if tf {
        for label in ["plan", "apply", "no-op plan"] {
            let cairn = Tool::Cairn(builds.last().expect("a build")).name();
            let (Some(c), Some(t)) = (
                all.get(&(cairn, label)),
                all.get(&("terraform".to_string(), label)),
            ) else {
                continue;
            };
            let methods: std::collections::BTreeSet<&String> =
                c.rpcs.keys().chain(t.rpcs.keys()).collect();
            let by: Vec<String> = methods
                .into_iter()
                .map(|m| {
                    format!(
                        "{m} {}/{}",
                        c.rpcs.get(m).copied().unwrap_or(0),
                        t.rpcs.get(m).copied().unwrap_or(0)
                    )
                })
                .collect();
            println!(
                "  {label}: RPCs cairn {} vs terraform {} (goal: no more); by method cairn/terraform: {}",
                c.total(),
                t.total(),
                by.join(", ")
            );
        }
    }
}

fn calls(total: usize) {
    let plugin = kv6();
    println!(
        "== Cairn's plugin client: {total} PlanResourceChange calls at parallelism 10 against {}",
        plugin.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let p = PluginProvider::start("kv6", &plugin, &env)
            .await
            .expect("the plugin starts");
        let c = p
            .configure(&Value::object([(
                "store",
                Value::Null(cairn::value::Type::String),
            )]))
            .await
            .expect("configured");
        {
            let start = Instant::now();
            let tasks: Vec<_> = (0..10)
                .map(|t| {
                    let c = Arc::clone(&c);
                    tokio::spawn(async move {
                        for i in 0..total / 10 {
                            let config = Value::object([
                                ("name", Value::string(format!("n{t}-{i}"))),
                                ("value", Value::string("v")),
                            ]);
                            let planned = c
                                .plan_async("kv6_item", None, &Default::default(), &config)
                                .await
                                .unwrap();
                            assert!(planned.planned.get("id").unwrap().is_unknown());
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "cairn plugin client (mutual TLS): {:.0} calls/s ({:.1} µs per call)",
                total as f64 / secs,
                secs * 1e6 / total as f64
            );
        }
    });
    cairn::provider::plugin::shutdown_all();
}

fn main() {
    let runs = env_num("CAIRN_BENCH_RUNS", 1);
    let only = std::env::var("CAIRN_BENCH_ONLY").unwrap_or_default();
    let want = |part: &str| only.is_empty() || only == part;
    let tmp = tempfile::tempdir().unwrap();
    let tf = terraform_wanted();
    let builds = support::builds();
    if want("calls") {
        calls(env_num("CAIRN_BENCH_CALLS", 20_000));
    }
    if want("fast") {
        fast(&builds, runs, tmp.path(), tf);
    }
    if want("sim") {
        sim(&builds, tmp.path(), tf);
    }
}
