//! Keeps the documentation honest: README.md and ARCHITECTURE.md are checked the way a reader
//! meets them on GitHub.
//!
//! - every code fence (``` or ~~~, with or without an info string) is closed, and no fence
//!   opens inside another (an unclosed fence once swallowed two README sections whole);
//! - every relative link (`[x](path)`, `[x](path#anchor)`) names a file that exists, and every
//!   `#anchor` names a heading of its file, by GitHub's slug rules;
//! - the README has a contents list that links every `##` and `###` heading;
//! - every command of the clap tree (`src/cli/args.rs`) has a row in the README's command
//!   table;
//! - the README gives exactly two set-up commands, and `.ci/run` runs its test command;
//! - every repository path written in backticks in ARCHITECTURE.md exists.
//!
//! Each problem is reported as `FILE:LINE: what is wrong`, all of them at once. This test needs
//! no part of the cairn library: it reads files.

use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// One Markdown file, split into what a reader sees as prose and what sits in code blocks.
struct Doc {
    name: String,
    lines: Vec<String>,
    /// Per line: whether it is inside a fenced code block (the fence lines included).
    in_fence: Vec<bool>,
    headings: Vec<Heading>,
    /// Problems found while reading (fences).
    problems: Vec<String>,
}

struct Heading {
    line: usize,
    level: usize,
    text: String,
    slug: String,
}

/// A fence line: up to three spaces of indentation, then three or more backticks or tildes.
fn fence_of(line: &str) -> Option<(char, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = rest.chars().take_while(|x| *x == c).count();
    if n < 3 {
        return None;
    }
    let info = rest[n..].trim();
    // A backtick fence's info string may not contain a backtick (that is inline code).
    if c == '`' && info.contains('`') {
        return None;
    }
    Some((c, n, info))
}

