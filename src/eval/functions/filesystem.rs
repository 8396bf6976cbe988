//! Filesystem functions: file, fileexists, filebase64, templatefile, file hashes (filemd5,
//! filesha1, filesha256, filesha512, filebase64sha256, filebase64sha512) and the path
//! functions abspath, dirname, basename, pathexpand.
//!
//! Confinement: relative paths resolve against the root module's directory (the working
//! directory, as in Terraform), and no function may
//! read outside the configuration's root directory (`FunctionContext::root_dir`). The check is
//! made on the canonical path (symbolic links followed) when the file exists, and on the
//! lexically normalized path otherwise, so neither `../` nor a link can escape.
//!
//! `templatefile` reads and confines the file here, then evaluates it with the evaluator
//! registered in `TEMPLATE_EVALUATOR` (the expression evaluator registers itself; the function
//! library cannot depend on it directly without a cycle).
//!
//! Any unknown argument gives an unknown result.

use super::{arg_err, call_err, p, str_of, Def, Fail, FunctionContext, Res, Ret, P};
use crate::value::Value;
use crate::value::ValueMap;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// Evaluates a template: `(source, variables, context) -> value or message`. The context is
/// the calling module's, so filesystem functions inside the template stay confined to the
/// same tree and resolve relative paths the same way.
/// The fourth argument names the template's origin for messages (its path, as given).
pub(crate) type TemplateEvaluator =
    fn(&str, &ValueMap, &FunctionContext, &str) -> Result<Value, String>;

/// The template evaluator `templatefile` uses; set once by the expression evaluator.
pub(crate) static TEMPLATE_EVALUATOR: OnceLock<TemplateEvaluator> = OnceLock::new();

const PATH: &[super::Param] = &[p("path", P::Str)];

pub(super) const DEFS: &[Def] = &[
    Def {
        name: "file",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: file,
    },
    Def {
        name: "fileexists",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Bool),
        imp: fileexists,
    },
    Def {
        name: "filebase64",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: filebase64,
    },
    Def {
        name: "filemd5",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: filemd5,
    },
    Def {
        name: "filesha1",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: filesha1,
    },
    Def {
        name: "filesha256",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: filesha256,
    },
    Def {
        name: "filesha512",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: filesha512,
    },
    Def {
        name: "filebase64sha256",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: filebase64sha256,
    },
    Def {
        name: "filebase64sha512",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: filebase64sha512,
    },
    Def {
        name: "templatefile",
        params: &[p("path", P::Str), p("vars", P::Any)],
        variadic: None,
        ret: Ret::From(super::ret_dynamic),
        imp: templatefile,
    },
    Def {
        name: "fileset",
        params: &[p("path", P::Str), p("pattern", P::Str)],
        variadic: None,
        ret: Ret::Fixed(P::Set(&P::Str)),
        imp: fileset,
    },
    Def {
        name: "abspath",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: abspath,
    },
    Def {
        name: "pathexpand",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: pathexpand,
    },
    Def {
        name: "dirname",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: dirname,
    },
    Def {
        name: "basename",
        params: PATH,
        variadic: None,
        ret: Ret::Fixed(P::Str),
        imp: basename,
    },
];

/// `a/./b/../c` → `a/c`, without touching the filesystem.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Resolves `path` against the module directory and checks it stays inside the root.
fn confined(ctx: &FunctionContext, path: &str) -> Result<PathBuf, Fail> {
    // As in Terraform, a relative path is relative to the working directory, which is the
    // root module's directory (`file("${path.module}/x")` in a child module).
    let joined = ctx.root_dir.join(path);
    let root = ctx
        .root_dir
        .canonicalize()
        .unwrap_or_else(|_| normalize(ctx.root_dir));
    let resolved = joined
        .canonicalize()
        .unwrap_or_else(|_| match ctx.root_dir.canonicalize() {
            Ok(dir) => normalize(&dir.join(path)),
            Err(_) => normalize(&joined),
        });
    // The configuration's tree is every module directory it loads, not only the root's: a
    // module above the root (`source = "../../"`, as the examples of public modules call
    // them) reads its own files.
    let module = ctx
        .module_dir
        .canonicalize()
        .unwrap_or_else(|_| normalize(ctx.module_dir));
    if !resolved.starts_with(&root) && !resolved.starts_with(&module) {
        return Err(arg_err(
            0,
            format!(
                "{} is outside the configuration directory {}; file functions may only read \
                 files within the configuration's directory tree (the root module's directory \
                 and the calling module's)",
                crate::eval::convert::quote(path),
                crate::eval::convert::quote(&root.display().to_string())
            ),
        ));
    }
    Ok(resolved)
}

