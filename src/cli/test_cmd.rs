//! `cairn test`: runs the configuration's `*.tftest.hcl` files through the engine's test
//! runner (`engine::test_runner`) and prints what it reports as Terraform's `terraform test`
//! does — a line per file and run, diagnostics on standard error, the closing count — or, with
//! `-json`, Terraform's machine-readable messages (`test_abstract`, `test_file`, `test_run`,
//! `diagnostic`, `test_summary`).
//!
//! Decisions:
//! - Exit 1 when any run failed or errored, 0 otherwise (as Terraform).
//! - `-verbose` shows each run's plan (`command = plan`) or the state it left (`apply`) with
//!   Cairn's plan and state renderers.

use super::args::TestArgs;
use super::engine_options::base_options;
use super::lifecycle::block_on;
use super::output::{Exit, JsonUi};
use super::Context;
use crate::engine::test_runner::{
    run_tests, Found, Shown, TestEvent, TestObserver, TestRequest, TestStatus, TestSummary,
};
use crate::plan::render::{render_plan, render_state, RenderOptions};
use serde_json::{json, Map, Value as J};
use std::sync::Mutex;

pub(crate) fn test(ctx: &Context, a: &TestArgs, vars: Vec<crate::config::VarArg>) -> Exit {
    let opts = base_options(ctx, "test", vars);
    let req = TestRequest {
        base: opts.clone(),
        test_directory: a.test_directory.clone(),
        filter: a.filter.clone(),
        verbose: a.verbose,
    };
    let (color, err_color) = ctx.colors(a.ui.no_color);
    let json_ui =
        a.ui.json
            .then(|| JsonUi::new(ctx.stdout.clone(), super::output::system_clock()));
    if let Some(ui) = &json_ui {
        ui.version();
    }
    let printer = Printer {
        ctx,
        json: json_ui.as_ref(),
        color,
        err_color,
        run_start: Mutex::new(std::time::Instant::now()),
    };
    let summary = match block_on(ctx, &opts, run_tests(&req, &printer)) {
        Ok(Ok(s)) => s,
        Ok(Err((diags, sources))) => {
            match &json_ui {
                Some(ui) => diags.iter().for_each(|d| ui.diagnostic(&sources, d)),
                None => {
                    ctx.report(&sources, &diags, a.ui.no_color);
                }
            }
            return Exit::Error;
        }
        Err(d) => return ctx.fail(d, a.ui.no_color),
    };
    printer.summary(&summary);
    if summary.failed + summary.errored > 0 {
        Exit::Error
    } else {
        Exit::Ok
    }
}

struct Printer<'a> {
    ctx: &'a Context,
    json: Option<&'a JsonUi>,
    color: bool,
    err_color: bool,
    run_start: Mutex<std::time::Instant>,
}

