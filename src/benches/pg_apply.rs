//! `apply` of 10,000 `terraform_data` on PostgreSQL against the same on sled, in one run
//! (`cargo bench --bench pg_apply`): the real `cairn` binary, a fresh state each time, a real
//! server with PostgreSQL's durable defaults on the loopback interface. Prints best and median
//! of `CAIRN_BENCH_RUNS` (default 3) runs per store and the ratio of the medians.
//! `CAIRN_BENCH_N` overrides 10,000; `CAIRN_BENCH_BEFORE` measures an older build beside this
//! one (`support.rs`).

#[path = "../../state/tests/support/pgserver.rs"]
mod pgserver;

mod support;

fn project(n: usize, schema: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut tf = String::new();
    if let Some(s) = schema {
        tf.push_str(&format!(
            "terraform {{\n  backend \"pg\" {{\n    schema_name = \"{s}\"\n  }}\n}}\n"
        ));
    }
    for i in 0..n {
        tf.push_str(&format!(
            "resource \"terraform_data\" \"r{i}\" {{\n  input = \"value-{i}\"\n}}\n"
        ));
    }
    std::fs::write(dir.path().join("main.tf"), tf).unwrap();
    dir
}

fn main() {
    let Some(server) = pgserver::start_or_skip(false) else {
        return;
    };
    let n = support::env_num("CAIRN_BENCH_N", 10_000);
    let runs = support::env_num("CAIRN_BENCH_RUNS", 3);
    let builds = support::builds();
    let pg_env = [("PG_CONN_STR", server.conn_str())];
    let figs = support::sled_beside(&builds, runs, &pg_env, |on_pg, r, i| {
        project(n, on_pg.then(|| format!("bench_{r}_{i}")).as_deref())
    });
    support::report_sled_beside(&builds, n, "PostgreSQL", &figs);
    support::ratio_of_medians(&builds, "PostgreSQL / sled", &figs.1, &figs.0, "");
}