fn read_bytes(ctx: &FunctionContext, path: &str) -> Result<Vec<u8>, Fail> {
    let full = confined(ctx, path)?;
    if !full.exists() {
        return Err(arg_err(
            0,
            format!(
                "no file exists at {}; this function works only with files that are \
                 distributed as part of the configuration source code, so if this file will be \
                 created by a resource in this configuration you must instead obtain this \
                 result from an attribute of that resource",
                crate::eval::convert::quote(path)
            ),
        ));
    }
    std::fs::read(&full).map_err(|e| arg_err(0, format!("failed to read {path}: {e}")))
}

fn read_text(ctx: &FunctionContext, path: &str) -> Result<String, Fail> {
    String::from_utf8(read_bytes(ctx, path)?).map_err(|_| {
        arg_err(
            0,
            format!(
                "contents of {} are not valid UTF-8; use the filebase64 function to obtain the \
                 Base64 encoded contents or the other file functions (e.g. filemd5, filesha256) \
                 to obtain file hashing results instead",
                crate::eval::convert::quote(path)
            ),
        )
    })
}

/// `file(path)`: the file's contents, which must be UTF-8.
fn file(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    Ok(Value::String(read_text(ctx, str_of(&a[0]))?))
}

/// `fileexists(path)`: whether a regular file exists there (a directory is an error).
fn fileexists(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    let path = str_of(&a[0]);
    let full = confined(ctx, path)?;
    match std::fs::metadata(&full) {
        Ok(m) if m.is_file() => Ok(Value::Bool(true)),
        Ok(m) if m.is_dir() => Err(call_err(format!(
            "{} is a directory, not a file",
            crate::eval::convert::quote(path)
        ))),
        Ok(_) => Err(call_err(format!(
            "{} is not a regular file",
            crate::eval::convert::quote(path)
        ))),
        Err(_) => Ok(Value::Bool(false)),
    }
}

fn hashed(a: &[Value], ctx: &FunctionContext, f: impl Fn(&[u8]) -> String) -> Res {
    Ok(Value::String(f(&read_bytes(ctx, str_of(&a[0]))?)))
}

/// `filebase64(path)`: the file's bytes in Base64.
fn filebase64(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    hashed(&a, ctx, super::hashing::b64)
}
/// `filemd5(path)`
fn filemd5(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    use super::hashing::{hex, md5_bytes};
    hashed(&a, ctx, |b| hex(&md5_bytes(b)))
}
/// `filesha1(path)`
fn filesha1(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    use super::hashing::{hex, sha1_bytes};
    hashed(&a, ctx, |b| hex(&sha1_bytes(b)))
}
/// `filesha256(path)`
fn filesha256(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    use super::hashing::{hex, sha256_bytes};
    hashed(&a, ctx, |b| hex(&sha256_bytes(b)))
}
/// `filesha512(path)`
fn filesha512(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    use super::hashing::{hex, sha512_bytes};
    hashed(&a, ctx, |b| hex(&sha512_bytes(b)))
}
/// `filebase64sha256(path)`
fn filebase64sha256(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    use super::hashing::{b64, sha256_bytes};
    hashed(&a, ctx, |b| b64(&sha256_bytes(b)))
}
/// `filebase64sha512(path)`
fn filebase64sha512(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    use super::hashing::{b64, sha512_bytes};
    hashed(&a, ctx, |b| b64(&sha512_bytes(b)))
}

