//! Where state lives, end to end on the real `cairn` binary: a backend Cairn has no store for
//! is an error naming it, never an empty local state in its place.

use std::path::Path;
use std::process::{Command, Stdio};

fn cairn(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("TF_WORKSPACE")
        .stdin(Stdio::null())
        .output()
        .expect("cairn runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every backend Cairn does not keep state in — and a `cloud` block — stops `init` and every
/// other command with an error at the block that names it and says how to bring the state
/// over; nothing is created. In a child module the block is ignored with a warning, as
/// Terraform does.
#[test]
fn unsupported_backends_are_errors_that_say_how_to_bring_the_state_over() {
    let cases = [
        (
            "gcs",
            "terraform {\n  backend \"gcs\" {\n    bucket = \"b\"\n  }\n}\n",
            "backend \"gcs\"",
            "main.tf:2:3",
        ),
        (
            "azurerm",
            "terraform {\n  backend \"azurerm\" {}\n}\n",
            "backend \"azurerm\"",
            "main.tf:2:3",
        ),
        (
            "remote",
            "terraform {\n  backend \"remote\" {}\n}\n",
            "backend \"remote\"",
            "main.tf:2:3",
        ),
        (
            "http",
            "terraform {\n  backend \"http\" {}\n}\n",
            "backend \"http\"",
            "main.tf:2:3",
        ),
        (
            "consul",
            "terraform {\n  backend \"consul\" {}\n}\n",
            "backend \"consul\"",
            "main.tf:2:3",
        ),
        (
            "kubernetes",
            "\nterraform {\n  backend \"kubernetes\" {}\n}\n",
            "backend \"kubernetes\"",
            "main.tf:3:3",
        ),
        (
            "cloud",
            "terraform {\n  cloud {\n    organization = \"o\"\n  }\n}\n",
            "HCP Terraform (cloud block)",
            "main.tf:2:3",
        ),
    ];
    for (name, tf, what, at) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), tf).unwrap();
        for cmd in [
            &["init"][..],
            &["plan"],
            &["apply", "-auto-approve"],
            &["state", "list"],
        ] {
            let (code, out, err) = cairn(dir.path(), cmd);
            assert_eq!(code, 1, "{name} {cmd:?}:\n{out}\n{err}");
            assert!(
                err.contains(&format!("Error: Unsupported {what}")),
                "{name} {cmd:?}:\n{err}"
            );
            assert!(
                err.contains(&format!("on {at}:")) || err.contains(&format!("at {at}.")),
                "{name} {cmd:?}:\n{err}"
            );
            assert!(
                err.contains("`terraform state pull > x.tfstate`")
                    && err.contains("`cairn state import-tfstate x.tfstate`"),
                "{name} {cmd:?}:\n{err}"
            );
            assert!(!err.contains("Warning"), "{name}: {err}");
        }
        assert!(
            !dir.path().join(".cairn").exists(),
            "{name}: no state may be created"
        );
    }

    // In a child module: a warning, and the root's (local) state works.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("child")).unwrap();
    std::fs::write(
        dir.path().join("child/main.tf"),
        "terraform {\n  backend \"gcs\" {}\n}\noutput \"x\" {\n  value = 1\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("main.tf"),
        "module \"c\" {\n  source = \"./child\"\n}\noutput \"x\" {\n  value = module.c.x\n}\n",
    )
    .unwrap();
    let (code, out, err) = cairn(dir.path(), &["init"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("Warning: Backend configuration ignored"),
        "{all}"
    );
    assert!(all.contains("child/main.tf:2:3"), "{all}");
}
