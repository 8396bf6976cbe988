//! Issue 33: a stack run's history record on S3: one object per entry under the stack's
//! prefix (`KEY.cairn/stack-runs/RUN/ENTRY`), seen by another working copy.

use super::{S3Stack, KEY};

#[test]
fn stack_runs_are_objects_under_the_stacks_prefix() {
    let Some(stack) = S3Stack::new("stackhist") else {
        return;
    };
    let (server, bucket, init) = (stack.server, &stack.bucket, stack.init());
    let copy = || stack.copy();
    let a = copy();
    a.ok(&init);
    a.ok(&["stack", "apply", "-auto-approve"]);
    // Nothing of the history is in the working copy: it is in the bucket.
    assert!(!a.dir.path().join(".cairn/stack-runs").exists());
    let prefix = format!("{KEY}.cairn/stack-runs/");
    let keys: Vec<String> = server
        .keys(bucket)
        .into_iter()
        .filter(|k| k.starts_with(&prefix))
        .collect();
    // The start, each component run as it began (first; then first and second, twice),
    // three rounds, the end.
    assert_eq!(keys.len(), 10, "{keys:?}");

    let b = copy();
    b.ok(&init);
    let out = b.ok(&["stack", "history", "-json"]);
    let runs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 1, "{out}");
    assert_eq!(runs[0]["command"], "stack apply");
    assert_eq!(runs[0]["outcome"], "success");
    let id = runs[0]["id"].as_str().unwrap();
    assert!(
        keys.iter()
            .all(|k| k.starts_with(&format!("{prefix}{id}/"))),
        "{keys:?}"
    );
    let full: serde_json::Value =
        serde_json::from_str(&b.ok(&["stack", "history", id, "-json"])).unwrap();
    let second = full["steps"][1]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["workspace"] == "dev.second")
        .unwrap()
        .clone();
    assert_eq!(second["status"], "applied", "{full:#}");
    assert_eq!(second["runs"].as_array().unwrap().len(), 1, "{second}");
}