fn parse_doc(name: &str, text: &str) -> Doc {
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut in_fence = vec![false; lines.len()];
    let mut problems = Vec::new();
    let mut headings = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    // The open fence: its character, length and line (1-based).
    let mut open: Option<(char, usize, usize)> = None;
    let heading_re = Regex::new(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$").unwrap();
    for (i, line) in lines.iter().enumerate() {
        let no = i + 1;
        if let Some((c, n, start)) = open {
            in_fence[i] = true;
            if let Some((c2, n2, info)) = fence_of(line) {
                if c2 == c && n2 >= n {
                    if info.is_empty() {
                        open = None;
                    } else {
                        problems.push(format!(
                            "{name}:{no}: a fence with info string `{info}` opens inside the \
                             code block opened at line {start}, which is never closed before it"
                        ));
                        // Read on as if the block had been closed and this one opened, so
                        // one missing fence is one problem.
                        open = Some((c2, n2, no));
                    }
                }
            }
            continue;
        }
        if let Some((c, n, _)) = fence_of(line) {
            in_fence[i] = true;
            open = Some((c, n, no));
            continue;
        }
        if let Some(m) = heading_re.captures(line) {
            let text = m[2].to_string();
            let base = slug(&heading_text(&text));
            let count = seen.entry(base.clone()).or_insert(0);
            let slug = if *count == 0 {
                base.clone()
            } else {
                format!("{base}-{count}")
            };
            *count += 1;
            headings.push(Heading {
                line: no,
                level: m[1].len(),
                text,
                slug,
            });
        }
    }
    if let Some((_, _, start)) = open {
        problems.push(format!(
            "{name}:{start}: this code block is never closed (the file ends inside it)"
        ));
    }
    Doc {
        name: name.to_string(),
        lines,
        in_fence,
        headings,
        problems,
    }
}

/// The text GitHub renders for a heading's Markdown: code spans keep their content, links
/// their text, emphasis markers and HTML tags go.
fn heading_text(md: &str) -> String {
    let link = Regex::new(r"!?\[([^\]]*)\]\([^)]*\)").unwrap();
    let tag = Regex::new(r"<[^>]+>").unwrap();
    let mut out = String::new();
    for (k, part) in md.split('`').enumerate() {
        if k % 2 == 1 {
            out.push_str(part);
        } else {
            let part = link.replace_all(part, "$1");
            let part = tag.replace_all(&part, "");
            out.extend(part.chars().filter(|c| *c != '*'));
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lowercase; letters, digits, `-` and `_` kept; each
/// space becomes `-`; every other character is dropped. (Duplicates get `-1`, `-2`, … in
/// `parse_doc`.)
fn slug(text: &str) -> String {
    text.trim()
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

impl Doc {
    /// The prose of the file as one string, code blocks and inline code blanked (line breaks
    /// kept, so offsets still give line numbers): what links and contents are read from.
    fn prose(&self) -> String {
        let mut text = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            if !self.in_fence[i] {
                text.push_str(line);
            }
            text.push('\n');
        }
        // Inline code may run over a line break; blank it, keeping the breaks.
        let code = Regex::new(r"`[^`]*`").unwrap();
        code.replace_all(&text, |m: &regex::Captures<'_>| {
            m[0].chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' })
                .collect::<String>()
        })
        .into_owned()
    }

    /// Every inline link `[text](target)` in the prose: (line, target).
    fn links(&self) -> Vec<(usize, String)> {
        let prose = self.prose();
        let link = Regex::new(r#"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)"#).unwrap();
        link.captures_iter(&prose)
            .map(|c| {
                let at = c.get(0).unwrap().start();
                let line = prose[..at].matches('\n').count() + 1;
                (line, c[1].to_string())
            })
            .collect()
    }

    fn has_anchor(&self, anchor: &str) -> bool {
        self.headings.iter().any(|h| h.slug == anchor)
    }
}

/// Relative links name files that exist; anchors name headings.
fn check_links(doc: &Doc, docs: &[Doc], problems: &mut Vec<String>) {
    let dir = Path::new(&doc.name).parent().unwrap_or(Path::new(""));
    for (line, target) in doc.links() {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let rel = dir.join(path);
        if !path.is_empty() && !root().join(&rel).exists() {
            problems.push(format!(
                "{}:{line}: link to `{target}`: {} does not exist",
                doc.name,
                rel.display()
            ));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        let in_doc = if path.is_empty() {
            Some(doc)
        } else {
            docs.iter().find(|d| Path::new(&d.name) == rel)
        };
        match in_doc {
            Some(d) if !d.has_anchor(anchor) => problems.push(format!(
                "{}:{line}: link to `{target}`: {} has no heading with the anchor `#{anchor}`",
                doc.name, d.name
            )),
            Some(_) => {}
            None if rel.extension().is_some_and(|e| e == "md") => {
                let other = parse_doc(&rel.to_string_lossy(), &read(&rel.to_string_lossy()));
                if !other.has_anchor(anchor) {
                    problems.push(format!(
                        "{}:{line}: link to `{target}`: {} has no heading with the anchor \
                         `#{anchor}`",
                        doc.name,
                        rel.display()
                    ));
                }
            }
            None => {}
        }
    }
}

/// The README's contents list: the list under a `## Contents` heading, linking every `##` and
/// `###` heading (but itself).
fn check_contents(doc: &Doc, problems: &mut Vec<String>) {
    let Some(contents) = doc.headings.iter().position(|h| h.slug == "contents") else {
        problems.push(format!(
            "{}:1: no `## Contents` heading: the README needs a contents list",
            doc.name
        ));
        return;
    };
    let start = doc.headings[contents].line;
    let end = doc
        .headings
        .get(contents + 1)
        .map_or(doc.lines.len(), |h| h.line - 1);
    let listed: Vec<String> = doc
        .links()
        .into_iter()
        .filter(|(line, _)| *line > start && *line <= end)
        .filter_map(|(_, t)| t.strip_prefix('#').map(str::to_string))
        .collect();
    for h in &doc.headings {
        if (h.level == 2 || h.level == 3) && h.slug != "contents" && !listed.contains(&h.slug) {
            problems.push(format!(
                "{}:{}: heading `{}` (#{}) is not linked from the contents list (line {start})",
                doc.name, h.line, h.text, h.slug
            ));
        }
    }
}

/// `ForceUnlock` → `force-unlock`, as clap names a subcommand.
fn kebab(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('-');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// The variants of `pub enum NAME { … }` in `src/cli/args.rs`, as command names.
fn subcommands(args_rs: &str, enum_name: &str) -> Vec<String> {
    let start = args_rs
        .find(&format!("pub enum {enum_name} {{"))
        .unwrap_or_else(|| panic!("src/cli/args.rs: no `pub enum {enum_name}`"));
    let body = &args_rs[start..];
    let body = &body[..body.find("\n}").expect("the enum ends")];
    let variant = Regex::new(r"(?m)^    ([A-Z][A-Za-z]*)\b").unwrap();
    let rename = Regex::new(r#"^\s*#\[command\(name = "([^"]+)"\)\]"#).unwrap();
    let mut names = Vec::new();
    let mut renamed: Option<String> = None;
    for line in body.lines() {
        if let Some(c) = rename.captures(line) {
            renamed = Some(c[1].to_string());
        } else if let Some(c) = variant.captures(line) {
            names.push(renamed.take().unwrap_or_else(|| kebab(&c[1])));
        }
    }
    names
}

/// Every command in the clap tree has a row `| `cairn NAME…` | … |` in the README.
fn check_command_table(doc: &Doc, problems: &mut Vec<String>) {
    let args_rs = read("src/cli/args.rs");
    let mut commands: Vec<String> = Vec::new();
    for name in subcommands(&args_rs, "Command") {
        match name.as_str() {
            "state" => commands.extend(
                subcommands(&args_rs, "StateCommand")
                    .iter()
                    .map(|s| format!("state {s}")),
            ),
            "workspace" => commands.extend(
                subcommands(&args_rs, "WorkspaceCommand")
                    .iter()
                    .map(|s| format!("workspace {s}")),
            ),
            _ => commands.push(name),
        }
    }
    let rows: Vec<&str> = doc
        .lines
        .iter()
        .filter(|l| l.starts_with("| `cairn "))
        .map(|l| &l["| `cairn ".len()..])
        .collect();
    // Problems point at the table's first row (or the top, when there is no table).
    let table = doc
        .lines
        .iter()
        .position(|l| l.starts_with("| `cairn "))
        .map_or(1, |i| i + 1);
    for c in commands {
        let found = rows.iter().any(|r| {
            r.strip_prefix(c.as_str())
                .is_some_and(|rest| rest.starts_with([' ', '`']))
        });
        if !found {
            problems.push(format!(
                "{}:{table}: `cairn {c}` (a command in src/cli/args.rs) has no row in the \
                 command table (a row starting `| `cairn {c}`)",
                doc.name
            ));
        }
    }
}

/// Exactly two set-up commands, in the first code block under `## Set up`; `.ci/run` runs the
/// second (the tests).
fn check_setup(doc: &Doc, problems: &mut Vec<String>) {
    let Some(h) = doc.headings.iter().find(|h| h.slug == "set-up") else {
        problems.push(format!("{}:1: no `## Set up` section", doc.name));
        return;
    };
    let Some(open) = (h.line..doc.lines.len()).find(|&i| doc.in_fence[i]) else {
        problems.push(format!("{}:{}: no code block under it", doc.name, h.line));
        return;
    };
    let commands: Vec<(usize, &str)> = (open + 1..doc.lines.len())
        .take_while(|&i| fence_of(&doc.lines[i]).is_none())
        .map(|i| (i + 1, doc.lines[i].trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if commands.len() != 2 {
        problems.push(format!(
            "{}:{}: the set-up block gives {} commands; it must give exactly two (Cairn's main \
             job on a shipped example, and the tests)",
            doc.name,
            open + 1,
            commands.len()
        ));
        return;
    }
    let (line, test) = commands[1];
    let test = test.split(" #").next().unwrap_or(test).trim();
    let ci = read(".ci/run");
    if !ci.lines().any(|l| l.trim().starts_with(test)) {
        problems.push(format!(
            "{}:{line}: .ci/run does not run the README's test command `{test}`",
            doc.name
        ));
    }
}

/// Backticked repository paths in ARCHITECTURE.md exist. A `*` or a `<placeholder>` matches
/// within one name; a path cut short with `…` (`src/…`) names no file and is not checked.
fn check_paths(doc: &Doc, problems: &mut Vec<String>) {
    let path = Regex::new(r"^(src|state|graph|fixtures|proptests)/[^\s…]*$").unwrap();
    let placeholder = Regex::new(r"<[^>/]*>").unwrap();
    let span = Regex::new(r"`([^`\n]+)`").unwrap();
    for (i, line) in doc.lines.iter().enumerate() {
        if doc.in_fence[i] {
            continue;
        }
        for c in span.captures_iter(line) {
            let p = &c[1];
            let pattern = placeholder.replace_all(p, "*");
            if path.is_match(p) && !glob_exists(&root(), pattern.trim_end_matches('/')) {
                problems.push(format!("{}:{}: `{p}` does not exist", doc.name, i + 1));
            }
        }
    }
}

/// Whether `pattern` (a relative path whose names may hold `*`) names at least one path.
fn glob_exists(dir: &Path, pattern: &str) -> bool {
    let (first, rest) = match pattern.split_once('/') {
        Some((f, r)) => (f, Some(r)),
        None => (pattern, None),
    };
    let candidates: Vec<PathBuf> = if first.contains('*') {
        let re = format!(
            "^{}$",
            first
                .split('*')
                .map(regex::escape)
                .collect::<Vec<_>>()
                .join(".*")
        );
        let re = Regex::new(&re).unwrap();
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| re.is_match(&e.file_name().to_string_lossy()))
            .map(|e| e.path())
            .collect()
    } else {
        vec![dir.join(first)]
    };
    candidates.iter().any(|c| match rest {
        Some(r) if !r.is_empty() => glob_exists(c, r),
        _ => c.exists(),
    })
}

#[test]
fn readme_and_architecture_are_well_formed() {
    let docs: Vec<Doc> = ["README.md", "ARCHITECTURE.md"]
        .iter()
        .map(|n| parse_doc(n, &read(n)))
        .collect();
    let mut problems: Vec<String> = docs.iter().flat_map(|d| d.problems.clone()).collect();
    for d in &docs {
        check_links(d, &docs, &mut problems);
    }
    check_contents(&docs[0], &mut problems);
    check_command_table(&docs[0], &mut problems);
    check_setup(&docs[0], &mut problems);
    check_paths(&docs[1], &mut problems);
    assert!(
        problems.is_empty(),
        "{} problem(s) in the docs:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn slugs_follow_github() {
    for (heading, expected) in [
        ("Set up", "set-up"),
        ("When is a data source read?", "when-is-a-data-source-read"),
        (
            "`cairn inspect` for policy tools",
            "cairn-inspect-for-policy-tools",
        ),
        (
            "Moving and removing resources (`moved`, `removed`)",
            "moving-and-removing-resources-moved-removed",
        ),
        (
            "`state/` — the durable vocabulary and the event log",
            "state--the-durable-vocabulary-and-the-event-log",
        ),
        (
            "Plugin providers (any Terraform provider)",
            "plugin-providers-any-terraform-provider",
        ),
        (
            "Where Cairn deliberately differs from Terraform",
            "where-cairn-deliberately-differs-from-terraform",
        ),
        ("**Bold** and [a link](x.md)", "bold-and-a-link"),
        ("snake_case names", "snake_case-names"),
        ("Bird's-eye view", "birds-eye-view"),
        ("Größe über alles", "größe-über-alles"),
    ] {
        assert_eq!(slug(&heading_text(heading)), expected, "{heading}");
    }
}

#[test]
fn duplicate_headings_get_numbered_anchors() {
    let doc = parse_doc(
        "x.md",
        "# A\n## Tests\n### Tests\n## Tests\n```\n## Tests\n```\n",
    );
    let slugs: Vec<&str> = doc.headings.iter().map(|h| h.slug.as_str()).collect();
    assert_eq!(slugs, ["a", "tests", "tests-1", "tests-2"]);
}

#[test]
fn fences_are_checked() {
    let unclosed = parse_doc("x.md", "text\n```hcl\na = 1\n## Next\n```hcl\nb\n```\n");
    assert_eq!(
        unclosed.problems,
        [
            "x.md:5: a fence with info string `hcl` opens inside the code block opened at line 2, \
          which is never closed before it"
        ]
    );
    let at_end = parse_doc("x.md", "~~~\ncode\n````\n");
    assert_eq!(
        at_end.problems,
        ["x.md:1: this code block is never closed (the file ends inside it)"]
    );
    let nested = parse_doc("x.md", "````md\n```hcl\n```\n````\n   ~~~\n~~~~\n");
    assert!(nested.problems.is_empty(), "{:?}", nested.problems);
}

#[test]
fn links_skip_code_and_find_lines() {
    let doc = parse_doc(
        "x.md",
        "a [b](#c) `[no](#x)`\n```\n[no](#y)\n```\nand `a\nb` [d](y.md#e \"title\")\n",
    );
    assert_eq!(
        doc.links(),
        [(1, "#c".to_string()), (6, "y.md#e".to_string())]
    );
}

#[test]
fn commands_are_read_from_the_enum() {
    let src = "pub enum Command {\n    /// doc\n    Init(InitArgs),\n    ForceUnlock(A),\n    \
               #[command(name = \"import-tfstate\")]\n    ImportTfstate(B),\n    Select {\n        \
               x: u8,\n    },\n    List,\n}\n";
    assert_eq!(
        subcommands(src, "Command"),
        ["init", "force-unlock", "import-tfstate", "select", "list"]
    );
}

#[test]
fn broken_links_are_reported() {
    let doc = parse_doc(
        "x.md",
        "# Top\n[ok](#top) [ok](README.md#set-up) [ok](https://example.com/#x)\n\
         [bad](#nowhere)\n[bad](no/such/file.md)\n[bad](README.md#no-such-heading)\n",
    );
    let mut problems = Vec::new();
    check_links(&doc, &[], &mut problems);
    assert_eq!(
        problems,
        [
            "x.md:3: link to `#nowhere`: x.md has no heading with the anchor `#nowhere`",
            "x.md:4: link to `no/such/file.md`: no/such/file.md does not exist",
            "x.md:5: link to `README.md#no-such-heading`: README.md has no heading with the \
             anchor `#no-such-heading`",
        ]
    );
}

#[test]
fn paths_with_stars_match_one_name() {
    assert!(glob_exists(&root(), "fixtures/config/*/expected.txt"));
    assert!(glob_exists(&root(), "src/tests/docs.rs"));
    assert!(!glob_exists(&root(), "src/no_such_file.rs"));
    assert!(!glob_exists(&root(), "fixtures/*/no_such_file"));
    let doc = parse_doc(
        "A.md",
        "`src/…` `fixtures/engine/<case>/expected.txt` `src/tests/docs.rs` `src/gone.rs`\n",
    );
    let mut problems = Vec::new();
    check_paths(&doc, &mut problems);
    assert_eq!(problems, ["A.md:1: `src/gone.rs` does not exist"]);
}
