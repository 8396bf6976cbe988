//! Workspaces: several states for one configuration, as `terraform workspace` keeps them.
//!
//! A state directory (the *root*: `.cairn`, `-state-dir`, `CAIRN_STATE_DIR`) holds the
//! `default` workspace's state. Every other workspace is a state directory of its own,
//! `<root>/workspaces/<name>/`, marked by a `workspace.json` that names it, with its own log
//! (its own history, lock and checkpoints). A workspace takes the root's backend
//! (`<root>/backend.json`): on sled its log is in its own directory; on PostgreSQL it is the
//! schema `<schema>:<name>` beside the root's schema, so every machine of a team sees the
//! workspaces the others created. The selected workspace is `TF_WORKSPACE` when set, else the
//! name in `<root>/environment` (written by `cairn workspace select|new`), else `default`.
//!
//! Only this module knows the layout; the store resolves a workspace's backend through
//! [`of_dir`] and [`pg_schema`].

use crate::backend_config::{read_backend, Backend};
use crate::error::StateError;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace every state has.
pub const DEFAULT: &str = "default";
/// The folder of the root state directory that holds the other workspaces.
pub(crate) const WORKSPACES_DIR: &str = "workspaces";
/// The marker of a workspace's state directory.
pub(crate) const WORKSPACE_FILE: &str = "workspace.json";
/// The file of the root state directory that names the selected workspace.
pub const ENVIRONMENT_FILE: &str = "environment";

#[derive(Serialize, Deserialize)]
struct Marker {
    name: String,
}

/// Where the selected workspace's name came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `TF_WORKSPACE`.
    Env,
    /// `<root>/environment`.
    Selected,
    /// Nothing selected: `default`.
    Default,
}

/// Checks a workspace name by Terraform's rule (a non-empty name of URL-safe characters with
/// no path separator), and refuses `.` and `..`, which would name a directory that is not the
/// workspace's.
pub fn check_name(name: &str) -> Result<(), String> {
    let url_safe = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '_'
                    | '.'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | ':'
                    | '@'
            )
    };
    if name.is_empty() || !name.chars().all(url_safe) || name == "." || name == ".." {
        return Err(format!(
            "The workspace name {name:?} is not allowed. The name must contain only URL safe \
             characters, and no path separators."
        ));
    }
    Ok(())
}

/// The state directory of workspace `name` under `root`.
pub fn dir(root: &Path, name: &str) -> PathBuf {
    if name == DEFAULT {
        root.to_path_buf()
    } else {
        root.join(WORKSPACES_DIR).join(name)
    }
}

/// The workspace a state directory belongs to, when it is not a root (`None`: the root's
/// own, `default`).
pub fn of_dir(dir: &Path) -> Option<(PathBuf, String)> {
    let text = fs::read_to_string(dir.join(WORKSPACE_FILE)).ok()?;
    let marker: Marker = serde_json::from_str(&text).ok()?;
    let root = dir.parent()?.parent()?.to_path_buf();
    Some((root, marker.name))
}

/// The PostgreSQL schema of workspace `name` when the root's schema is `base`.
pub fn pg_schema(base: &str, name: &str) -> Result<String, StateError> {
    if name == DEFAULT {
        return Ok(base.to_string());
    }
    let schema = format!("{base}:{name}");
    // PostgreSQL truncates identifiers to 63 bytes: two workspaces could share a schema.
    if schema.len() > 63 {
        return Err(StateError::Backend {
            message: format!(
                "the workspace name {name:?} is too long for PostgreSQL: its schema \
                 {schema:?} has {} bytes, and PostgreSQL allows 63; choose a name of at \
                 most {} bytes",
                schema.len(),
                63usize.saturating_sub(base.len() + 1)
            ),
        });
    }
    Ok(schema)
}

/// The selected workspace: `TF_WORKSPACE` (given as `env`), else `<root>/environment`, else
/// `default`.
pub fn selected(root: &Path, env: Option<&str>) -> (String, Source) {
    if let Some(w) = env.filter(|w| !w.is_empty()) {
        return (w.to_string(), Source::Env);
    }
    match fs::read_to_string(root.join(ENVIRONMENT_FILE)) {
        Ok(text) if !text.trim().is_empty() => (text.trim().to_string(), Source::Selected),
        _ => (DEFAULT.to_string(), Source::Default),
    }
}

/// Records `name` as the selected workspace (`default` removes the record).
pub fn select(root: &Path, name: &str) -> Result<(), StateError> {
    let path = root.join(ENVIRONMENT_FILE);
    if name == DEFAULT {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StateError::io(
                format!("cannot remove {}", path.display()),
                e,
            )),
            _ => Ok(()),
        };
    }
    fs::create_dir_all(root)
        .map_err(|e| StateError::io(format!("cannot create {}", root.display()), e))?;
    fs::write(&path, format!("{name}\n"))
        .map_err(|e| StateError::io(format!("cannot write {}", path.display()), e))
}

