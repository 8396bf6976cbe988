//! The `external` provider: `data "external"` runs a program and reads its answer, as
//! hashicorp/external 2.x.
//!
//! ```hcl
//! data "external" "x" {
//!   program     = ["python3", "${path.module}/lookup.py", "--flag"]  # required, non-empty
//!   query       = { name = "web" }                                   # optional map of strings
//!   working_dir = "scripts"                                          # optional
//! }
//! # data.external.x.result: map of strings, as the program printed it
//! ```
//!
//! Behaviour:
//! - the program (`program[0]`, found on `PATH` unless it holds a `/`; a relative path with a
//!   `/` is relative to Cairn's working directory, as Go's `exec` resolves it under Terraform)
//!   runs with the arguments `program[1..]`, in `working_dir` (relative to the working
//!   directory; default the working directory), with the process's environment, and with
//!   `query` as one JSON object on standard input (`{}` when unset);
//! - it must exit 0 and print one JSON object whose values are strings (a `null` value reads
//!   as `""`, as Go's decoder makes it); that object is `result`; `id` is `"-"`;
//! - otherwise the read fails with hashicorp/external's wording: "External Program Execution
//!   Failed" carrying the program's standard error and exit status, or "Unexpected External
//!   Program Results" with the decoding error; a program that cannot be started fails with
//!   "External Program Lookup Failed". Empty strings in `program` are dropped first, as
//!   hashicorp/external does; an empty program is a validation error.
//! - `stop` kills programs still running (their reads fail with "interrupted").

use super::host::Host;
use super::schema_util::{self, get_str, TypeSchema};
use super::{
    ApplyRequest, ApplyResponse, Configured, Planned, Provider, ProviderError, ProviderResult,
};
use crate::addr::Mode;
use crate::diag::{Diagnostic, Diagnostics};
use crate::schema::ProviderSchema;
use crate::value::ValueMap;
use crate::value::{Type, Value};
use async_trait::async_trait;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

const PACKAGE: &str = "external";
const DATA: &str = "external";

/// The `external` provider package (no configuration).
pub(crate) struct ExternalProvider {
    host: Host,
    schema: ProviderSchema,
    data: TypeSchema,
}

impl ExternalProvider {
    pub(crate) fn new(host: Host) -> ExternalProvider {
        let data = TypeSchema::new("Runs a program and reads a JSON object it prints.")
            .required(
                "program",
                Type::list(Type::String),
                "The program and its arguments.",
            )
            .optional(
                "query",
                Type::map(Type::String),
                "Sent to the program as a JSON object on standard input.",
            )
            .optional(
                "working_dir",
                Type::String,
                "The directory the program runs in.",
            )
            .computed(
                "result",
                Type::map(Type::String),
                "The JSON object the program printed.",
            )
            .computed("id", Type::String, "Always \"-\".");
        ExternalProvider {
            host,
            schema: ProviderSchema {
                data_sources: [(DATA.to_string(), data.block.clone())].into(),
                ..ProviderSchema::default()
            },
            data,
        }
    }
}

/// The program's words without empty strings (`None` while any is unknown).
fn program(c: &ValueMap) -> Option<Vec<String>> {
    let elems = c.get("program")?.elements()?;
    let mut out = Vec::new();
    for e in elems {
        if e.is_unknown() {
            return None;
        }
        if let Some(s) = e.as_str().filter(|s| !s.is_empty()) {
            out.push(s.to_string());
        }
    }
    Some(out)
}

#[async_trait]
impl Provider for ExternalProvider {
    fn package(&self) -> &str {
        PACKAGE
    }
    fn schema(&self) -> &ProviderSchema {
        &self.schema
    }
    fn validate(&self, mode: Mode, type_: &str, config: &Value) -> Diagnostics {
        if (mode, type_) != (Mode::Data, DATA) {
            return schema_util::unsupported_type(PACKAGE, type_);
        }
        let mut diags = self.data.check(config);
        if let Ok(c) = self.data.conform(config) {
            let known_list = c["program"].elements().is_some();
            if known_list && program(&c).is_some_and(|p| p.is_empty()) {
                diags.push(Diagnostic::error(
                    "External program missing",
                    "The data source was configured without a program to execute. Verify the \
                     configuration contains at least one non-empty value.",
                ));
            }
        }
        diags
    }
    async fn configure(&self, _config: &Value) -> ProviderResult<Arc<dyn Configured>> {
        let (stop, _) = tokio::sync::watch::channel(false);
        Ok(Arc::new(ExternalInstance {
            host: self.host.clone(),
            data: self.data.clone(),
            stop,
        }))
    }
}

struct ExternalInstance {
    host: Host,
    data: TypeSchema,
    /// Set by `stop`: running programs are killed.
    stop: tokio::sync::watch::Sender<bool>,
}

fn error(summary: &str, detail: String) -> ProviderError {
    ProviderError(format!("{summary}: {detail}"))
}