impl Printer<'_> {
    fn paint(&self, status: &str) -> String {
        if !self.color {
            return status.to_string();
        }
        let code = match status {
            "pass" => "32",
            "fail" | "error" => "31",
            "skip" => "33",
            _ => "37",
        };
        format!("\x1b[{code}m{status}\x1b[0m")
    }

    fn found(&self, found: &[Found<'_>], file: &str, run: Option<&str>) {
        for f in found {
            match self.json {
                Some(ui) => {
                    for d in f.diags.iter() {
                        let mut fields = Map::new();
                        fields.insert("@testfile".into(), J::from(file));
                        if let Some(r) = run {
                            fields.insert("@testrun".into(), J::from(r));
                        }
                        fields.insert("diagnostic".into(), f.sources.to_json(d));
                        let (level, word) = if d.is_error() {
                            ("error", "Error")
                        } else {
                            ("warn", "Warning")
                        };
                        ui.emit(
                            level,
                            &format!("{word}: {}", d.summary),
                            "diagnostic",
                            fields,
                        );
                    }
                }
                None => self.ctx.err(&super::output::render_diagnostics(
                    f.sources,
                    f.diags,
                    self.err_color,
                )),
            }
        }
    }

    fn shown(&self, shown: &Shown<'_>) {
        let opts = RenderOptions {
            color: self.color,
            width: super::output::render_width(self.ctx.stdout_tty),
        };
        let text = match shown {
            Shown::Plan(p) => render_plan(p, &opts),
            Shown::State(s) => {
                let view = self.ctx.state_view(s);
                let mut t = render_state(s, &opts, &view.shapes);
                let outputs: Vec<String> = s
                    .outputs
                    .iter()
                    .map(|(k, o)| {
                        let v = if o.sensitive {
                            "<sensitive>".to_string()
                        } else {
                            crate::value::format_hcl(&crate::value::Value::from_stored(&o.value))
                        };
                        format!("{k} = {v}")
                    })
                    .collect();
                if !outputs.is_empty() {
                    t.push_str(&format!("\n\nOutputs:\n\n{}\n", outputs.join("\n")));
                }
                t
            }
        };
        self.ctx.out(&format!("\n{}\n", text.trim_end()));
        self.ctx.out("\n");
    }

    /// What a teardown left in its state: Terraform's `test_cleanup` message.
    fn cleanup(&self, file: &str, run: &str, left: &[String]) {
        if left.is_empty() {
            return;
        }
        match self.json {
            Some(ui) => {
                let mut f = Map::new();
                f.insert("@testfile".into(), J::from(file));
                f.insert("@testrun".into(), J::from(run));
                let failed: Vec<J> = left.iter().map(|a| json!({"instance": a})).collect();
                f.insert("test_cleanup".into(), json!({"failed_resources": failed}));
                ui.emit(
                    "error",
                    &format!("Cairn left some resources in state after executing {file}/{run}, they need to be cleaned up manually."),
                    "test_cleanup",
                    f,
                );
            }
            None => {
                let list: Vec<String> = left.iter().map(|a| format!("  - {a}\n")).collect();
                self.ctx.err(&format!(
                    "\nCairn left the following resources in state after executing {file}/{run}, and they need to be cleaned up manually:\n{}",
                    list.concat()
                ));
            }
        }
    }

    fn summary(&self, s: &TestSummary) {
        let failed = s.failed + s.errored;
        let ok = failed == 0;
        let mut text = format!(
            "{} {} passed, {} failed",
            if ok { "Success!" } else { "Failure!" },
            s.passed,
            failed
        );
        if s.skipped > 0 {
            text.push_str(&format!(", {} skipped", s.skipped));
        }
        text.push('.');
        match self.json {
            Some(ui) => {
                let status = s.status.unwrap_or(TestStatus::Pass);
                let status = if status == TestStatus::Pending {
                    TestStatus::Pass
                } else {
                    status
                };
                let mut f = Map::new();
                f.insert(
                    "test_summary".into(),
                    json!({"status": status.word(), "passed": s.passed, "failed": s.failed, "errored": s.errored, "skipped": s.skipped}),
                );
                ui.emit("info", &text, "test_summary", f);
            }
            None => {
                let head = if self.color {
                    let (c, w) = if ok {
                        ("32", "Success!")
                    } else {
                        ("31", "Failure!")
                    };
                    text.replacen(w, &format!("\x1b[{c}m{w}\x1b[0m"), 1)
                } else {
                    text
                };
                self.ctx.out(&format!("\n{head}\n"));
            }
        }
    }

    fn file_msg(&self, file: &str, progress: &str, status: Option<TestStatus>, word: &str) {
        match self.json {
            Some(ui) => {
                let mut tf = json!({"path": file, "progress": progress});
                if let Some(s) = status {
                    tf["status"] = J::from(s.word());
                }
                let mut f = Map::new();
                f.insert("@testfile".into(), J::from(file));
                f.insert("test_file".into(), tf);
                ui.emit("info", &format!("{file}... {word}"), "test_file", f);
            }
            None => self.ctx.out(&format!("{file}... {}\n", self.paint(word))),
        }
    }

    fn run_msg(
        &self,
        file: &str,
        run: &str,
        progress: &str,
        status: Option<TestStatus>,
        word: &str,
    ) {
        let ui = self.json.expect("json");
        let mut tr = json!({"path": file, "run": run, "progress": progress});
        if let Some(s) = status {
            tr["status"] = J::from(s.word());
        } else {
            let elapsed = self.run_start.lock().expect("clock").elapsed().as_millis() as u64;
            tr["elapsed"] = J::from(if progress == "starting" { 0 } else { elapsed });
        }
        let mut f = Map::new();
        f.insert("@testfile".into(), J::from(file));
        f.insert("@testrun".into(), J::from(run));
        f.insert("test_run".into(), tr);
        ui.emit("info", &format!("  {run:?}... {word}"), "test_run", f);
    }
}

