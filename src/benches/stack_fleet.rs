//! A stack applied by one runner and by three (`cargo bench --bench stack_fleet`): issue
//! 33's estate of 20 components × 5 deployments of 100 `sim_thing`s each (components in a
//! tree: component `cI` takes an input from `c((I-1)/2)`), every state on PostgreSQL, the
//! sim provider answering each call after `CAIRN_BENCH_LATENCY_MS` (default 20 ms: a cloud
//! API's latency). Each runner is the real `cairn` binary, `stack apply -runner
//! -auto-approve -parallelism=P` in a working directory of its own, all started at once on a
//! fresh schema and sim store; the time is until the last runner ends. Prints both times and
//! their ratio. `CAIRN_BENCH_COMPONENTS`, `CAIRN_BENCH_DEPLOYMENTS`, `CAIRN_BENCH_RESOURCES`
//! and `CAIRN_BENCH_PARALLELISM` (default 4) change the estate; `CAIRN_BENCH_RUNNERS`
//! (default 3) the fleet; `CAIRN_BENCH_BEFORE` an older build beside this one (`support.rs`).
//! Runs in a debug build too: `cargo test --bench stack_fleet`.

#[path = "../../state/tests/support/pgserver.rs"]
mod pgserver;

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{env_num as var, Build};

fn stack(components: usize, resources: usize) -> String {
    let mut c = String::from(
        "required_providers {\n  sim = { source = \"hashicorp/sim\" }\n}\nvariable \"prefix\" {\n  type = string\n}\nprovider \"sim\" \"main\" {\n  config {\n    region = \"main\"\n  }\n}\n",
    );
    for i in 0..components {
        let upstream = if i == 0 {
            "\"root\"".to_string()
        } else {
            format!("component.c{}.id", (i - 1) / 2)
        };
        c.push_str(&format!(
            "component \"c{i}\" {{\n  source    = \"./m\"\n  inputs    = {{ name = \"${{var.prefix}}-c{i}\", upstream = {upstream}, n = {resources} }}\n  providers = {{ sim = provider.sim.main }}\n}}\n"
        ));
    }
    c
}

fn deployments(n: usize) -> String {
    (0..n)
        .map(|d| format!("deployment \"d{d}\" {{\n  inputs = {{ prefix = \"d{d}\" }}\n}}\n"))
        .collect()
}

const MODULE: &str = "terraform {\n  required_providers {\n    sim = { source = \"hashicorp/sim\" }\n  }\n}\nvariable \"name\" {\n  type = string\n}\nvariable \"upstream\" {\n  type = string\n}\nvariable \"n\" {\n  type = number\n}\nresource \"sim_thing\" \"t\" {\n  count = var.n\n  name  = \"${var.name}-${count.index}\"\n  value = var.upstream\n}\noutput \"id\" {\n  value = sim_thing.t[0].id\n}\n";

fn cairn(build: &Build, dir: &Path, args: &[&str], env: &[(&str, String)]) -> Command {
    let mut c = build.command();
    c.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Applies the estate with `runners` runners on a fresh schema and sim store; the wall time
/// until the last one ends.
fn fleet(
    server: &pgserver::PgServer,
    build: &Build,
    runners: usize,
    files: &[(String, String)],
) -> Duration {
    let sim = tempfile::tempdir().unwrap();
    let schema = pgserver::schema(&format!("fleet{runners}{}", build.name));
    let env = [
        ("PG_CONN_STR", server.conn_str()),
        ("SIM_STORE", sim.path().display().to_string()),
        (
            "SIM_LATENCY_MS",
            var("CAIRN_BENCH_LATENCY_MS", 20).to_string(),
        ),
    ];
    let par = format!("-parallelism={}", var("CAIRN_BENCH_PARALLELISM", 4));
    let flag = format!("-backend-config=schema_name={schema}");
    let dirs: Vec<tempfile::TempDir> = (0..runners)
        .map(|_| {
            let d = tempfile::tempdir().unwrap();
            for (p, text) in files {
                let path = d.path().join(p);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            let out = cairn(
                build,
                d.path(),
                &["stack", "init", "-backend=pg", &flag],
                &env,
            )
            .output()
            .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            d
        })
        .collect();
    let start = Instant::now();
    let children: Vec<_> = dirs
        .iter()
        .map(|d| {
            cairn(
                build,
                d.path(),
                &["stack", "apply", "-runner", "-auto-approve", &par],
                &env,
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(l) = text.lines().find(|l| l.contains("Stack apply complete!")) {
            println!("  {l}");
        }
    }
    start.elapsed()
}

fn main() {
    let Some(server) = pgserver::start_or_skip(false) else {
        return;
    };
    let (c, d, r) = (
        var("CAIRN_BENCH_COMPONENTS", 20),
        var("CAIRN_BENCH_DEPLOYMENTS", 5),
        var("CAIRN_BENCH_RESOURCES", 100),
    );
    let n = var("CAIRN_BENCH_RUNNERS", 3);
    let files = vec![
        ("stack.tfcomponent.hcl".to_string(), stack(c, r)),
        ("deploy.tfdeploy.hcl".to_string(), deployments(d)),
        ("m/main.tf".to_string(), MODULE.to_string()),
    ];
    println!("stack apply -runner: {c} components × {d} deployments × {r} sim_things");
    let builds = support::builds();
    let mut ones = Vec::new();
    let mut manys = Vec::new();
    for b in &builds {
        let one = fleet(&server, b, 1, &files).as_secs_f64();
        println!("1 runner{}:  {one:.2} s", b.tag());
        let many = fleet(&server, b, n, &files).as_secs_f64();
        println!("{n} runners{}: {many:.2} s", b.tag());
        println!("{n} runners / 1 runner{}: {:.2}", b.tag(), many / one);
        ones.push(one);
        manys.push(many);
    }
    support::compare(&builds, "1 runner (s)", &ones);
    support::compare(&builds, &format!("{n} runners (s)"), &manys);
}