/// `templatefile(path, vars)`: the file rendered as a template with `vars` (an object or map
/// whose keys are identifiers) as its only variables. Unknown path or vars → unknown; unknown
/// parts of vars flow into the template's result.
fn templatefile(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    let src = read_text(ctx, str_of(&a[0]))?;
    let vars = match &a[1] {
        Value::Object(m) | Value::Map(m) => m.clone(),
        other => {
            return Err(arg_err(
                1,
                format!(
                    "invalid vars value: must be a map, not {}",
                    crate::eval::convert::friendly_name(&other.type_of(), false)
                ),
            ))
        }
    };
    for k in vars.keys() {
        let mut chars = k.chars();
        let ok = chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
            && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(arg_err(
                1,
                format!(
                    "invalid template variable name {}: must start with a letter, followed by \
                     zero or more letters, digits, and underscores",
                    crate::eval::convert::quote(k)
                ),
            ));
        }
    }
    let eval = TEMPLATE_EVALUATOR.get().ok_or_else(|| {
        call_err("no template evaluator is registered (the expression evaluator registers one)")
    })?;
    // A template may not call templatefile (as in Terraform): without this, a template that
    // renders itself would recurse until the stack overflows.
    thread_local! {
        static IN_TEMPLATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if IN_TEMPLATE.with(|c| c.replace(true)) {
        return Err(call_err(
            "cannot recursively call templatefile from inside templatefile call",
        ));
    }
    let result = eval(&src, &vars, ctx, str_of(&a[0]));
    IN_TEMPLATE.with(|c| c.set(false));
    result.map_err(|m| {
        if m.starts_with("vars map does not contain key") {
            arg_err(1, m)
        } else {
            call_err(format!("{}: {m}", str_of(&a[0])))
        }
    })
}

/// `fileset(path, pattern)`: the regular files under `path` whose paths relative to it
/// match the glob `pattern` (`*` and `?` within a path segment, `**` across segments,
/// `[a-z]` classes, `{a,b}` alternatives), as a set of `/`-separated relative paths.
fn fileset(a: Vec<Value>, ctx: &FunctionContext) -> Res {
    let base = confined(ctx, str_of(&a[0]))?;
    let pattern = str_of(&a[1]);
    let root = ctx
        .root_dir
        .canonicalize()
        .unwrap_or_else(|_| normalize(ctx.root_dir));
    let pat: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let mut found = Vec::new();
    let mut stack = vec![(base.clone(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let rel_path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let Ok(real) = e.path().canonicalize() else {
                continue;
            };
            if !real.starts_with(&root) {
                continue;
            }
            if real.is_dir() {
                if found.len() + stack.len() < 100_000 {
                    stack.push((real, rel_path));
                }
            } else if real.is_file() {
                let segs: Vec<&str> = rel_path.split('/').collect();
                if glob_segments(&pat, &segs) {
                    found.push(Value::String(rel_path));
                }
            }
        }
    }
    Ok(Value::set(found))
}

/// Matches path segments against pattern segments (`**` spans any number of segments).
fn glob_segments(pat: &[&str], path: &[&str]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|i| glob_segments(rest, &path[i..])),
        Some((p, rest)) => match path.split_first() {
            Some((s, path_rest)) => {
                glob_one(
                    &p.chars().collect::<Vec<_>>(),
                    &s.chars().collect::<Vec<_>>(),
                ) && glob_segments(rest, path_rest)
            }
            None => false,
        },
    }
}

/// Matches one segment: `*`, `?`, `[...]` (with `!`/`^` negation and ranges), `{a,b}`,
/// `\` escapes.
fn glob_one(p: &[char], s: &[char]) -> bool {
    let Some(&c) = p.first() else {
        return s.is_empty();
    };
    match c {
        '*' => (0..=s.len()).any(|i| glob_one(&p[1..], &s[i..])),
        '?' => !s.is_empty() && glob_one(&p[1..], &s[1..]),
        '[' => {
            let Some(end) = p.iter().skip(1).position(|&x| x == ']').map(|e| e + 1) else {
                return !s.is_empty() && s[0] == '[' && glob_one(&p[1..], &s[1..]);
            };
            let Some(&ch) = s.first() else { return false };
            let mut class = &p[1..end];
            let negate = matches!(class.first(), Some('!') | Some('^'));
            if negate {
                class = &class[1..];
            }
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == '-' {
                    hit |= class[i] <= ch && ch <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == ch;
                    i += 1;
                }
            }
            hit != negate && glob_one(&p[end + 1..], &s[1..])
        }
        '{' => {
            let Some(end) = p.iter().position(|&x| x == '}') else {
                return !s.is_empty() && s[0] == '{' && glob_one(&p[1..], &s[1..]);
            };
            let inner: String = p[1..end].iter().collect();
            inner.split(',').any(|alt| {
                let mut q: Vec<char> = alt.chars().collect();
                q.extend_from_slice(&p[end + 1..]);
                glob_one(&q, s)
            })
        }
        '\\' if p.len() > 1 => !s.is_empty() && s[0] == p[1] && glob_one(&p[2..], &s[1..]),
        c => !s.is_empty() && s[0] == c && glob_one(&p[1..], &s[1..]),
    }
}

