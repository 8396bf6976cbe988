//! Graphviz DOT output for a [`Dag`], with per-node styling and clusters.
//!
//! The output mimics `terraform graph`: a `digraph` with `compound` and `newrank` set, one
//! statement per node and per edge, edges pointing from dependent to dependency. Node names
//! in the DOT text are the node ids (`n0`, `n1`, ...) so labels may repeat; every string is
//! quoted and escaped. Clusters are DOT `subgraph "cluster_..."` blocks; nested modules can be
//! drawn by giving nested names — the engine decides.

use crate::{Dag, NodeId};
use std::collections::BTreeMap;
use std::fmt::Write;

/// How one node is drawn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DotNode {
    /// The text shown in the node.
    pub label: String,
    /// A Graphviz shape (`box`, `diamond`, `note`, `ellipse`, ...); Graphviz's default if `None`.
    pub shape: Option<String>,
    /// A Graphviz style (`filled`, `dashed`, `rounded,filled`, ...).
    pub style: Option<String>,
    /// A Graphviz colour name or `#rrggbb`.
    pub color: Option<String>,
    /// The cluster to draw the node in (for example its module path); `None` for the top level.
    pub cluster: Option<String>,
}

impl DotNode {
    /// A node with a label and Graphviz defaults for everything else.
    pub fn new(label: impl Into<String>) -> Self {
        DotNode {
            label: label.into(),
            ..Default::default()
        }
    }

    /// Sets the shape.
    pub fn shape(mut self, shape: impl Into<String>) -> Self {
        self.shape = Some(shape.into());
        self
    }

    /// Sets the style.
    pub fn style(mut self, style: impl Into<String>) -> Self {
        self.style = Some(style.into());
        self
    }

    /// Sets the colour.
    pub fn color(mut self, color: impl Into<String>) -> Self {
        self.color = Some(color.into());
        self
    }

    /// Puts the node in a cluster.
    pub fn cluster(mut self, cluster: impl Into<String>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }

    fn statement(&self, id: NodeId) -> String {
        let mut attrs = vec![format!("label = {}", quote(&self.label))];
        for (k, v) in [
            ("shape", &self.shape),
            ("style", &self.style),
            ("color", &self.color),
        ] {
            if let Some(v) = v {
                attrs.push(format!("{k} = {}", quote(v)));
            }
        }
        format!("\"{id}\" [{}]", attrs.join(", "))
    }
}

/// A DOT double-quoted string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) fn render<N>(dag: &Dag<N>, label: impl Fn(&N) -> DotNode) -> String {
    let mut top: Vec<String> = Vec::new();
    let mut clusters: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, n) in dag.nodes() {
        let d = label(n);
        let stmt = d.statement(id);
        match d.cluster {
            Some(c) => clusters.entry(c).or_default().push(stmt),
            None => top.push(stmt),
        }
    }
    let mut out = String::from("digraph {\n\tcompound = \"true\"\n\tnewrank = \"true\"\n");
    for (name, stmts) in &clusters {
        let _ = writeln!(out, "\tsubgraph {} {{", quote(&format!("cluster_{name}")));
        let _ = writeln!(out, "\t\tlabel = {}", quote(name));
        for s in stmts {
            let _ = writeln!(out, "\t\t{s}");
        }
        out.push_str("\t}\n");
    }
    for s in &top {
        let _ = writeln!(out, "\t{s}");
    }
    for (a, b) in dag.edges() {
        let _ = writeln!(out, "\t\"{a}\" -> \"{b}\"");
    }
    out.push_str("}\n");
    out
}
