//! The approval prompt of `apply` and `destroy`: `Do you want to perform these actions?`,
//! accepting only `yes`.
//!
//! Decision: with no terminal on standard input (a pipe, `/dev/null`, CI) or with
//! `-input=false`, Cairn does not read an answer from the pipe: it refuses with an error that
//! says to pass `-auto-approve`. A script that wants to apply must say so explicitly, and a
//! stray `yes` in a pipe never approves a destroy.

use crate::diag::Diagnostic;
use std::io::{BufRead, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// What the prompt is asking about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Question {
    /// `apply`: the plan above.
    Apply,
    /// `destroy` (or `apply -destroy`): how many objects will be deleted.
    Destroy { objects: usize },
    /// `apply -read-only`: record refreshed state, data results and outputs.
    ReadOnly,
}

/// The prompt text, ending with `Enter a value: ` (no newline).
pub(crate) fn prompt_text(q: Question, bold: bool) -> String {
    let (b, r) = if bold {
        ("\x1b[1m", "\x1b[0m")
    } else {
        ("", "")
    };
    let explain = match q {
        Question::Apply => "  Cairn will perform the actions described above.".to_string(),
        Question::Destroy { objects } => format!(
            "  Cairn will destroy {objects} object{}, as shown above.\n  There is no undo.",
            if objects == 1 { "" } else { "s" }
        ),
        Question::ReadOnly => "  Cairn will record the refreshed state, data results and \
                               outputs shown above.\n  No managed object is changed."
            .to_string(),
    };
    format!(
        "\n{b}Do you want to perform these actions?{r}\n{explain}\n  Only 'yes' will be \
         accepted to approve.\n\n  {b}Enter a value:{r} "
    )
}

/// Why asking is impossible, as a diagnostic telling what to do.
pub(crate) fn cannot_ask(command: &str, input_disabled: bool) -> Diagnostic {
    let why = if input_disabled {
        "Input is disabled (-input=false)".to_string()
    } else {
        "Standard input is not a terminal".to_string()
    };
    Diagnostic::error(
        "Approval required",
        format!(
            "{why}, so Cairn cannot ask whether to perform these actions. Review the plan \
             above, then run `cairn {command} -auto-approve` to {} without asking.",
            if command == "destroy" {
                "destroy"
            } else {
                "apply"
            }
        ),
    )
}

/// The outcome of asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Approved,
    /// Anything but `yes` (the answer as typed).
    Declined(String),
}

/// Reads one answer line; only `yes` (surrounding whitespace ignored) approves. End of input
/// declines.
pub(crate) fn read_answer(input: &mut dyn BufRead) -> Answer {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(_) if line.trim() == "yes" => Answer::Approved,
        _ => Answer::Declined(line.trim().to_string()),
    }
}

/// Standard input for a question asked while a run is open: the line typed answers it, and an
/// interrupt (the run's stop flag set by Ctrl-C or SIGTERM) answers at once as end of input
/// (a "no"), as Terraform cancels at its prompt. The line is read on a thread of its own,
/// which reads one line only.
pub(crate) struct InterruptibleStdin {
    line: mpsc::Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
}

impl InterruptibleStdin {
    pub(crate) fn new(stop: Arc<AtomicBool>) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Ok(n) = std::io::stdin().lock().read_line(&mut line) {
                if n > 0 {
                    let _ = tx.send(line.into_bytes());
                }
            }
        });
        InterruptibleStdin {
            line: rx,
            stop,
            buf: Vec::new(),
            pos: 0,
            eof: false,
        }
    }
}

impl Read for InterruptibleStdin {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let b = self.fill_buf()?;
            let n = b.len().min(out.len());
            out[..n].copy_from_slice(&b[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for InterruptibleStdin {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.pos >= self.buf.len() && !self.eof {
            if self.stop.load(Ordering::SeqCst) {
                self.eof = true;
                break;
            }
            match self.line.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    self.buf = line;
                    self.pos = 0;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => self.eof = true,
            }
        }
        if self.pos >= self.buf.len() {
            return Ok(&[]);
        }
        Ok(&self.buf[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_yes_approves() {
        for (input, approved) in [
            ("yes\n", true),
            ("  yes  \n", true),
            ("y\n", false),
            ("YES\n", false),
            ("yes please\n", false),
            ("", false),
        ] {
            let a = read_answer(&mut input.as_bytes());
            assert_eq!(a == Answer::Approved, approved, "{input:?}");
        }
    }

    #[test]
    fn destroy_names_the_count() {
        let t = prompt_text(Question::Destroy { objects: 3 }, false);
        assert!(t.contains("Do you want to perform these actions?"), "{t}");
        assert!(t.contains("Cairn will destroy 3 objects"), "{t}");
        assert!(prompt_text(Question::Destroy { objects: 1 }, false).contains("1 object,"));
    }
}