/// `abspath(path)`: the absolute path, resolved against the current directory (as Terraform
/// does), with `/` separators. Does not read the filesystem beyond the current directory.
fn abspath(a: Vec<Value>, _: &FunctionContext) -> Res {
    let path = Path::new(str_of(&a[0]));
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| call_err(e.to_string()))?
            .join(path)
    };
    Ok(Value::String(
        normalize(&full).to_string_lossy().replace('\\', "/"),
    ))
}

/// `pathexpand(path)`: a leading `~` (alone or before a `/`) becomes the user's home
/// directory, as Terraform's go-homedir does (`$HOME`, else the password database); the
/// result is cleaned as Go's `filepath.Join` cleans it. Other paths are returned unchanged;
/// `~user/...` is an error.
fn pathexpand(a: Vec<Value>, _: &FunctionContext) -> Res {
    let path = str_of(&a[0]);
    let Some(rest) = path.strip_prefix('~') else {
        return Ok(Value::String(path.to_string()));
    };
    if !(rest.is_empty() || rest.starts_with('/') || rest.starts_with('\\')) {
        return Err(call_err("cannot expand user-specific home dir"));
    }
    let home = std::env::home_dir()
        .filter(|h| !h.as_os_str().is_empty())
        .ok_or_else(|| call_err("cannot determine the home directory"))?;
    Ok(Value::String(go_clean(&format!(
        "{}/{rest}",
        home.to_string_lossy()
    ))))
}

/// Go's `filepath.Dir`: everything but the last element, cleaned; `.` when there is none.
fn dirname(a: Vec<Value>, _: &FunctionContext) -> Res {
    let path = str_of(&a[0]);
    let dir = match path.rfind('/') {
        Some(i) => &path[..=i],
        None => "",
    };
    Ok(Value::String(go_clean(dir)))
}

/// Go's `filepath.Base`: the last element; `.` for an empty path, `/` for the root.
fn basename(a: Vec<Value>, _: &FunctionContext) -> Res {
    let path = str_of(&a[0]);
    if path.is_empty() {
        return Ok(Value::String(".".into()));
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(Value::String("/".into()));
    }
    let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
    Ok(Value::String(base.to_string()))
}