/// Decodes the program's output as Go's `json.Unmarshal` into `map[string]string` would.
fn decode(stdout: &[u8]) -> Result<ValueMap, String> {
    let j: serde_json::Value = serde_json::from_slice(stdout).map_err(|e| e.to_string())?;
    let serde_json::Value::Object(m) = j else {
        return Err(format!(
            "json: cannot unmarshal {} into Go value of type map[string]string",
            json_kind(&j)
        ));
    };
    m.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, Value::String(s))),
            serde_json::Value::Null => Ok((k, Value::string(""))),
            other => Err(format!(
                "json: cannot unmarshal {} into Go value of type string",
                json_kind(&other)
            )),
        })
        .collect()
}

fn json_kind(j: &serde_json::Value) -> &'static str {
    match j {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

impl ExternalInstance {
    async fn run(&self, c: &ValueMap) -> ProviderResult<ValueMap> {
        let words = program(c).filter(|p| !p.is_empty()).ok_or_else(|| {
            error(
                "External Program Missing",
                "The data source was configured without a program to execute. Verify the \
                     configuration contains at least one non-empty value."
                    .into(),
            )
        })?;
        let query = c["query"].to_json();
        let query = if query.is_null() {
            "{}".to_string()
        } else {
            query.to_string()
        };
        let exe = if words[0].contains('/') {
            self.host.resolve(&words[0])
        } else {
            Path::new(&words[0]).to_path_buf()
        };
        let dir = get_str(c, "working_dir")
            .map(|d| self.host.resolve(d))
            .unwrap_or_else(|| self.host.cwd.clone());
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.args(&words[1..])
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A read abandoned by `stop` drops the child: kill it rather than leave it running.
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            error(
                "External Program Lookup Failed",
                format!(
                    "The data source received an unexpected error while attempting to find \
                     the program.\n\nThe program must be accessible and executable on the \
                     machine where Cairn is running.\n\nProgram: {}\nError: {e}",
                    words[0]
                ),
            )
        })?;
        let mut stdin = child.stdin.take();
        let feed = async move {
            if let Some(stdin) = stdin.as_mut() {
                // A program that exits without reading its input is not an error.
                let _ = stdin.write_all(query.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
            drop(stdin);
        };
        let mut stop = self.stop.subscribe();
        if *stop.borrow() {
            return Err(ProviderError("external: interrupted".into()));
        }
        let output = tokio::select! {
            (_, out) = async { tokio::join!(feed, child.wait_with_output()) } => out,
            _ = stop.changed() => return Err(ProviderError("external: interrupted".into())),
        };
        let output = output.map_err(|e| {
            error(
                "External Program Execution Failed",
                format!(
                    "The data source received an unexpected error while attempting to execute \
                     the program.\n\nProgram: {}\nError: {e}",
                    exe.display()
                ),
            )
        })?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            let state = match output.status.code() {
                Some(code) => format!("exit status {code}"),
                None => "terminated by a signal".to_string(),
            };
            let detail = if stderr.is_empty() {
                format!(
                    "The data source received an unexpected error while attempting to execute \
                     the program.\n\nThe program was executed, however it returned no \
                     additional error messaging.\n\nProgram: {}\nState: {state}",
                    exe.display()
                )
            } else {
                format!(
                    "The data source received an unexpected error while attempting to execute \
                     the program.\n\nProgram: {}\nError Message: {stderr}\nState: {state}",
                    exe.display()
                )
            };
            return Err(error("External Program Execution Failed", detail));
        }
        decode(&output.stdout).map_err(|e| {
            error(
                "Unexpected External Program Results",
                format!(
                    "The data source received unexpected results after executing the \
                     program.\n\nProgram output must be a JSON encoded map of string keys and \
                     string values.\n\nProgram: {}\nResult Error: {e}",
                    exe.display()
                ),
            )
        })
    }
}

#[async_trait]
impl Configured for ExternalInstance {
    fn plan(
        &self,
        type_: &str,
        _prior: Option<&Value>,
        _config: &Value,
    ) -> ProviderResult<Planned> {
        Err(schema_util::unknown_type(PACKAGE, "resource", type_))
    }

    async fn apply(&self, request: ApplyRequest) -> ApplyResponse {
        let type_ = match &request {
            ApplyRequest::Create { type_, .. }
            | ApplyRequest::Update { type_, .. }
            | ApplyRequest::Delete { type_, .. } => type_,
        };
        ApplyResponse {
            new_state: None,
            error: Some(schema_util::unknown_type(PACKAGE, "resource", type_)),
        }
    }

    async fn read(&self, type_: &str, _state: &Value) -> ProviderResult<Option<Value>> {
        Err(schema_util::unknown_type(PACKAGE, "resource", type_))
    }

