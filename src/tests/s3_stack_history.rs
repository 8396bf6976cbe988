//! Issue 33: a stack run's history record on S3: one object per entry under the stack's
//! prefix (`KEY.cairn/stack-runs/RUN/ENTRY`), seen by another working copy.

use super::{env_creds, s3server, Copy, KEY};

#[test]
fn stack_runs_are_objects_under_the_stacks_prefix() {
    let Some(server) = s3server::shared() else {
        return;
    };
    let bucket = s3server::bucket_name("stackhist");
    server.bucket(&bucket);
    let sim = tempfile::tempdir().unwrap();
    let files = [
        (
            "stack.tfcomponent.hcl",
            "required_providers {\n  sim = { source = \"hashicorp/sim\" }\n}\nprovider \"sim\" \"main\" {\n  config {\n    region = \"main\"\n  }\n}\ncomponent \"first\" {\n  source    = \"./m\"\n  inputs    = { name = \"first\", value = \"v\" }\n  providers = { sim = provider.sim.main }\n}\ncomponent \"second\" {\n  source    = \"./m\"\n  inputs    = { name = \"second\", value = component.first.id }\n  providers = { sim = provider.sim.main }\n}\n",
        ),
        ("deploy.tfdeploy.hcl", "deployment \"dev\" {\n  inputs = {}\n}\n"),
        (
            "m/main.tf",
            "terraform {\n  required_providers {\n    sim = { source = \"hashicorp/sim\" }\n  }\n}\nvariable \"name\" {\n  type = string\n}\nvariable \"value\" {\n  type = string\n}\nresource \"sim_thing\" \"t\" {\n  name  = var.name\n  value = var.value\n}\noutput \"id\" {\n  value = sim_thing.t.id\n}\n",
        ),
    ];
    let copy = || {
        let c = Copy::new(sim.path(), "", &env_creds(&server.endpoint()));
        std::fs::remove_file(c.dir.path().join("main.tf")).unwrap();
        for (p, text) in files {
            let path = c.dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        c
    };
    let init: Vec<String> = vec![
        "stack".to_string(),
        "init".into(),
        "-backend=s3".into(),
        format!("-backend-config=bucket={bucket}"),
        format!("-backend-config=key={KEY}"),
        "-backend-config=region=us-east-1".into(),
        "-backend-config=use_path_style=true".into(),
        "-backend-config=use_lockfile=true".into(),
        "-backend-config=skip_credentials_validation=true".into(),
        "-backend-config=skip_requesting_account_id=true".into(),
        "-backend-config=skip_region_validation=true".into(),
    ];
    let init: Vec<&str> = init.iter().map(String::as_str).collect();
    let a = copy();
    a.ok(&init);
    a.ok(&["stack", "apply", "-auto-approve"]);
    // Nothing of the history is in the working copy: it is in the bucket.
    assert!(!a.dir.path().join(".cairn/stack-runs").exists());
    let prefix = format!("{KEY}.cairn/stack-runs/");
    let keys: Vec<String> = server
        .keys(&bucket)
        .into_iter()
        .filter(|k| k.starts_with(&prefix))
        .collect();
    // The start, three rounds, the end.
    assert_eq!(keys.len(), 5, "{keys:?}");

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
