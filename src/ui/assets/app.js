// Cairn UI: a small single-page app over the read-only JSON endpoints of `cairn ui`.
// Views: #/timeline, #/run/ID, #/state?at=SEQ&vs=SEQ, #/resource?addr=ADDR, #/plan/I; in a
// stack's directory #/stack and #/stack-run/ID, and every other view of one component
// instance's state with `?ws=STATE` in the address (kept by every link of the page).
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";
// The server set its cookie when it served this page with `?token=`: later loads (and the
// API calls, which send the header only when a token was given) work without it, so the token
// leaves the address bar (browser history, screenshots) once the page has loaded.
if (TOKEN) {
  const clean = new URL(location.href);
  clean.searchParams.delete("token");
  history.replaceState(history.state, "", clean.pathname + clean.search + clean.hash);
}
// The component instance's state these pages show (`cairn ui` in a stack's directory).
const WS = new URLSearchParams(location.search).get("ws") || "";
// Whether `cairn ui` serves a stack (set from /api/head before the first view).
let STACK = false;
const main = document.getElementById("main");
const statusEl = document.getElementById("status");
let known = { head: -1, busy: null, plans: [] };

function esc(s) {
  return String(s == null ? "" : s).replace(/[&<>"']/g, c => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

// `root`: the server's own answer, not the component state's (`/api/head` tells whether the
// server serves a stack).
async function api(path, root) {
  if (WS && !root) path += (path.includes("?") ? "&" : "?") + "ws=" + encodeURIComponent(WS);
  const r = await fetch(path, {
    headers: TOKEN ? { "X-Cairn-Token": TOKEN } : {},
    credentials: "same-origin",
  });
  const j = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

function utc(ms) {
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

// "3 min ago", "2 h ago", "5 days ago".
function ago(ms) {
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 0) return "in the future";
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return Math.floor(s / 86400) + " days ago";
}

// A moment in the reader's local time with how long ago it was; UTC on hover.
function when(ms) {
  if (ms == null) return "";
  const d = new Date(ms);
  const pad = n => String(n).padStart(2, "0");
  const local = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return `<time datetime="${d.toISOString()}" title="${utc(ms)}">${local} (${ago(ms)})</time>`;
}

function duration(ms) {
  if (ms == null) return "—";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}

function route() {
  const h = location.hash.replace(/^#\/?/, "") || (STACK && !WS ? "stack" : "timeline");
  const [path, qs] = h.split("?");
  const parts = path.split("/");
  return { view: parts[0], arg: parts[1], q: new URLSearchParams(qs || "") };
}

function go(hash) { location.hash = hash; }

function addrLink(a) {
  return `<a href="#/resource?addr=${encodeURIComponent(a)}">${esc(a)}</a>`;
}

function badge(outcome) {
  return `<span class="badge o-${esc(String(outcome).replace(/ /g, "-"))}">${esc(outcome)}</span>`;
}

function pendingHtml(list) {
  if (!list || !list.length) return "";
  return list.map(p => {
    const r = p.resolution;
    const how = r
      ? (r.kind === "resolved"
          ? `resolved by run <a href="#/run/${r.run}">${r.run}</a> (event ${r.seq}): ${esc(r.how)}`
          : `${esc(r.kind)} in run <a href="#/run/${r.run}">${r.run}</a>`)
      : "still pending: the next run resolves it";
    return `<div class="pending">Left pending: ${esc(p.action)} of ${addrLink(p.addr)} (operation ${p.op}) — ${how}</div>`;
  }).join("");
}

function failuresHtml(list) {
  if (!list || !list.length) return "";
  return list.map(f => `<div class="error">${esc(f.action)} of ${addrLink(f.addr)} failed: ${esc(f.error)}${f.location ? ` (${f.location_recorded ? "on" : "now at"} ${esc(f.location)})` : ""}</div>`).join("");
}

// A run's recorded diagnostics: each error with where it was in the configuration when the
// run failed (file:line:col), or the address it belongs to.
function diagnosticsHtml(list, onlyErrors) {
  if (!list || !list.length) return "";
  return list.filter(d => !onlyErrors || d.severity === "error").map(d => {
    const where = [d.location ? "on " + esc(d.location) : "", d.address ? "in " + addrLink(d.address) : ""].filter(x => x).join(", ");
    return `<div class="diag ${d.severity === "error" ? "error" : "warning"}"><strong>${d.severity === "error" ? "Error" : "Warning"}: ${esc(d.summary)}</strong>${where ? `<div class="where">${where}</div>` : ""}${d.detail ? `<div class="detail">${esc(d.detail)}</div>` : ""}</div>`;
  }).join("");
}

// Why a read was deferred to apply: the reason and its causal chain, from the data source out
// to the cause.
function chainHtml(d) {
  if (!d || !d.chain || !d.chain.length) return "";
  const cause = d.cause === "dependency-pending" ? "a managed resource it depends on has a planned change" : d.cause === "config-unknown" ? "its configuration is not known until apply" : "";
  return `<div class="chain">deferred because ${esc(cause)}: ${d.chain.map(x => `<code>${esc(x)}</code>`).join(" → ")}</div>`;
}

// ---- Timeline ------------------------------------------------------------------------------

// A plan-only run: no run of the log (no number, no events), what it proposed and against
// which state position, its addresses behind a disclosure.
function planRowHtml(p) {
  const shown = (p.changes || []).map(c => `<li><span class="act a-${esc(c.action)}">${esc(c.action)}</span> ${addrLink(c.addr)}</li>`).join("");
  const more = p.changes_total > (p.changes || []).length ? `<li class="muted">and ${p.changes_total - p.changes.length} more</li>` : "";
  const where = [p.base_seq != null ? `against state position ${p.base_seq}` : "", p.saved_to ? `saved to <code>${esc(p.saved_to)}</code>` : "", p.mode && p.mode !== "normal" ? `${esc(p.mode)} plan` : ""].filter(x => x).join(" · ");
  return `<tr class="plan-row" data-plan="${esc(p.id)}">
    <td><span class="muted" title="a plan is recorded beside the log: it changed nothing">plan</span></td><td><code>plan${p.args.length ? " " + esc(p.args.join(" ")) : ""}</code></td>
    <td>${esc(p.user)}${p.host || p.git_commit ? `<div class="muted">${placeText(p)}</div>` : ""}</td><td>${when(p.started_ms)}</td><td>${duration(p.duration_ms)}</td>
    <td>${badge(p.outcome)}</td>
    <td><span class="n-add">+${p.add}</span> <span class="n-change">~${p.change}</span> <span class="n-destroy">−${p.destroy}</span>${p.read ? ` <span class="muted">${p.read} read deferred</span>` : ""}${p.errors ? ` <span class="n-destroy">${p.errors} error(s)</span>` : ""}
      ${where || shown ? `<details class="plan-detail"><summary class="muted">${where || "what it proposed"}</summary>${shown ? `<ul class="plan-changes">${shown}${more}</ul>` : ""}</details>` : ""}</td></tr>`;
}

async function timeline(q) {
  const params = new URLSearchParams();
  if (q.get("command")) params.set("command", q.get("command"));
  if (q.get("outcome")) params.set("outcome", q.get("outcome"));
  if (q.get("before")) params.set("before", q.get("before"));
  if (q.get("limit")) params.set("limit", q.get("limit"));
  const t = await api("/api/timeline?" + params);
  document.title = "Timeline · Cairn";
  // Another page of the same filters.
  const pageLink = before => {
    const p = new URLSearchParams(q);
    if (before) p.set("before", before); else p.delete("before");
    return "#/timeline" + (p.toString() ? "?" + p : "");
  };
  const pager = `<div class="pager">${q.get("before") ? `<a id="newest" href="${esc(pageLink(null))}">← newest runs</a>` : ""}${t.next_before ? ` <a id="older" href="${esc(pageLink(t.next_before))}">older runs →</a>` : ""}</div>`;
  const opt = (v, cur) => `<option value="${esc(v)}"${v === (cur || "") ? " selected" : ""}>${esc(v || "all")}</option>`;
  let html = `<h1>Timeline</h1>
  <div class="filters">
    <label>Command <select id="f-command">${["", ...t.commands].map(c => opt(c, q.get("command"))).join("")}</select></label>
    <label>Outcome <select id="f-outcome">${["", "success", "failed", "interrupted", "running", "unfinished", "planned", "no changes"].map(c => opt(c, q.get("outcome"))).join("")}</select></label>
    <span class="muted" id="count">${t.runs.length} of ${t.matched} run(s)${t.matched !== t.total ? ` matching (${t.total} in all)` : ""}${t.plans && t.plans.length ? `, ${t.plans.length} plan(s)` : ""} · ${t.head} events</span>
  </div>`;
  // Plan-only runs (reviews: `cairn plan` records them beside the log) among the runs, by
  // when they started.
  const plans = t.plans || [];
  const rows = [...t.runs.map(r => ({ r })), ...plans.map(p => ({ p }))]
    .sort((a, b) => ((b.r || b.p).started_ms - (a.r || a.p).started_ms) || (a.p ? -1 : 1));
  if (!rows.length) {
    html += `<p class="muted">No runs${t.total ? " match" : " yet: run <code>cairn apply</code>"}.</p>`;
  } else {
    html += `<table id="runs"><thead><tr><th>Run</th><th>Command</th><th>Who</th><th>When</th><th>Duration</th><th>Outcome</th><th>Changes</th></tr></thead><tbody>`;
    for (const { r, p } of rows) {
      if (p) { html += planRowHtml(p); continue; }
      // Real links: open in a new tab, reach with the keyboard; the row is clickable too.
      html += `<tr class="clickable run-row" data-run="${r.id}">
        <td><a class="run-link" href="#/run/${r.id}">${r.id}</a></td><td><a class="run-cmd" href="#/run/${r.id}" tabindex="-1"><code>${esc(r.command)}${r.args.length ? " " + esc(r.args.join(" ")) : ""}</code></a></td>
        <td>${esc(r.user)}${r.host || r.git_commit ? `<div class="muted">${placeText(r)}</div>` : ""}</td><td>${when(r.started_ms)}</td><td>${duration(r.duration_ms)}</td>
        <td>${badge(r.outcome)}</td>
        <td><span class="n-add">+${r.added}</span> <span class="n-change">~${r.changed}</span> <span class="n-destroy">−${r.destroyed}</span>${r.read ? ` <span class="muted">${r.read} read</span>` : ""}${r.errors ? ` <span class="n-destroy">${r.errors} error(s)</span>` : ""}</td></tr>`;
      // Errors not already told by a failed operation (a configuration error, a plan error).
      const failed = new Set((r.failures || []).map(f => f.addr));
      const others = (r.diagnostics || []).filter(d => d.severity === "error" && !failed.has(d.address));
      if ((r.left_pending && r.left_pending.length) || (r.failures && r.failures.length) || others.length) {
        html += `<tr class="run-detail"><td></td><td colspan="6">${failuresHtml(r.failures)}${diagnosticsHtml(others, true)}${pendingHtml(r.left_pending)}</td></tr>`;
      }
    }
    html += `</tbody></table>` + pager;
  }
  main.innerHTML = html;
  const refilter = () => {
    const p = new URLSearchParams();
    const c = document.getElementById("f-command").value;
    const o = document.getElementById("f-outcome").value;
    if (c) p.set("command", c);
    if (o) p.set("outcome", o);
    go("#/timeline" + (p.toString() ? "?" + p : ""));
  };
  document.getElementById("f-command").onchange = refilter;
  document.getElementById("f-outcome").onchange = refilter;
  for (const tr of document.querySelectorAll("tr.run-row")) {
    tr.onclick = e => { if (!e.target.closest("a")) go("#/run/" + tr.dataset.run); };
  }
}

// ---- One run -------------------------------------------------------------------------------

// An operation's start and its outcome in one line: the start is left out when its outcome
// is in the same list, and the outcome says when it started.
function mergeOps(events) {
  const settled = new Map();
  for (const e of events) if (e.op != null && e.kind !== "OperationStarted") settled.set(e.op, e);
  const started = new Map(events.filter(e => e.kind === "OperationStarted").map(e => [e.seq, e]));
  return events.filter(e => !(e.kind === "OperationStarted" && settled.has(e.seq))).map(e =>
    e.op != null && e.kind !== "OperationStarted" && started.has(e.op) ? Object.assign({}, e, { started_seq: e.op, started_ms: started.get(e.op).time_ms }) : e);
}

function eventHtml(e, withRun) {
  let h = `<div class="ev l-${esc(e.label || "none")}" data-seq="${e.seq}">
    <span class="seq">${e.started_seq ? `#${e.started_seq}–` : ""}#${e.seq}</span>`;
  if (withRun) h += `<span class="muted">run <a href="#/run/${e.run}">${e.run}</a>${e.command ? " (" + esc(e.command) + ")" : ""} · ${when(e.time_ms)}</span> `;
  h += `<strong>${esc(e.label || e.kind)}</strong> `;
  let text = esc(e.text || e.kind);
  if (e.addr) text = text.replace(esc(e.addr), addrLink(e.addr));
  h += text;
  if (e.replaced) h += ` <span class="badge o-replaced">replaced</span>`;
  if (e.started_seq) h += ` <span class="muted">(${duration(e.time_ms - e.started_ms)})</span>`;
  if (e.settled && e.settled.kind !== "succeeded") h += ` <span class="muted">(${esc(e.settled.kind)} at event ${e.settled.seq})</span>`;
  if (e.error) {
    h += `<div class="error">Error: ${esc(e.error)}${e.location ? `\n  ${e.location_recorded ? "on" : "now at"} ${esc(e.location)}` : ""}</div>`;
  }
  if (e.deferral) h += `<div class="muted">why deferred: ${esc(e.deferral.reason || "")}</div>` + chainHtml(e.deferral);
  if (e.plan_of_run) h += ` <a href="#/plan/run-${e.plan_of_run}">see the plan with its graph</a>`;
  if (e.diagnostics) h += diagnosticsHtml(e.diagnostics, false);
  if (e.diff) h += `<pre class="diff">${esc(e.diff)}</pre>`;
  if (e.outputs) h += `<pre class="diff">${esc(Object.entries(e.outputs).map(([k, v]) => k + " = " + JSON.stringify(v)).join("\n"))}</pre>`;
  return h + `</div>`;
}

// Where a run ran, in short: `on HOST, git BRANCH@SHORTSHA` (what is known of it).
function placeText(r) {
  const parts = [];
  if (r.host) parts.push("on " + esc(r.host));
  if (r.git_commit) parts.push("git " + esc(gitText(r)));
  return parts.join(", ");
}

// A run's commit as `BRANCH@SHORTSHA` (the short hash alone on a detached HEAD).
function gitText(r) {
  const short = r.git_commit.slice(0, 7);
  return r.git_branch ? `${r.git_branch}@${short}` : short;
}

// A CI job's address, a link when it is a web address (never a script).
function ciLink(url) {
  return /^https?:\/\//i.test(url)
    ? `<a class="run-ci" href="${esc(url)}" target="_blank" rel="noopener">${esc(url)}</a>`
    : `<code class="run-ci">${esc(url)}</code>`;
}

async function runView(id) {
  const r = await api("/api/run/" + encodeURIComponent(id));
  let html = `<h1>Run ${r.id}: <code>cairn ${esc(r.command)}${r.args.length ? " " + esc(r.args.join(" ")) : ""}</code> ${badge(r.outcome)}</h1>
  <div class="card">By <strong>${esc(r.user)}</strong>${r.host ? ` on <strong>${esc(r.host)}</strong>` : ""} (pid ${r.pid}) at ${when(r.started_ms)}, ${duration(r.duration_ms)} ·
  ${r.git_commit ? `git <code class="run-git" title="${esc(r.git_commit)}">${esc(gitText(r))}</code> · ` : ""}${r.ci_job ? `CI job ${ciLink(r.ci_job)} · ` : ""}
  events ${r.first_seq}–${r.last_seq} ·
  <span class="n-add">+${r.added}</span> <span class="n-change">~${r.changed}</span> <span class="n-destroy">−${r.destroyed}</span> · ${r.read} read · ${r.errors} error(s) ·
  <a href="#/state?at=${r.last_seq}">state after this run</a></div>`;
  if (r.planned || r.plan_file) {
    // A saved plan the apply refused (stale, other configuration) was not applied: the run
    // recorded no plan of its own.
    const what = !r.plan_file ? "Planned its changes itself"
      : r.planned ? `Applied the saved plan <code>${esc(r.plan_file)}</code>`
      : `Did not apply the saved plan <code>${esc(r.plan_file)}</code>: ${r.outcome === "failed" ? "the apply refused it (see the error below)" : "the run stopped before it applied it"}`;
    html += `<div class="card" id="run-plan">${what}: <a href="#/plan/run-${r.id}">see the plan${r.planned ? " with its graph" : " file as it is now"}</a></div>`;
  }
  html += failuresHtml(r.failures) + pendingHtml(r.left_pending);
  if (r.diagnostics && r.diagnostics.length) {
    html += `<h2>Errors and warnings</h2><div id="diagnostics">${diagnosticsHtml(r.diagnostics, false)}</div>`;
  }
  if (r.deferred && r.deferred.length) {
    html += `<h2>Reads deferred to apply</h2><div id="deferred">` + r.deferred.map(d => `<div class="ev l-read"><strong>${addrLink(d.addr)}</strong> ${d.read_at ? `read at event #${d.read_at}` : `<span class="n-destroy">not read (the run stopped before)</span>`}
      <div class="muted">why: ${esc(d.reason || "")}</div>${chainHtml(d)}</div>`).join("") + `</div>`;
  }
  html += `<h2>Events</h2><div id="events">` + mergeOps(r.events).map(e => eventHtml(e, false)).join("") + `</div>`;
  main.innerHTML = html;
  document.title = `Run ${r.id}: cairn ${r.command} · Cairn`;
  document.body.dataset.runOpen = r.outcome === "running" ? "1" : "0";
}

// ---- State at a moment ---------------------------------------------------------------------

async function stateView(q) {
  const head = (await api("/api/head")).head;
  const at = q.has("at") ? Math.min(+q.get("at"), head) : head;
  const vs = q.get("vs");
  const s = await api("/api/state?at=" + at + (q.get("q") ? "&q=" + encodeURIComponent(q.get("q")) : ""));
  // The latest runs to jump to (oldest first); any other run is one number away.
  const recent = (await api("/api/timeline?limit=30")).runs.slice().reverse();
  document.title = `State at event ${s.at} · Cairn`;
  const runOpts = recent.map(r => `<option value="${r.last_seq}">after run ${r.id} (${esc(r.command)}, ${when(r.started_ms)})</option>`).join("");
  let html = `<h1>State at event <span id="at-label">${s.at}</span> <span class="muted">of ${s.head}</span></h1>
  <div class="card">
    <div class="slider"><span>0</span><input id="slider" type="range" min="0" max="${s.head}" value="${s.at}"><span>${s.head}</span>
    <input id="at-input" type="number" min="0" max="${s.head}" value="${s.at}" style="width:90px"></div>
    <div class="filters" style="margin-top:8px">
      <label>Jump to <select id="jump"><option value="">—</option>${runOpts}<option value="${s.head}">now</option></select></label>
      <label>Compare with <select id="vs"><option value="">—</option>${runOpts}<option value="${s.head}">now</option></select></label>
      <label>Filter <input id="q" type="text" value="${esc(q.get("q") || "")}" placeholder="address contains"></label>
      <label>After run <input id="run-no" type="number" min="1" style="width:80px"></label>
    </div>
    <div class="muted">${s.time_ms ? when(s.time_ms) + " · run " + s.run + " · " : ""}${s.total} instance(s)${s.listed < s.total ? `, ${s.listed} listed` : ""}</div>
  </div>
  <div id="diff"></div>
  <div class="graphwrap"><div style="flex:2" id="state-list">`;
  for (const m of s.modules) {
    html += `<div class="module card"><h3>${esc(m.module)} <span class="muted">(${m.count})</span></h3><ul class="addrs">`;
    for (const i of m.instances) {
      html += `<li><a href="#" class="inst" data-addr="${esc(i.addr)}">${esc(i.addr)}</a>${i.tainted ? ' <span class="n-destroy">tainted</span>' : ""}</li>`;
    }
    html += `</ul></div>`;
  }
  if (!s.modules.length) html += `<p class="muted">The state was empty at this moment.</p>`;
  if (Object.keys(s.outputs).length) {
    html += `<div class="card"><h3>Outputs</h3><pre class="diff">${esc(Object.entries(s.outputs).map(([k, v]) => k + " = " + JSON.stringify(v)).join("\n"))}</pre></div>`;
  }
  html += `</div><div id="nodeinfo"></div></div>`;
  main.innerHTML = html;
  const slider = document.getElementById("slider");
  const input = document.getElementById("at-input");
  const move = v => {
    const p = new URLSearchParams(q);
    p.set("at", v);
    go("#/state?" + p);
  };
  slider.oninput = () => { document.getElementById("at-label").textContent = slider.value; input.value = slider.value; };
  slider.onchange = () => move(slider.value);
  input.onchange = () => move(input.value);
  document.getElementById("jump").onchange = e => e.target.value && move(e.target.value);
  document.getElementById("q").onchange = e => {
    const p = new URLSearchParams(q);
    p.set("at", at);
    if (e.target.value) p.set("q", e.target.value); else p.delete("q");
    go("#/state?" + p);
  };
  const vsSel = document.getElementById("vs");
  if (vs) vsSel.value = vs;
  vsSel.onchange = () => {
    const p = new URLSearchParams(q);
    p.set("at", at);
    if (vsSel.value) p.set("vs", vsSel.value); else p.delete("vs");
    go("#/state?" + p);
  };
  document.getElementById("run-no").onchange = async e => {
    try {
      const r = await api("/api/run/" + encodeURIComponent(e.target.value));
      move(r.last_seq);
    } catch (err) {
      document.getElementById("nodeinfo").innerHTML = `<p class="error">${esc(err.message)}</p>`;
    }
  };
  // The selected instance is in the address (back and shared links keep it).
  const showInst = async addr => {
    const info = document.getElementById("nodeinfo");
    if (!q.get("q") && s.listed >= s.total && ![...document.querySelectorAll("a.inst")].some(a => a.dataset.addr === addr)) {
      info.innerHTML = `<div class="card muted" id="inst-info">${addrLink(addr)} is not in the state at this moment.</div>`;
      return;
    }
    try {
      const i = await api(`/api/instance?addr=${encodeURIComponent(addr)}&at=${at}`);
      info.innerHTML = `<div class="card" id="inst-info"><h3>${addrLink(i.addr)}</h3>
        <div class="muted">as of event ${i.since} · ${esc(i.provider)}${i.tainted ? " · tainted" : ""}</div>
        <pre class="diff">${esc(i.text)}</pre></div>`;
      for (const a of document.querySelectorAll("a.inst")) a.classList.toggle("selected", a.dataset.addr === addr);
    } catch (err) {
      info.innerHTML = `<p class="error">${esc(err.message)}</p>`;
    }
  };
  for (const a of document.querySelectorAll("a.inst")) {
    const p = new URLSearchParams(q);
    p.set("at", at);
    p.set("inst", a.dataset.addr);
    a.setAttribute("href", "#/state?" + p);
  }
  if (q.get("inst")) await showInst(q.get("inst"));
  if (vs) {
    const d = await api(`/api/diff?from=${Math.min(+vs, at)}&to=${Math.max(+vs, at)}`);
    let dh = `<h2>Changes from event ${d.from} to event ${d.to}</h2>
      <p><span class="k-added">${d.counts.added} added</span> · <span class="k-changed">${d.counts.changed} changed</span> · <span class="k-removed">${d.counts.removed} removed</span></p>`;
    for (const it of d.items) {
      dh += `<div class="ev l-${it.kind === "added" ? "created" : it.kind === "removed" ? "deleted" : "updated"}"><strong class="k-${it.kind}">${it.kind}</strong> ${addrLink(it.addr)}<pre class="diff">${esc(it.diff)}</pre></div>`;
    }
    if (!d.items.length) dh += `<p class="muted">No differences.</p>`;
    document.getElementById("diff").innerHTML = `<div class="card">${dh}</div>`;
  }
}

// ---- One resource's life -------------------------------------------------------------------

async function resourceView(q, refresh) {
  const addr = q.get("addr") || "";
  const offset = +(q.get("offset") || 0);
  document.title = (addr ? addr + " · " : "Resources · ") + "Cairn";
  // A run landing refreshes the list below, never the box the user may be typing in.
  if (!refresh || !document.getElementById("addr")) {
    main.innerHTML = `<h1>One resource's life</h1>
    <div class="filters"><input id="addr" type="text" list="addr-list" size="50" value="${esc(addr)}" placeholder="sim_thing.a (or part of an address)">
    <datalist id="addr-list"></datalist><button id="show">Show</button></div><div id="life"></div>`;
    const input = document.getElementById("addr");
    const list = document.getElementById("addr-list");
    input.oninput = async () => {
      try {
        const xs = await api("/api/addresses?limit=50&q=" + encodeURIComponent(input.value));
        list.innerHTML = xs.addresses.map(x => `<option value="${esc(x)}">`).join("");
      } catch (e) { /* the list stays as it was */ }
    };
    document.getElementById("show").onclick = () => go("#/resource?addr=" + encodeURIComponent(input.value));
    input.onkeydown = e => { if (e.key === "Enter") go("#/resource?addr=" + encodeURIComponent(input.value)); };
  }
  const lifeEl = document.getElementById("life");
  const page = (o, label, id) => `<a id="${id}" href="#/resource?${new URLSearchParams(Object.assign({}, addr ? { addr } : {}, q.get("q") ? { q: q.get("q") } : {}, { offset: o }))}">${label}</a>`;
  try {
    if (!addr) {
      // Every address is searched; the list is a page of the matches, never silently cut.
      const xs = await api(`/api/addresses?limit=100&offset=${offset}&q=${encodeURIComponent(q.get("q") || "")}`);
      lifeEl.innerHTML = `<div class="filters"><label>Search <input id="addr-q" type="text" value="${esc(q.get("q") || "")}" placeholder="part of an address"></label>
        <span class="muted" id="addr-count">${xs.total ? `${offset + 1}–${offset + xs.addresses.length} of ${xs.total} address(es)` : "no address matches"}</span>
        ${offset > 0 ? page(Math.max(0, offset - 100), "← previous", "addr-prev") : ""} ${offset + xs.addresses.length < xs.total ? page(offset + 100, "next →", "addr-next") : ""}</div>
        <ul class="addrs">${xs.addresses.map(x => `<li>${addrLink(x)}</li>`).join("")}</ul>`;
      document.getElementById("addr-q").onchange = e => go("#/resource" + (e.target.value ? "?q=" + encodeURIComponent(e.target.value) : ""));
      return;
    }
    const l = await api(`/api/life?addr=${encodeURIComponent(addr)}&offset=${offset}&limit=200`);
    const events = mergeOps(l.events);
    lifeEl.innerHTML = `<h2>${esc(l.addr)} <span class="muted">${l.exists ? "exists now" : "not in the state now"} · ${l.total} event(s)${l.total > l.events.length ? `, ${offset + 1}–${offset + l.events.length} shown` : ""}</span></h2>` +
      `<div class="pager">${offset > 0 ? page(Math.max(0, offset - 200), "← earlier", "life-prev") : ""} ${offset + l.events.length < l.total ? page(offset + 200, "later →", "life-next") : ""}</div>` +
      events.map(e => eventHtml(e, true)).join("");
  } catch (e) {
    // Shown in place: the search box stays.
    lifeEl.innerHTML = `<p class="error" id="life-error">${esc(e.message)}</p>`;
  }
}

// ---- A plan --------------------------------------------------------------------------------

const ACTION_COLOR = { create: "#c7ecd0", update: "#ffe8a3", replace: "#e5d5ff", delete: "#ffd0d3", read: "#d3e6ff", forget: "#e6e6e6", "no-op": "#ffffff" };
const ACTION_ORDER = Object.keys(ACTION_COLOR);

// The distinct actions a node's changes plan, in the legend's order.
function nodeActions(n) {
  const a = new Set((n.actions || []).filter(x => x !== "no-op"));
  return ACTION_ORDER.filter(x => a.has(x));
}

// A node is coloured by the set of its actions: one colour for one action, equal bands of
// each action's colour for several (a resource with deletes and updates is both red and yellow).
function nodeColor(n, svg) {
  const a = nodeActions(n);
  if (!a.length) return ACTION_COLOR["no-op"];
  if (a.length === 1) return ACTION_COLOR[a[0]] || "#eee";
  const id = "mix-" + a.join("-");
  if (!svg.querySelector("#" + id)) {
    const ns = "http://www.w3.org/2000/svg";
    const g = document.createElementNS(ns, "linearGradient");
    g.setAttribute("id", id);
    a.forEach((x, i) => {
      for (const off of [i / a.length, (i + 1) / a.length]) {
        const st = document.createElementNS(ns, "stop");
        st.setAttribute("offset", String(off));
        st.setAttribute("stop-color", ACTION_COLOR[x]);
        g.appendChild(st);
      }
    });
    svg.querySelector("defs").appendChild(g);
  }
  return `url(#${id})`;
}

// How many changes of each action a node plans: "20 delete, 10 update".
function actionTally(n) {
  const t = {};
  for (const c of n.changes || []) t[c.action] = (t[c.action] || 0) + 1;
  return ACTION_ORDER.filter(x => t[x]).map(x => `${t[x]} ${x}`).join(", ");
}

function legendHtml() {
  return `<div class="legend" id="legend" style="margin-top:6px">${Object.entries(ACTION_COLOR).map(([k, c]) => `<span><i style="background:${c}"></i>${k}</span>`).join("")}<span><i style="background:linear-gradient(90deg, ${ACTION_COLOR.update} 50%, ${ACTION_COLOR.delete} 50%)"></i>several actions: one band each</span><span><i style="border:2px dashed #0969da"></i>read deferred to apply</span></div>`;
}

function drawGraph(el, graph, onPick) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 60, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) {
    const label = n.id + (n.deferred ? "  (read during apply)" : "");
    g.setNode(n.id, { label, width: Math.max(90, label.length * 7.4 + 20), height: 30, data: n });
  }
  // Dependencies on the left, what depends on them to the right.
  for (const e of graph.edges) g.setEdge(e.to, e.from);
  dagre.layout(g);
  const W = g.graph().width, H = g.graph().height;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.innerHTML = `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#8c959f"/></marker></defs>`;
  for (const e of g.edges()) {
    const pts = g.edge(e).points;
    const p = document.createElementNS(ns, "path");
    p.setAttribute("class", "edge");
    p.setAttribute("d", "M" + pts.map(q => q.x + "," + q.y).join(" L"));
    p.setAttribute("marker-end", "url(#arrow)");
    svg.appendChild(p);
  }
  for (const id of g.nodes()) {
    const v = g.node(id);
    const n = v.data;
    const grp = document.createElementNS(ns, "g");
    grp.setAttribute("class", "node" + (n.deferred ? " deferred" : ""));
    grp.setAttribute("data-id", id);
    grp.setAttribute("data-actions", nodeActions(n).join(" "));
    grp.setAttribute("transform", `translate(${v.x - v.width / 2},${v.y - v.height / 2})`);
    const r = document.createElementNS(ns, "rect");
    r.setAttribute("width", v.width);
    r.setAttribute("height", v.height);
    r.setAttribute("fill", nodeColor(n, svg));
    if (n.data) r.setAttribute("rx", 12);
    const tip = document.createElementNS(ns, "title");
    tip.textContent = id + (actionTally(n) ? ": " + actionTally(n) : ": no change");
    grp.appendChild(tip);
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", 10);
    t.setAttribute("y", 19);
    t.textContent = v.label;
    grp.appendChild(r);
    grp.appendChild(t);
    grp.onclick = () => {
      for (const s of svg.querySelectorAll(".node.selected")) s.classList.remove("selected");
      grp.classList.add("selected");
      onPick(n);
    };
    svg.appendChild(grp);
  }
  el.innerHTML = "";
  el.appendChild(svg);
  return svg;
}

function changeHtml(c) {
  const cls = { create: "created", delete: "deleted", read: "read", replace: "replaced", forget: "forgotten" }[c.action] || "updated";
  let h = `<div class="ev l-${cls}" data-action="${esc(c.action)}">
    <strong>${esc(c.action)}</strong> ${esc(c.addr)}`;
  if (c.reason) h += `<div class="muted">why: ${esc(c.reason)}</div>`;
  if (c.deferred) h += chainHtml(c);
  return h + `<pre class="diff">${esc(c.text)}</pre></div>`;
}

async function planView(arg) {
  const head = await api("/api/head");
  const ofRun = arg && arg.startsWith("run-") ? arg.slice(4) : null;
  if (!head.plans.length && !ofRun) {
    main.innerHTML = `<h1>Plan</h1><p class="muted">No plan to show. Save one with <code>cairn plan -out=FILE</code> and start <code>cairn ui -plan=FILE</code>.</p>`;
    return;
  }
  const p = ofRun ? await api(`/api/run/${encodeURIComponent(ofRun)}/plan`) : await api("/api/plan/" + +(arg || 0));
  let html = `<h1>Plan: ${ofRun ? esc(p.name) : `<code>${esc(p.name)}</code>`}</h1>`;
  if (ofRun) html += `<p><a href="#/run/${esc(ofRun)}">back to run ${esc(ofRun)}</a></p>`;
  if (!ofRun) {
    // Who made the saved plan, when and where, and whether apply would still take it.
    const m = p.made;
    const by = m ? `Made by <strong>${esc(m.user)}</strong> on ${esc(m.host)} at ${when(m.time_ms)}` : "Made (the file does not say by whom or when)";
    const status = p.applied_by != null
      ? `<span class="badge o-success">applied</span> by run <a href="#/run/${p.applied_by}">${p.applied_by}</a>`
      : p.stale
        ? `<span class="badge o-failed">stale: apply will refuse it</span> the state moved to position ${p.head} since (run <code>cairn plan</code> again)`
        : `<span class="badge o-running">current</span> <code>cairn apply ${esc(p.name)}</code> applies it`;
    html += `<div class="card" id="plan-made">${by}, against state position ${p.base_seq}. ${status}</div>`;
  }
  if (p.note) html += `<p class="muted note">${esc(p.note)}</p>`;
  if (head.plans.length > 1) {
    html += `<div class="filters">${head.plans.map((n, j) => `<a href="#/plan/${j}">${esc(n)}</a>`).join(" · ")}</div>`;
  }
  html += `<div class="card"><span class="n-add">${p.add} to add</span>, <span class="n-change">${p.change} to change</span>, <span class="n-destroy">${p.destroy} to destroy</span>${p.deferred ? `, <span class="n-read">${p.deferred} read(s) deferred to apply</span>` : ""}${p.errored ? ' · <span class="n-destroy">the plan has errors</span>' : ""}
    ${legendHtml()}</div>`;
  if (p.config_error) html += `<p class="error">No graph: ${esc(p.config_error)}</p>`;
  html += `<div class="filters graph-tools"><button id="zoom-in" title="zoom in">+</button><button id="zoom-out" title="zoom out">−</button><button id="zoom-fit">fit</button><button id="zoom-full">100%</button></div>`;
  html += `<div class="graphwrap"><div id="graph"></div><div id="nodeinfo"><div class="card muted">Click a node to see its change and why.</div></div></div>`;
  const acts = ACTION_ORDER.filter(a => p.modules.some(m => m.changes.some(c => c.action === a)));
  html += `<h2>Changes by module</h2><div class="filters" id="action-filter">${acts.map(a => `<label><input type="checkbox" value="${a}" checked> ${a} (${p.modules.reduce((n, m) => n + m.changes.filter(c => c.action === a).length, 0)})</label>`).join("")}</div>`;
  for (const m of p.modules) {
    html += `<details class="module" open><summary><h3>${esc(m.module)} <span class="muted">(${m.changes.length})</span></h3></summary>${m.changes.map(changeHtml).join("")}</details>`;
  }
  if (!p.modules.length) html += `<p class="muted">No changes.</p>`;
  main.innerHTML = html;
  document.title = "Plan: " + p.name + " · Cairn";
  for (const cb of document.querySelectorAll("#action-filter input")) {
    cb.onchange = () => {
      const on = new Set([...document.querySelectorAll("#action-filter input:checked")].map(x => x.value));
      for (const ev of document.querySelectorAll("details.module .ev[data-action]")) ev.hidden = !on.has(ev.dataset.action);
    };
  }
  const showNode = n => {
    const info = document.getElementById("nodeinfo");
    const changes = n.changes && n.changes.length ? n.changes.map(changeHtml).join("") : `<p class="muted">No change planned.</p>`;
    info.innerHTML = `<div class="card"><h3>${esc(n.id)}</h3><div class="muted">${esc(n.module)}${n.data ? " · data source" : ""}${actionTally(n) ? " · " + esc(actionTally(n)) : ""}</div>${changes}</div>`;
  };
  const svg = drawGraph(document.getElementById("graph"), p.graph, n => {
    showNode(n);
    // The selected node is in the address: back and shared links keep it.
    const here = route();
    here.q.set("node", n.id);
    history.replaceState(history.state, "", "#/plan/" + (here.arg || "0") + "?" + here.q);
  });
  const sel = route().q.get("node");
  if (sel) {
    const n = p.graph.nodes.find(x => x.id === sel);
    const g = svg && [...svg.querySelectorAll("g.node")].find(x => x.dataset.id === sel);
    if (n && g) { g.classList.add("selected"); showNode(n); }
    else document.getElementById("nodeinfo").innerHTML = `<p class="error">The graph has no node ${esc(sel)}.</p>`;
  }
  // Zoom: the drawing scales inside its box; "fit" shows it whole.
  if (svg) {
    const W = +svg.getAttribute("width"), H = +svg.getAttribute("height");
    let scale = 1;
    const zoom = k => { scale = Math.min(4, Math.max(0.1, k)); svg.setAttribute("width", W * scale); svg.setAttribute("height", H * scale); svg.dataset.scale = scale.toFixed(3); };
    const fit = () => { const box = document.getElementById("graph").clientWidth || W; zoom(Math.min(1, (box - 4) / W)); };
    document.getElementById("zoom-in").onclick = () => zoom(scale * 1.25);
    document.getElementById("zoom-out").onclick = () => zoom(scale / 1.25);
    document.getElementById("zoom-fit").onclick = fit;
    document.getElementById("zoom-full").onclick = () => zoom(1);
    fit();
  }
}

// ---- Stack -----------------------------------------------------------------------------------

// A component instance's state, in the whole UI: `/?ws=STATE#/VIEW`.
function wsHref(ws, hash) {
  return `/?ws=${encodeURIComponent(ws)}#/${hash}`;
}

function stackRunRowHtml(r) {
  return `<tr class="stack-run-row clickable" data-run="${esc(r.id)}">
    <td><a href="#/stack-run/${encodeURIComponent(r.id)}"><code>${esc(r.id)}</code></a></td>
    <td><code>cairn ${esc(r.args.length ? r.args.join(" ") : r.command)}</code></td>
    <td>${esc(r.user)}${r.host || r.git_commit ? `<div class="muted">${placeText(r)}</div>` : ""}</td>
    <td>${when(r.started_ms)}</td><td>${duration(r.duration_ms)}</td><td>${badge(r.outcome)}</td>
    <td>${esc(r.summary)}${r.message ? `<div class="muted">${esc(r.message)}</div>` : ""}</td></tr>`;
}

async function stackView() {
  const s = await api("/api/stack");
  document.title = "Stack · Cairn";
  let html = `<h1>Stack <code>${esc(s.dir)}</code></h1>`;
  html += s.errors.map(e => `<p class="error">${esc(e)}</p>`).join("");
  html += s.warnings.map(w => `<p class="warning">${esc(w)}</p>`).join("");
  for (const d of s.deployments) {
    html += `<h2 class="deployment" data-deployment="${esc(d.name)}">Deployment ${esc(d.name)}${d.declared ? "" : ` <span class="muted">(no longer declared)</span>`}</h2>
    <table class="stack-components"><tr><th>component</th><th>state</th><th>resources</th><th>runs</th><th>last run</th></tr>`;
    for (const c of d.components) {
      const title = `<strong>component.${esc(c.name)}</strong>${c.source ? ` <span class="muted">${esc(c.source)}</span>` : ""}${c.depends_on.length ? `<div class="muted">after ${c.depends_on.map(x => "component." + esc(x)).join(", ")}</div>` : ""}`;
      if (!c.instances.length) {
        html += `<tr class="component-row" data-component="${esc(c.name)}"><td>${title}</td><td colspan="4" class="muted">no state yet</td></tr>`;
        continue;
      }
      for (const i of c.instances) {
        const st = i.state || {};
        const last = st.last_run;
        html += `<tr class="instance-row" data-workspace="${esc(i.workspace)}">
          <td>${title}${i.key != null ? ` <code>[${esc(JSON.stringify(i.key))}]</code>` : ""}</td>
          <td><a class="ws-link" href="${wsHref(i.workspace, "timeline")}"><code>${esc(i.workspace)}</code></a> · <a href="${wsHref(i.workspace, "state")}">state</a></td>
          <td class="resources">${st.error ? `<span class="error">${esc(st.error)}</span>` : esc(st.resources)}</td>
          <td>${esc(st.runs)}</td>
          <td class="last-run">${last ? `<a href="${wsHref(i.workspace, "run/" + last.id)}">run ${last.id}</a> <code>${esc(last.command)}</code> ${badge(last.outcome)} <span class="muted">${when(last.started_ms)}</span>` : `<span class="muted">none</span>`}</td></tr>`;
      }
    }
    html += `</table>`;
  }
  html += `<h2>Stack runs</h2>`;
  html += s.runs.length
    ? `<table class="stack-runs"><tr><th>stack run</th><th>command</th><th>who, where</th><th>started</th><th>took</th><th>outcome</th><th>components</th></tr>${s.runs.map(stackRunRowHtml).join("")}</table>`
    : `<p class="muted">No stack runs yet.</p>`;
  main.innerHTML = html;
  for (const tr of main.querySelectorAll("tr.stack-run-row")) {
    tr.addEventListener("click", e => { if (!e.target.closest("a")) go("#/stack-run/" + encodeURIComponent(tr.dataset.run)); });
  }
}

function stackComponentHtml(c) {
  const counts = c.status === "applied"
    ? ` <span class="n-add">+${c.add}</span> <span class="n-change">~${c.change}</span> <span class="n-destroy">−${c.destroy}</span>`
    : (c.status === "planned" || c.status === "not applied") ? ` <span class="muted">${c.add} to add, ${c.change} to change, ${c.destroy} to destroy</span>` : "";
  const why = c.status === "deferred" && c.reason ? `<div class="muted">deferred: ${esc(c.reason)}</div>` : "";
  const errors = (c.errors || []).map(e => `<div class="error">${esc(e)}</div>`).join("");
  const runs = (c.runs || []).map(id => `<a class="component-run" href="${wsHref(c.workspace, "run/" + id)}">run ${id}</a>`).join(", ");
  const plans = (c.plans || []).length ? `<a href="${wsHref(c.workspace, "timeline")}">plan recorded</a>` : "";
  return `<tr class="stack-component" data-workspace="${esc(c.workspace)}" data-status="${esc(c.status)}">
    <td><code>${esc(c.address)}</code>${c.removed ? ` <span class="muted">(removed)</span>` : ""}</td><td>${esc(c.deployment)}</td>
    <td>${badge(c.status)}${counts}${why}${errors}</td>
    <td><a href="${wsHref(c.workspace, "timeline")}"><code>${esc(c.workspace)}</code></a></td>
    <td>${[runs, plans].filter(x => x).join(" · ") || `<span class="muted">—</span>`}</td></tr>`;
}

async function stackRunView(id) {
  const r = await api("/api/stack/run/" + encodeURIComponent(id));
  document.title = "Stack run · Cairn";
  let html = `<p><a href="#/stack">← Stack</a></p><h1>Stack run <code>${esc(r.id)}</code>: <code>cairn ${esc(r.args.length ? r.args.join(" ") : r.command)}</code> ${badge(r.outcome)}</h1>
  <div class="card">By <strong>${esc(r.user)}</strong>${r.host ? ` on <strong>${esc(r.host)}</strong>` : ""} at ${when(r.started_ms)}, ${duration(r.duration_ms)}
  ${r.git_commit ? ` · git <code class="run-git" title="${esc(r.git_commit)}">${esc(gitText(r))}</code>` : ""}${r.ci_job ? ` · CI job ${ciLink(r.ci_job)}` : ""}
  ${r.deployment ? ` · deployment <code>${esc(r.deployment)}</code>` : ""}${r.runners.length ? ` · runners ${r.runners.map(x => `<code>${esc(x)}</code>`).join(", ")}` : ""}
  <div>${esc(r.summary)}</div>${r.message ? `<div class="muted">${esc(r.message)}</div>` : ""}
  ${(r.diagnostics || []).map(d => `<pre class="stack-run-diag">${esc(d.severity === "Warning" ? "Warning" : "Error")}: ${esc(d.summary)}${d.location ? `\n  on ${esc(d.location)}` : ""}${d.detail ? `\n  ${esc(d.detail)}` : ""}</pre>`).join("")}</div>`;
  for (const step of r.steps) {
    const title = step.round != null ? `Round ${step.round}${step.status ? `: ${esc(step.status)}` : ""}`
      : `${esc(step.item || "work item")}: ${esc(step.status || "")}${step.runner ? ` by runner <code>${esc(step.runner)}</code>` : ""}${step.reason ? ` — ${esc(step.reason)}` : ""}`;
    html += `<h2 class="stack-step">${title} <span class="muted">${when(step.started_ms)}</span></h2>`;
    html += step.instances.length
      ? `<table class="stack-step-components"><tr><th>component instance</th><th>deployment</th><th>outcome</th><th>state</th><th>its runs</th></tr>${step.instances.map(stackComponentHtml).join("")}</table>`
      : `<p class="muted">No component instance.</p>`;
  }
  main.innerHTML = html;
}

// ---- Shell ---------------------------------------------------------------------------------

let rendering = Promise.resolve();

function render(refresh) {
  const r = route();
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === r.view || (r.view === "run" && a.dataset.view === "timeline"));
  }
  rendering = (async () => {
    try {
      if (r.view === "stack") await stackView();
      else if (r.view === "stack-run") await stackRunView(r.arg);
      else if (r.view === "run") await runView(r.arg);
      else if (r.view === "state") await stateView(r.q);
      else if (r.view === "resource") await resourceView(r.q, refresh);
      else if (r.view === "plan") await planView(r.arg);
      else await timeline(r.q);
      document.body.dataset.view = r.view;
      document.body.dataset.rendered = String(Date.now());
    } catch (e) {
      // The view's heading stays; the error is shown where its content would be.
      document.title = "Error · Cairn";
      // Another view's page is not left under the error.
      if (document.body.dataset.view !== r.view) main.innerHTML = "";
      const old = main.querySelector("#view-error");
      const box = `<p class="error" id="view-error">${esc(e.message)}</p>`;
      if (old) old.outerHTML = box; else main.insertAdjacentHTML("beforeend", box);
      document.body.dataset.view = r.view;
      document.body.dataset.rendered = String(Date.now());
    }
  })();
  return rendering;
}

async function poll() {
  try {
    const h = await api("/api/head");
    if (STACK && !WS) {
      statusEl.textContent = "stack · live";
      // A stack run recorded, or a component's state moved: the stack's views show it.
      if (known.stack !== undefined && h.stack !== known.stack && ["stack", "stack-run"].includes(route().view)) await render();
      known = h;
      return;
    }
    const busy = h.busy ? `cairn ${h.busy.command || "?"} (pid ${h.busy.pid || "?"}${h.busy.host ? " on " + h.busy.host : ""}) is running: ${h.store === "postgres" || h.store === "s3" ? "its events appear as it writes them" : "its run appears when it finishes"}` : "";
    const where = { postgres: "PostgreSQL · ", s3: "S3 · " }[h.store] || "";
    statusEl.textContent = busy || (h.missing ? "no state yet" : `${h.runs} runs · ${h.head} events · ${where}live`);
    statusEl.classList.toggle("busy", !!busy);
    document.body.dataset.head = h.head;
    // A saved plan file written again is read again.
    if (known.head !== -1 && h.head === known.head && JSON.stringify(h.plans_stamp) !== JSON.stringify(known.plans_stamp) && route().view === "plan") await render();
    // A plan recorded (a review) lands in the open timeline.
    if (known.head !== -1 && h.head === known.head && h.plan_runs !== known.plan_runs && route().view === "timeline" && !route().q.has("before")) await render();
    if (known.head !== -1 && h.head !== known.head) {
      const r = route();
      // New runs land in the views that show "now" without a reload.
      if (r.view === "plan" && !(r.arg || "").startsWith("run-")) await render();
      else if (r.view === "resource") await render(true);
      else if ((r.view === "timeline" && !r.q.has("before")) || (r.view === "state" && !r.q.has("at")) || (r.view === "run" && document.body.dataset.runOpen === "1")) await render();
    }
    known = h;
  } catch (e) {
    statusEl.textContent = "disconnected: " + e.message;
  }
}

window.addEventListener("hashchange", () => render());
// In a stack's directory the stack view comes first; a component's state (`?ws=`) shows the
// root module's views, with the way back to the stack.
api("/api/head", true).then(h => { STACK = h.stack != null; }, () => {}).then(() => {
  const nav = document.querySelector("nav");
  if (STACK && !WS) {
    nav.innerHTML = `<a href="#/stack" data-view="stack">Stack</a>`;
    document.querySelector("a.brand").href = "#/stack";
  } else if (STACK) {
    for (const a of nav.querySelectorAll("a")) a.href = "/?ws=" + encodeURIComponent(WS) + a.getAttribute("href");
    nav.insertAdjacentHTML("afterbegin", `<a href="/#/stack" class="crumb" id="back-to-stack">Stack</a><span class="crumb-ws">› <code>${esc(WS)}</code></span>`);
  }
  return render().then(poll);
});
setInterval(poll, 1000);