/// The root's backend, resolved against the process environment (`None`: sled).
fn root_pg(root: &Path) -> Result<Option<crate::backend_config::PgConfig>, StateError> {
    match read_backend(root)? {
        Backend::Local | Backend::S3(_) => Ok(None),
        Backend::Pg(s) => s.resolve(&|n| std::env::var(n).ok()).map(Some),
    }
}

/// The root's PostgreSQL backend resolved against the process environment (`None`: the
/// root's state is not on PostgreSQL): what a stack's runner fleet coordinates through.
pub fn root_pg_config(root: &Path) -> Result<Option<crate::backend_config::PgConfig>, StateError> {
    root_pg(root)
}

/// The root's S3 backend, resolved against the process environment.
fn root_s3(root: &Path) -> Result<Option<crate::backend_config::S3Config>, StateError> {
    match read_backend(root)? {
        Backend::S3(s) => s.resolve(&|n| std::env::var(n).ok()).map(Some),
        _ => Ok(None),
    }
}

/// Every workspace of the state, `default` first, then by name: on sled, the marked
/// directories; on PostgreSQL, the workspace schemas that hold a log (whichever machine
/// created them).
pub fn list(root: &Path) -> Result<Vec<String>, StateError> {
    let mut names = match root_pg(root)? {
        Some(pg) => crate::pg_store::workspace_schemas(&pg)?,
        None if root_s3(root)?.is_some() => {
            let s3 = root_s3(root)?.expect("checked");
            crate::s3_store::workspaces(&s3)?
        }
        None => {
            let mut names = Vec::new();
            if let Ok(entries) = fs::read_dir(root.join(WORKSPACES_DIR)) {
                for e in entries.flatten() {
                    if let Some((_, name)) = of_dir(&e.path()) {
                        names.push(name);
                    }
                }
            }
            names
        }
    };
    names.sort();
    names.dedup();
    names.retain(|n| n != DEFAULT);
    names.insert(0, DEFAULT.to_string());
    Ok(names)
}

/// Whether workspace `name` exists.
pub fn exists(root: &Path, name: &str) -> Result<bool, StateError> {
    Ok(name == DEFAULT || list(root)?.iter().any(|n| n == name))
}

/// Makes workspace `name`'s local state directory (and its marker): the workspace exists on
/// sled from then on, and on PostgreSQL once its first writer created its schema.
pub fn ensure_dir(root: &Path, name: &str) -> Result<PathBuf, StateError> {
    let d = dir(root, name);
    if name == DEFAULT {
        return Ok(d);
    }
    fs::create_dir_all(&d)
        .map_err(|e| StateError::io(format!("cannot create {}", d.display()), e))?;
    let marker = d.join(WORKSPACE_FILE);
    if !marker.exists() {
        let text = serde_json::to_string(&Marker {
            name: name.to_string(),
        })
        .unwrap_or_default();
        fs::write(&marker, text)
            .map_err(|e| StateError::io(format!("cannot write {}", marker.display()), e))?;
    }
    Ok(d)
}

/// Deletes workspace `name`: its local directory and, on PostgreSQL, its schema. The caller
/// has checked that it is neither `default` nor selected, and that it is empty or forced.
pub fn delete(root: &Path, name: &str) -> Result<(), StateError> {
    if let Some(pg) = root_pg(root)? {
        crate::pg_store::drop_schema(&pg, &pg_schema(&pg.schema, name)?)?;
    }
    if let Some(s3) = root_s3(root)? {
        crate::s3_store::delete_workspace(&s3.in_workspace(name))?;
    }
    let d = dir(root, name);
    match fs::remove_dir_all(&d) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(StateError::io(format!("cannot remove {}", d.display()), e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_terraforms_rule() {
        for ok in ["dev", "prod-eu_1", "a.b", "x~y", "q:r"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a/b", "a b", "a%b", ".", "..", "a?b", "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_workspace_is_a_marked_directory_and_selection_is_a_file() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(list(root.path()).unwrap(), vec!["default"]);
        let d = ensure_dir(root.path(), "dev").unwrap();
        assert_eq!(d, root.path().join("workspaces/dev"));
        assert_eq!(
            of_dir(&d),
            Some((root.path().to_path_buf(), "dev".to_string()))
        );
        assert_eq!(of_dir(root.path()), None);
        fs::create_dir_all(root.path().join("workspaces/stray")).unwrap();
        assert_eq!(list(root.path()).unwrap(), vec!["default", "dev"]);
        assert_eq!(selected(root.path(), None).1, Source::Default);
        select(root.path(), "dev").unwrap();
        assert_eq!(
            selected(root.path(), None),
            ("dev".to_string(), Source::Selected)
        );
        assert_eq!(selected(root.path(), Some("qa")).1, Source::Env);
        select(root.path(), DEFAULT).unwrap();
        assert_eq!(selected(root.path(), None).0, "default");
        delete(root.path(), "dev").unwrap();
        assert!(!exists(root.path(), "dev").unwrap());
    }

    #[test]
    fn pg_schemas_fit_postgres_identifiers() {
        assert_eq!(pg_schema("s", "default").unwrap(), "s");
        assert_eq!(pg_schema("s", "dev").unwrap(), "s:dev");
        assert!(pg_schema("s", &"x".repeat(62)).is_err());
    }
}