impl TestObserver for Printer<'_> {
    fn event(&self, e: TestEvent<'_>) {
        match e {
            TestEvent::Abstract(files) => {
                if let Some(ui) = self.json {
                    let runs: usize = files.iter().map(|(_, r)| r.len()).sum();
                    let plural = |n: usize, w: &str| {
                        if n == 1 {
                            format!("{n} {w}")
                        } else {
                            format!("{n} {w}s")
                        }
                    };
                    let mut abs = Map::new();
                    for (f, r) in files {
                        abs.insert(f.clone(), json!(r));
                    }
                    let mut f = Map::new();
                    f.insert("test_abstract".into(), J::Object(abs));
                    ui.emit(
                        "info",
                        &format!(
                            "Found {} and {}",
                            plural(files.len(), "file"),
                            plural(runs, "run block")
                        ),
                        "test_abstract",
                        f,
                    );
                }
            }
            TestEvent::FileStart(file) => self.file_msg(file, "starting", None, "in progress"),
            TestEvent::RunStart { file, run } => {
                *self.run_start.lock().expect("clock") = std::time::Instant::now();
                if self.json.is_some() {
                    self.run_msg(file, run, "starting", None, "in progress");
                }
            }
            TestEvent::RunDone {
                file,
                run,
                status,
                shown,
                found,
            } => {
                match self.json {
                    Some(_) => {
                        self.run_msg(file, run, "complete", Some(status), shown_word(status))
                    }
                    None => self.ctx.out(&format!(
                        "  run {run:?}... {}\n",
                        self.paint(shown_word(status))
                    )),
                }
                if let (Some(s), None) = (&shown, self.json) {
                    self.shown(s);
                }
                self.found(&found, file, Some(run));
            }
            TestEvent::Teardown(file) => self.file_msg(file, "teardown", None, "tearing down"),
            TestEvent::TeardownRun {
                file,
                run,
                found,
                left,
            } => {
                if self.json.is_some() {
                    self.run_msg(file, run, "teardown", None, "tearing down");
                } else if !found.is_empty() {
                    self.ctx.err(&format!("Cairn encountered an error destroying resources created while executing {file}/{run}.\n"));
                }
                match self.json {
                    Some(_) => {
                        self.cleanup(file, run, left);
                        self.found(&found, file, Some(run));
                    }
                    None => {
                        self.found(&found, file, Some(run));
                        self.cleanup(file, run, left);
                    }
                }
            }
            TestEvent::FileDone {
                file,
                status,
                found,
            } => {
                self.found(&found, file, None);
                self.file_msg(file, "complete", Some(status), shown_word(status));
            }
        }
    }
}

/// The word a status is printed as: an errored run or file reads "fail", as in Terraform
/// (its `-json` status field still says `error`).
fn shown_word(status: TestStatus) -> &'static str {
    match status {
        TestStatus::Error => "fail",
        s => s.word(),
    }
}
