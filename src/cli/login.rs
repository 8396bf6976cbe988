//! `cairn login [HOST]` and `cairn logout [HOST]`: API tokens in Terraform's
//! `credentials.tfrc.json` (`provider::install::credentials`), which module and provider
//! installation then send to that host.
//!
//! Decisions:
//! - No browser and no OAuth: `login` reads the token from standard input — the whole of it
//!   when standard input is not a terminal (`echo $TOKEN | cairn login`), else after a
//!   `Token for HOST:` prompt with echo turned off. It never prints the token.
//! - The default host is Terraform's, `app.terraform.io`.
//! - A host whose credentials a `credentials` block of the CLI configuration file sets is
//!   refused, as Terraform refuses it: that file is the user's, and Cairn does not rewrite it.

use super::args::LoginArgs;
use super::output::Exit;
use super::Context;
use crate::diag::Diagnostic;
use crate::provider::install::credentials;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::PathBuf;

/// Terraform's default host for `login` and `logout`.
const DEFAULT_HOST: &str = "app.terraform.io";

/// The normalized host, the credentials file, and whether the CLI configuration file sets
/// the host's credentials itself.
fn target(a: &LoginArgs) -> Result<(String, PathBuf, bool), Diagnostic> {
    let given = a.host.as_deref().unwrap_or(DEFAULT_HOST);
    let host = credentials::normalize_host(given).map_err(|e| {
        Diagnostic::error(
            "Invalid hostname",
            format!("The given hostname {given:?} is not valid: {e}."),
        )
    })?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let file = credentials::file(&env).ok_or_else(|| {
        Diagnostic::error(
            "No home directory",
            "HOME is not set, so Cairn cannot find ~/.terraform.d/credentials.tfrc.json.",
        )
    })?;
    let cli = super::config_cmds::cli_config()?;
    let in_file = credentials::read(&file)?.contains_key(&host);
    let from_env = env.keys().any(|k| {
        k.strip_prefix("TF_TOKEN_").is_some_and(|h| {
            h.replace("__", "\u{0}")
                .replace('_', ".")
                .replace('\u{0}', "-")
                .eq_ignore_ascii_case(&host)
        })
    });
    let manual = cli.credentials.contains_key(&host) && !in_file && !from_env;
    Ok((host, file, manual))
}

fn manually_configured(host: &str, verb: &str) -> Diagnostic {
    Diagnostic::error(
        format!("Credentials for {host} are manually configured"),
        format!(
            "The \"cairn {verb}\" command cannot change the credentials for {host} because \
             they are set in a \"credentials\" block of the CLI configuration file. Edit that \
             block instead."
        ),
    )
}

pub(crate) fn login(ctx: &Context, a: &LoginArgs) -> Exit {
    let (host, file, manual) = match target(a) {
        Ok(t) => t,
        Err(d) => return ctx.fail(d, false),
    };
    if manual {
        return ctx.fail(manually_configured(&host, "login"), false);
    }
    ctx.out(&format!(
        "Cairn will store the token in plain text in the following file\nfor use by \
         subsequent commands:\n    {}\n\n",
        file.display()
    ));
    let token = if ctx.stdin_tty {
        ctx.out(&format!("Token for {host}:\n  Enter a value: "));
        let t = read_secret_line();
        ctx.out("\n");
        t
    } else {
        let mut all = String::new();
        std::io::stdin()
            .read_to_string(&mut all)
            .map(|_| all)
            .map_err(|e| format!("cannot read standard input: {e}"))
    };
    let token = match token {
        Ok(t) => t.trim().to_string(),
        Err(e) => {
            return ctx.fail(Diagnostic::error("Failed to read the token", e), false);
        }
    };
    if token.is_empty() {
        return ctx.fail(
            Diagnostic::error(
                "No token given",
                format!(
                    "Cairn read no API token for {host}. Paste the token at the prompt, or \
                     pipe it in: `cairn login {host} < token-file`."
                ),
            ),
            false,
        );
    }
    if token.chars().any(char::is_whitespace) {
        return ctx.fail(
            Diagnostic::error(
                "Invalid token",
                "An API token is one word: the input has whitespace inside it. Give the \
                 token alone.",
            ),
            false,
        );
    }
    if let Err(d) = credentials::store(&file, &host, Some(&token)) {
        return ctx.fail(d, false);
    }
    let (color, _) = ctx.colors(false);
    ctx.out(&format!(
        "{} {}\n\nThe new API token will be used for any future Cairn command that must make\n\
         authenticated requests to {host}.\n",
        paint("Success!", "\x1b[1m\x1b[32m", color),
        paint(
            "Cairn has obtained and saved an API token.",
            "\x1b[1m",
            color
        ),
    ));
    Exit::Ok
}

pub(crate) fn logout(ctx: &Context, a: &LoginArgs) -> Exit {
    let (host, file, manual) = match target(a) {
        Ok(t) => t,
        Err(d) => return ctx.fail(d, false),
    };
    if manual {
        return ctx.fail(manually_configured(&host, "logout"), false);
    }
    match credentials::read(&file) {
        Ok(tokens) if !tokens.contains_key(&host) => {
            ctx.out(&format!("No credentials for {host} are stored.\n\n"));
            return Exit::Ok;
        }
        Ok(_) => {}
        Err(d) => return ctx.fail(d, false),
    }
    ctx.out(&format!(
        "Removing the stored credentials for {host} from the following file:\n    {}\n\n",
        file.display()
    ));
    if let Err(d) = credentials::store(&file, &host, None) {
        return ctx.fail(d, false);
    }
    let (color, _) = ctx.colors(false);
    ctx.out(&format!(
        "{} {}\n\n",
        paint("Success!", "\x1b[1m\x1b[32m", color),
        paint(
            &format!("Cairn has removed the stored API token for {host}."),
            "\x1b[1m",
            color
        ),
    ));
    Exit::Ok
}

fn paint(s: &str, code: &str, color: bool) -> String {
    if color {
        format!("{code}{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

/// One line from the terminal on standard input, with echo off while it is typed.
fn read_secret_line() -> Result<String, String> {
    let mut line = String::new();
    #[cfg(unix)]
    {
        // SAFETY: tcgetattr/tcsetattr on file descriptor 0 with a zeroed termios that
        // tcgetattr fills; the previous settings are restored before returning.
        let mut old: libc::termios = unsafe { std::mem::zeroed() };
        let have = unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut old) } == 0;
        if have {
            let mut quiet = old;
            quiet.c_lflag &= !libc::ECHO;
            quiet.c_lflag |= libc::ECHONL;
            unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &quiet) };
        }
        let r = std::io::stdin().read_line(&mut line);
        if have {
            unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &old) };
        }
        r.map_err(|e| format!("cannot read standard input: {e}"))?;
    }
    #[cfg(not(unix))]
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("cannot read standard input: {e}"))?;
    Ok(line)
}
