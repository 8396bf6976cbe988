//! `apply` of 1,000 `terraform_data` on S3 (moto's server on the loopback interface, a real
//! HTTP S3 endpoint) against the same on sled, in one run (`cargo bench --bench s3_apply`):
//! the real `cairn` binary, a fresh state and a fresh bucket key each time. Prints best and
//! median of `CAIRN_BENCH_RUNS` (default 3) runs per store, the ratio of the medians (issue
//! 29's goal: within 2×) and how many event batch objects the S3 apply wrote.
//! `CAIRN_BENCH_N` overrides 1,000; `CAIRN_BENCH_BEFORE` measures an older build beside this
//! one (`support.rs`).

#[path = "../../state/tests/support/s3server.rs"]
mod s3server;

mod support;

fn project(n: usize, backend: Option<(&str, &str)>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut tf = String::new();
    if let Some((bucket, key)) = backend {
        tf.push_str(&format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key = \"{key}\"\n    \
             region = \"us-east-1\"\n    use_path_style = true\n    use_lockfile = true\n    \
             skip_credentials_validation = true\n    skip_requesting_account_id = true\n  }}\n}}\n"
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
    let Some(server) = s3server::shared() else {
        return;
    };
    let n = support::env_num("CAIRN_BENCH_N", 1_000);
    let runs = support::env_num("CAIRN_BENCH_RUNS", 3);
    let builds = support::builds();
    let bucket = s3server::bucket_name("bench");
    server.bucket(&bucket);
    let env = [
        ("AWS_ACCESS_KEY_ID", s3server::ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", s3server::SECRET_KEY.to_string()),
        ("AWS_ENDPOINT_URL_S3", server.endpoint()),
    ];
    let figs = support::sled_beside(&builds, runs, &env, |on_s3, r, i| {
        let key = format!("run{r}-{i}/terraform.tfstate");
        project(n, on_s3.then_some((bucket.as_str(), key.as_str())))
    });
    let batches = server
        .keys(&bucket)
        .iter()
        .filter(|k| k.starts_with("run0-0/") && k.contains(".cairn/events/"))
        .count();
    println!("event batch objects in one S3 apply: {batches}");
    support::report_sled_beside(&builds, n, "S3", &figs);
    support::ratio_of_medians(&builds, "S3 / sled", &figs.1, &figs.0, " (goal: at most 2)");
}