/// Go's `path.Clean`.
fn go_clean(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let body = parts.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{call, testing::*, FunctionContext};
    use crate::value::{Type, Value};
    use std::path::Path;

    fn in_dir(root: &Path, module: &Path, name: &str, args: Vec<Value>) -> Result<Value, String> {
        let ctx = FunctionContext {
            module_dir: module,
            root_dir: root,
            settle_impure: false,
        };
        call(name, args, &ctx).map_err(|e| e.message)
    }

    #[test]
    fn reads_confined_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let module = root.join("modules/m");
        std::fs::create_dir_all(&module).unwrap();
        std::fs::write(module.join("hello.txt"), "Hello\n").unwrap();
        std::fs::write(root.join("top.txt"), "top").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        std::fs::write(module.join("bin"), [0xff, 0x00]).unwrap();

        let f = |name: &str, path: &str| in_dir(&root, &module, name, vec![s(path)]);
        // Relative paths are relative to the root module's directory, as in Terraform.
        assert_eq!(f("file", "modules/m/hello.txt"), Ok(s("Hello\n")));
        assert_eq!(f("file", "top.txt"), Ok(s("top")));
        assert_eq!(f("file", "modules/m/../../top.txt"), Ok(s("top")));
        assert_eq!(f("fileexists", "modules/m/hello.txt"), Ok(b(true)));
        assert_eq!(f("fileexists", "nope.txt"), Ok(b(false)));
        assert_eq!(f("filebase64", "modules/m/bin"), Ok(s("/wA=")));
        assert_eq!(
            f("filemd5", "modules/m/hello.txt"),
            Ok(s("09f7e02f1290be211da707a266f153b3"))
        );
        let outside = f("file", "../secret.txt").unwrap_err();
        assert!(
            outside.starts_with(
                "Invalid value for \"path\" parameter: \"../secret.txt\" is outside the \
                 configuration directory"
            ),
            "{outside}"
        );
        assert!(f("fileexists", "../nope.txt").is_err());
        let abs = dir.path().join("secret.txt");
        assert!(f("file", abs.to_str().unwrap()).is_err());
        assert_eq!(
            f("file", "missing.txt").unwrap_err(),
            "Invalid value for \"path\" parameter: no file exists at \"missing.txt\"; this \
             function works only with files that are distributed as part of the configuration \
             source code, so if this file will be created by a resource in this configuration \
             you must instead obtain this result from an attribute of that resource."
        );
        assert!(f("file", "modules/m/bin")
            .unwrap_err()
            .contains("are not valid UTF-8"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("secret.txt"), module.join("link")).unwrap();
            assert!(f("file", "modules/m/link")
                .unwrap_err()
                .contains("is outside the configuration"));
        }
    }

    #[test]
    fn globs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in ["a.txt", "b.json", "sub/c.txt", "sub/deep/d.txt", "sub/e.md"] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let set = |v: &[&str]| Value::set(v.iter().map(|x| s(x)).collect());
        let f = |pat: &str| in_dir(root, root, "fileset", vec![s("."), s(pat)]);
        assert_eq!(f("*.txt"), Ok(set(&["a.txt"])));
        assert_eq!(
            f("**/*.txt"),
            Ok(set(&["a.txt", "sub/c.txt", "sub/deep/d.txt"]))
        );
        assert_eq!(f("sub/*"), Ok(set(&["sub/c.txt", "sub/e.md"])));
        assert_eq!(f("*.{json,md}"), Ok(set(&["b.json"])));
        assert_eq!(f("[ab].*"), Ok(set(&["a.txt", "b.json"])));
        assert_eq!(
            in_dir(root, root, "fileset", vec![s("sub"), s("*")]),
            Ok(set(&["c.txt", "e.md"]))
        );
        assert!(in_dir(
            &root.join("sub"),
            &root.join("sub"),
            "fileset",
            vec![s(".."), s("*")]
        )
        .unwrap_err()
        .contains("is outside the configuration directory"));
    }

    #[test]
    fn templates() {
        super::TEMPLATE_EVALUATOR.get_or_init(|| crate::eval::eval_template_string);
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let module = root.join("m");
        std::fs::create_dir_all(&module).unwrap();
        std::fs::write(
            module.join("t.tpl"),
            "Hello ${name}!%{ for x in items } ${x}%{ endfor } ${file(\"m/part.txt\")}",
        )
        .unwrap();
        std::fs::write(module.join("part.txt"), "part").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        std::fs::write(module.join("escape.tpl"), "${file(\"../secret.txt\")}").unwrap();
        let vars = obj(vec![("name", s("web")), ("items", strs(&["a", "b"]))]);
        let t =
            |path: &str, vars: Value| in_dir(&root, &module, "templatefile", vec![s(path), vars]);
        assert_eq!(t("m/t.tpl", vars.clone()), Ok(s("Hello web! a b part")));
        assert!(t("m/escape.tpl", obj(vec![]))
            .unwrap_err()
            .contains("outside the configuration"));
        assert_eq!(
            t(
                "m/t.tpl",
                obj(vec![("name", unk(Type::String)), ("items", strs(&[]))])
            ),
            Ok(unk(Type::String))
        );
        assert!(t("m/t.tpl", s("x"))
            .unwrap_err()
            .contains("invalid vars value"));
        std::fs::write(
            module.join("self.tpl"),
            "${templatefile(\"m/self.tpl\", {})}",
        )
        .unwrap();
        let err = t("m/self.tpl", obj(vec![])).unwrap_err();
        assert!(
            err.contains("cannot recursively call templatefile from inside templatefile call"),
            "{err}"
        );
        // The guard is released afterwards.
        assert_eq!(t("m/t.tpl", vars), Ok(s("Hello web! a b part")));
    }

    #[test]
    fn unknown_paths() {
        check("file", vec![unk(Type::String)], unk(Type::String));
        check("fileexists", vec![unk(Type::String)], unk(Type::Bool));
    }

    #[test]
    fn path_functions() {
        check("dirname", vec![s("foo/bar/baz.txt")], s("foo/bar"));
        check("dirname", vec![s("baz.txt")], s("."));
        check("dirname", vec![s("/baz.txt")], s("/"));
        check("basename", vec![s("foo/bar/baz.txt")], s("baz.txt"));
        check("basename", vec![s("foo/bar/")], s("bar"));
        check("basename", vec![s("")], s("."));
        let abs = run("abspath", vec![s("a/../b")]).unwrap();
        assert!(abs.as_str().unwrap().ends_with("/b"), "{abs:?}");
    }
}