    async fn read_data(&self, type_: &str, config: &Value) -> ProviderResult<Value> {
        if type_ != DATA {
            return Err(schema_util::unknown_type(PACKAGE, "data source", type_));
        }
        let c = self.data.conform(config)?;
        schema_util::require_known(&Value::Object(c.clone()), "the data source configuration")?;
        let result = self.run(&c).await?;
        Ok(schema_util::data_result(
            &self.data,
            &c,
            [
                ("result".to_string(), Value::Map(result)),
                ("id".to_string(), Value::string("-")),
            ]
            .into(),
        ))
    }

    async fn stop(&self) {
        self.stop.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::testkit::{map, obj, s};

    fn program(words: &[&str]) -> Value {
        Value::List(words.iter().map(|w| s(w)).collect())
    }

    async fn read(dir: &Path, config: Value) -> ProviderResult<Value> {
        let p = ExternalProvider::new(Host::at(dir))
            .configure(&obj(&[]))
            .await
            .expect("configure");
        p.read_data(DATA, &config).await
    }

    #[tokio::test]
    async fn runs_the_program_with_the_query_on_stdin() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("wd")).expect("mkdir");
        // Echoes stdin back as `q`, and where it ran as `pwd`.
        let script = r#"q=$(cat); printf '{"q": "%s", "pwd": "%s", "arg": "%s", "n": null}' "$(echo "$q" | sed 's/"/\\"/g')" "$(pwd)" "$1""#;
        let v = read(
            dir.path(),
            obj(&[
                ("program", program(&["sh", "", "-c", script, "sh", "A1"])),
                ("query", map(&[("name", "web"), ("z", "1")])),
                ("working_dir", s("wd")),
            ]),
        )
        .await
        .expect("read");
        let wd = dir.path().join("wd").canonicalize().expect("canon");
        assert_eq!(
            v.get("result"),
            Some(&Value::Map(
                [
                    ("arg".to_string(), s("A1")),
                    ("n".to_string(), s("")),
                    ("pwd".to_string(), s(&wd.to_string_lossy())),
                    ("q".to_string(), s(r#"{"name":"web","z":"1"}"#)),
                ]
                .into()
            ))
        );
        assert_eq!(v.get("id"), Some(&s("-")));
        assert_eq!(v.get("working_dir"), Some(&s("wd")));
    }

    #[tokio::test]
    async fn failures_carry_stderr_and_decoding_errors() {
        let dir = tempfile::tempdir().expect("dir");
        let run = |script: &str| obj(&[("program", program(&["sh", "-c", script]))]);
        let e = read(dir.path(), run("echo boom >&2; exit 3"))
            .await
            .expect_err("fails");
        assert!(
            e.message.starts_with("External Program Execution Failed: "),
            "{e}"
        );
        assert!(e.message.contains("Error Message: boom\n"), "{e}");
        assert!(e.message.ends_with("State: exit status 3"), "{e}");
        let e = read(dir.path(), run("exit 1")).await.expect_err("fails");
        assert!(
            e.message.contains("returned no additional error messaging"),
            "{e}"
        );
        let e = read(dir.path(), run(r#"echo '{"a": 1}'"#))
            .await
            .expect_err("fails");
        assert!(
            e.message
                .starts_with("Unexpected External Program Results: "),
            "{e}"
        );
        assert!(
            e.message.ends_with(
                "Result Error: json: cannot unmarshal number into Go value of type string"
            ),
            "{e}"
        );
        let e = read(dir.path(), run("echo not-json"))
            .await
            .expect_err("fails");
        assert!(
            e.message
                .contains("Program output must be a JSON encoded map"),
            "{e}"
        );
        let e = read(
            dir.path(),
            obj(&[("program", program(&["./no-such-program"]))]),
        )
        .await
        .expect_err("fails");
        assert!(
            e.message.starts_with("External Program Lookup Failed: "),
            "{e}"
        );
    }

    #[tokio::test]
    async fn stop_kills_a_running_program() {
        let dir = tempfile::tempdir().expect("dir");
        let p = ExternalProvider::new(Host::at(dir.path()))
            .configure(&obj(&[]))
            .await
            .expect("configure");
        let p2 = p.clone();
        let t0 = std::time::Instant::now();
        let task = tokio::spawn(async move {
            p2.read_data(DATA, &obj(&[("program", program(&["sleep", "30"]))]))
                .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        p.stop().await;
        let r = task.await.expect("task");
        assert_eq!(r, Err(ProviderError("external: interrupted".into())));
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn an_empty_program_is_invalid() {
        let p = ExternalProvider::new(Host::at("/"));
        let d = p.validate(Mode::Data, DATA, &obj(&[("program", program(&["", ""]))]));
        assert_eq!(
            d.iter().map(|d| d.summary.as_str()).collect::<Vec<_>>(),
            ["External program missing"]
        );
        let unknown = Value::List(vec![Value::Unknown(Type::String)]);
        assert!(p
            .validate(Mode::Data, DATA, &obj(&[("program", unknown)]))
            .is_empty());
    }
}
