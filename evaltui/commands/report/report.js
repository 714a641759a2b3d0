// evaltui report: draws the page from the run's summary (#report-data) and opens each pair's
// sample chunks (gzip'd JSON, base64) only when the sample browser shows them. No network, no
// library: the charts are SVG drawn here; text always goes in as text (textContent), never as markup.
"use strict";
(function () {
  const R = JSON.parse(document.getElementById("report-data").textContent);
  const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#999999"];
  const VERDICT = { r: "right", w: "wrong", f: "failed", u: "unscored" };
  const PAGE = 50;
  const SVGNS = "http://www.w3.org/2000/svg";
  const models = R.leaderboard.ranking.length ? R.leaderboard.ranking : R.leaderboard.models;
  const colour = (m) => PALETTE[R.leaderboard.models.indexOf(m) % PALETTE.length];

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const body = (id) => document.querySelector(`#${id} .body`);
  const fmt = (v, d = 2) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));
  const secs = (v) => (v === null || v === undefined ? "–" : v < 1 ? `${(v * 1000).toFixed(v < 0.01 ? 1 : 0)} ms` : `${v.toFixed(2)} s`);
  const count = (n) => Number(n || 0).toLocaleString("en");

  // ---------------------------------------------------------------- header
  function about() {
    const t = R.totals;
    const state = R.live ? el("span", { class: "live", text: "a run in progress: this is a snapshot" }) : el("span", { text: "finished" });
    const p = document.getElementById("about");
    p.append(`${R.kind} work dir ${R.work_dir} · `, state, ` · ${count(t.completed)} of ${count(t.total)} samples done, ${count(t.failed)} failed · written ${R.generated_at} by evaltui ${R.evaltui}`);
    for (const line of R.said.slice(-2)) p.append(el("br"), el("span", { class: "note", text: line }));
  }

  // ---------------------------------------------------------------- leaderboard
  // the uncertainty the leaderboard's JSON carries (as `--json`'s): `71.23 ±2.00`, its 95 % interval on hover
  function interval(ci) {
    return ci ? el("span", { class: "ci", title: `95 % interval [${fmt(ci.ci95[0])}, ${fmt(ci.ci95[1])}], standard error ${fmt(ci.stderr)}, ${count(ci.n)} samples`,
      text: ` ±${fmt((ci.ci95[1] - ci.ci95[0]) / 2)}` }) : null;
  }
  function leaderboard() {
    const L = R.leaderboard;
    const head = el("tr", {}, el("th", { text: "dataset" }), el("th", { text: "version" }), el("th", { text: "metric" }), el("th", { text: "mode" }),
      ...models.map((m) => el("th", { class: "num", text: m })));
    const rows = [];
    for (const d of L.datasets) {
      const metrics = [[d.metric + (d.note ? ` (${d.note})` : ""), d.scores, d.uncertainty], ...Object.entries(d.extra || {}).map(([m, s]) => [m, s, (d.extra_uncertainty || {})[m]])];
      for (const [label, scores, uncertainty] of metrics) {
        const values = models.map((m) => scores[m]).filter((v) => v !== null && v !== undefined);
        const best = values.length > 1 ? Math.max(...values) : null;
        rows.push(el("tr", {}, el("td", { text: d.abbr }), el("td", { text: d.version }), el("td", { text: label }), el("td", { text: d.mode }),
          ...models.map((m) => el("td", { class: "num" + (scores[m] === best ? " best" : "") }, fmt(scores[m]), interval((uncertainty || {})[m])))));
      }
    }
    rows.push(el("tr", { class: "average" }, el("td", { text: "Average" }), el("td", { text: "-" }), el("td", { text: "naive_average" }), el("td", { text: "-" }),
      ...models.map((m) => el("td", { class: "num", text: fmt(L.average[m]) + (L.average_half95[m] == null ? "" : ` ±${fmt(L.average_half95[m])}`) }))));
    body("leaderboard").append(el("table", { id: "leaderboard-table" }, el("thead", {}, head), el("tbody", {}, ...rows)),
      el("p", { class: "note", text: "Models ranked by their average; a model's average is shown once every dataset is scored." }));
  }

  // ---------------------------------------------------------------- charts
  function legend(names) {
    return el("div", { class: "legend" }, ...names.map((m) => el("span", {}, el("i", { style: `background:${colour(m)}` }), m)));
  }
  function barChart(groups, series, value, opts) {
    const W = Math.max(480, groups.length * (series.length * 18 + 36) + 60), H = 240, left = 44, bottom = 40, top = 10;
    const max = opts.max || Math.max(1, ...groups.flatMap((g) => series.map((s) => value(g, s) || 0)));
    const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", class: opts.cls || "" });
    s.append(svg("title", {}, opts.title));
    const y = (v) => top + (H - top - bottom) * (1 - v / max);
    for (let k = 0; k <= 4; k++) {
      const v = (max * k) / 4;
      s.append(svg("line", { class: "grid", x1: left, x2: W - 8, y1: y(v), y2: y(v) }), svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v, max >= 10 ? 0 : 1)));
    }
    const gw = (W - left - 8) / Math.max(1, groups.length);
    groups.forEach((g, i) => {
      const bw = Math.min(18, (gw - 16) / Math.max(1, series.length));
      const x0 = left + i * gw + (gw - bw * series.length) / 2;
      series.forEach((m, j) => {
        const v = value(g, m);
        if (v === null || v === undefined) return;
        const r = svg("rect", { class: "bar", x: x0 + j * bw, y: y(v), width: bw - 2, height: Math.max(0, y(0) - y(v)), fill: opts.fill ? opts.fill(m) : colour(m) });
        r.append(svg("title", {}, `${m} · ${g}: ${fmt(v)}`));
        s.append(r);
      });
      s.append(svg("text", { x: left + i * gw + gw / 2, y: H - bottom + 16, "text-anchor": "middle" }, String(g).slice(0, 18)));
    });
    s.append(svg("line", { class: "axis", x1: left, x2: W - 8, y1: y(0), y2: y(0) }));
    return s;
  }
  function lineChart(series, opts) {
    const W = 560, H = 220, left = 50, bottom = 30, top = 10, n = Math.max(2, ...series.map((s) => s.values.length));
    const all = series.flatMap((s) => s.values.filter((v) => v !== null));
    const max = Math.max(opts.min || 0, ...all) || 1;
    const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", class: opts.cls || "" });
    s.append(svg("title", {}, opts.title));
    const x = (k) => left + ((W - left - 8) * k) / (n - 1), y = (v) => top + (H - top - bottom) * (1 - v / max);
    for (let k = 0; k <= 4; k++) {
      const v = (max * k) / 4;
      s.append(svg("line", { class: "grid", x1: left, x2: W - 8, y1: y(v), y2: y(v) }), svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, opts.tick(v)));
    }
    s.append(svg("line", { class: "axis", x1: left, x2: W - 8, y1: y(0), y2: y(0) }));
    s.append(svg("text", { x: left, y: H - 8 }, opts.from), svg("text", { x: W - 8, y: H - 8, "text-anchor": "end" }, opts.to));
    for (const { name, values } of series) {
      let d = "";
      values.forEach((v, k) => { if (v !== null) d += `${d && values[k - 1] !== null ? "L" : "M"}${x(k).toFixed(1)},${y(v).toFixed(1)}`; });
      if (d) s.append(svg("path", { class: "line", d, fill: "none", stroke: colour(name), "stroke-width": 2 }));
    }
    return s;
  }
  function chart() {
    const rows = R.leaderboard.datasets;
    const b = body("chart");
    if (!rows.some((d) => models.some((m) => d.scores[m] !== null))) { b.append(el("p", { class: "note", text: "Nothing scored yet." })); }
    b.append(legend(models), barChart(rows.map((d) => d.abbr), models, (g, m) => rows.find((d) => d.abbr === g).scores[m], { max: 100, title: "score by dataset and model", cls: "scores-chart" }),
      el("p", { class: "note", text: "Each dataset's main metric, in percent." }));
  }

  // ---------------------------------------------------------------- datasets, failures
  const priced = R.pairs.some((p) => p.cost !== null && p.cost !== undefined);
  const money = (v) => (v === null || v === undefined ? "–" : v < 1 ? v.toFixed(4) : v.toFixed(2));
  function progress() {
    const cols = ["model", "dataset", "status", "done", "failed", "right", "wrong", "unscored", "score", ...(priced ? ["tokens in / out", "cost"] : [])];
    const head = el("tr", {}, ...cols.map((h, k) => el("th", { class: k > 2 ? "num" : null, text: h })));
    const rows = R.pairs.map((p) => el("tr", {}, el("td", { text: p.model }), el("td", { text: p.dataset }), el("td", { class: `status-${p.status}`, text: p.status + (p.error ? `: ${p.error}` : "") }),
      el("td", { class: "num", text: `${count(p.completed)} / ${count(p.total)}` }), el("td", { class: "num", text: count(p.failed) }),
      ...["r", "w", "u"].map((v) => el("td", { class: "num", text: count(p.counts[v]) })), el("td", { class: "num", text: p.score === null ? "–" : `${fmt(p.score)} ${p.metric}` }),
      ...(priced ? [el("td", { class: "num cost", text: `${count(p.tokens[0])} / ${count(p.tokens[1])}` }), el("td", { class: "num cost", text: money(p.cost) })] : [])));
    const total = R.pairs.reduce((n, p) => n + (p.cost || 0), 0);
    body("progress").append(el("table", { id: "pairs-table" }, el("thead", {}, head), el("tbody", {}, ...rows)),
      priced ? el("p", { class: "note", id: "cost-total", text: `Cost of the priced models' tokens, as their servers counted them: ${money(total)} in all (the models' prices per million tokens).` }) : null);
  }
  function failures() {
    const classes = [...new Set(R.pairs.flatMap((p) => Object.keys(p.failures)))].sort();
    const b = body("failures");
    if (!classes.length) { b.append(el("p", { class: "note", text: "No sample failed." })); return; }
    const head = el("tr", {}, el("th", { text: "model" }), el("th", { text: "dataset" }), ...classes.map((c) => el("th", { class: "num", text: c })));
    const rows = R.pairs.filter((p) => Object.keys(p.failures).length).map((p) => el("tr", {}, el("td", { text: p.model }), el("td", { text: p.dataset }),
      ...classes.map((c) => el("td", { class: "num", text: count(p.failures[c]) }))));
    const byModel = (c, m) => R.pairs.filter((p) => p.model === m).reduce((n, p) => n + (p.failures[c] || 0), 0);
    b.append(el("table", { id: "failures-table" }, el("thead", {}, head), el("tbody", {}, ...rows)), legend(models),
      barChart(classes, models, byModel, { title: "failed samples by error class and model", cls: "failures-chart" }));
  }

  // ---------------------------------------------------------------- latency
  function latency() {
    const b = body("latency");
    const names = Object.keys(R.latency);
    if (!names.length) { b.append(el("p", { class: "note", text: "No timings: the work dir keeps none (an OpenCompass run, or sample_log = false)." })); return; }
    const streamed = names.some((m) => R.latency[m].streamed);
    const cols = ["model", "answered", "p50", "p90", "p99", ...(streamed ? ["TTFT p50", "TTFT p90", "TTFT p99", "ITL p50"] : []), "req/s", "tokens/s"];
    const rows = names.map((m) => {
      const L = R.latency[m];
      const cells = [count(L.requests), secs(L.latency.p50), secs(L.latency.p90), secs(L.latency.p99)];
      if (streamed) cells.push(...(L.ttft ? [secs(L.ttft.p50), secs(L.ttft.p90), secs(L.ttft.p99), secs(L.itl.p50)] : ["–", "–", "–", "–"]));
      cells.push(fmt(L.requests_per_s, 1), fmt(L.tokens_per_s, 0));
      return el("tr", {}, el("td", { text: m }), ...cells.map((c) => el("td", { class: "num", text: c })));
    });
    b.append(el("table", { id: "latency-table" }, el("thead", {}, el("tr", {}, ...cols.map((c, k) => el("th", { class: k ? "num" : null, text: c })))), el("tbody", {}, ...rows)),
      el("p", { class: "note", text: "Latency: each answered request, sent to whole reply (p50, p90, p99; within 1 %). Throughput over the time each model had requests out." }));
    const T = R.timeline;
    if (!T.start) return;
    const span = T.width * Math.max(...Object.values(T.models).map((s) => s.rate.length));
    const from = new Date(T.start * 1000).toLocaleTimeString(), to = `+${secs(span)}`;
    const series = (key) => Object.entries(T.models).map(([name, s]) => ({ name, values: s[key] }));
    b.append(legend(Object.keys(T.models)), el("div", { class: "charts" },
      el("div", {}, el("h3", { text: "Answers per second" }), lineChart(series("rate"), { title: "answers per second over the run", tick: (v) => fmt(v, 1), from, to, cls: "throughput-chart" })),
      el("div", {}, el("h3", { text: "Median latency" }), lineChart(series("p50"), { title: "median latency over the run", tick: secs, from, to, cls: "latency-chart" }))));
  }

  // ---------------------------------------------------------------- samples
  const cache = new Map();
  async function chunk(pair, k) {
    const key = `${pair}-${k}`;
    if (cache.has(key)) return cache.get(key);
    const text = document.getElementById(`c${key}`).textContent;
    const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const rows = JSON.parse(await new Response(stream).text());
    if (cache.size > 64) cache.delete(cache.keys().next().value);
    cache.set(key, rows);
    return rows;
  }
  const view = { pair: 0, filter: "all", q: "", page: 0 };
  function readHash() {
    const h = new URLSearchParams(location.hash.replace(/^#(samples[?&]?)?/, ""));
    if (h.has("pair")) view.pair = Math.min(R.pairs.length - 1, Math.max(0, parseInt(h.get("pair"), 10) || 0));
    if (h.has("filter") && ["all", "r", "w", "f", "u"].includes(h.get("filter"))) view.filter = h.get("filter");
    if (h.has("q")) view.q = h.get("q");
    if (h.has("page")) view.page = Math.max(0, parseInt(h.get("page"), 10) || 0);
  }
  function field(label, value, pre) {
    if (value === null || value === undefined || value === "") return null;
    return el("div", { class: "field" }, el("b", { text: label }), pre === false ? el("span", { text: String(value) }) : el("pre", { text: String(value) }));
  }
  function card(r, open) {
    const p = R.pairs[view.pair];
    const where = `#${r.i}${r.e ? ` e${r.e}` : ""}`;
    const bits = [];
    if (r.l !== undefined) bits.push(`took ${secs(r.l)}`);
    if (r.t) bits.push(`${r.t.length} attempt${r.t.length > 1 ? "s" : ""}`);
    if (r.u) bits.push(`${r.u[0] + r.u[1]} tokens`);
    const short = r.v === "f" ? `${r.err[0]}${r.err[1] ? " " + r.err[1] : ""}: ${r.err[2] || ""}` : r.x !== undefined ? `extracted ${JSON.stringify(r.x)}` : "";
    const summary = el("summary", {}, el("span", { class: `verdict v-${r.v}`, text: VERDICT[r.v] }), `${where}  `, el("span", { text: short.slice(0, 120) }), el("span", { class: "meta", text: bits.join(" · ") }));
    const conversation = r.m ? el("div", { class: "field" }, el("b", { text: "conversation" }), ...r.m.map((t) => el("div", { class: "turn" }, el("span", { text: t.role }), t.reasoning_content ? el("pre", { class: "reasoning", text: t.reasoning_content }) : null, el("pre", { text: t.content })))) : null;
    const attempts = r.t ? el("div", { class: "field" }, el("b", { text: "attempts" }), el("table", {}, el("tbody", {},
      ...r.t.map((a, k) => el("tr", {}, el("td", { text: `${k + 1}` }), el("td", { text: a[1] === null ? "–" : String(a[1]) }), el("td", { text: a[2] }), el("td", { class: "num", text: secs(a[0]) }), el("td", { text: a[3] || "" })))))) : null;
    const tokens = r.u ? `prompt ${r.u[0]}, completion ${r.u[1]}` + (r.ttft !== undefined ? ` · time to first token ${secs(r.ttft)}, between tokens ${secs(r.itl)}` : "") : null;
    const detail = el("div", {}, field("system", r.s), conversation, field("prompt", r.p), field("reasoning", r.rc), field("answer", r.a),
      field("extracted", r.x), field("gold", r.g), field("verdict", VERDICT[r.v] + (r.sc ? ` · scores ${JSON.stringify(r.sc)}` : ""), false),
      field("judge's reasoning", r.j), field("result", r.res, false), r.err ? field("error", `${r.err[0]}${r.err[1] ? " " + r.err[1] : ""}: ${r.err[2] || ""}`) : null,
      field("perplexities", r.ppl ? r.ppl.map((v) => fmt(v, 3)).join(", ") : null, false), attempts, field("tries", r.n, false), field("tokens", tokens, false), field("took", r.l !== undefined ? secs(r.l) : null, false));
    return el("details", { class: "sample", "data-index": r.i, "data-verdict": r.v, open: open ? "" : null }, summary, detail);
  }
  function matches(r, q) {
    const hay = [r.p, r.s, r.rc, r.a, r.x, r.g, r.j, r.res, r.err && r.err[2], ...(r.m || []).map((t) => t.content)];
    return hay.some((h) => h !== undefined && h !== null && String(h).toLowerCase().includes(q));
  }
  let drawing = 0;
  async function drawSamples() {
    const mine = ++drawing;
    const p = R.pairs[view.pair];
    const list = document.getElementById("sample-list"), status = document.getElementById("sample-status");
    for (const [v, b] of Object.entries(filterButtons)) b.classList.toggle("on", v === view.filter);
    const wanted = [];
    for (let k = 0; k < p.verdicts.length; k++) if (view.filter === "all" || p.verdicts[k] === view.filter) wanted.push(k);
    let shown = wanted;
    const q = view.q.trim().toLowerCase();
    if (q) {
      shown = [];
      const chunks = [...new Set(wanted.map((k) => Math.floor(k / R.chunk)))];
      for (let n = 0; n < chunks.length; n++) {
        status.textContent = `searching: ${n} of ${chunks.length} chunks…`;
        const rows = await chunk(view.pair, chunks[n]);
        if (mine !== drawing) return;
        for (const k of wanted) if (Math.floor(k / R.chunk) === chunks[n] && matches(rows[k % R.chunk], q)) shown.push(k);
      }
    }
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    view.page = Math.min(view.page, pages - 1);
    const page = shown.slice(view.page * PAGE, (view.page + 1) * PAGE);
    const cards = [];
    for (const k of page) {
      const rows = await chunk(view.pair, Math.floor(k / R.chunk));
      if (mine !== drawing) return;
      cards.push(card(rows[k % R.chunk], cards.length === 0));
    }
    list.replaceChildren(...cards);
    status.textContent = `${count(shown.length)} of ${count(p.verdicts.length)} samples${q ? ` matching “${view.q}”` : ""} · page ${view.page + 1} of ${pages}`;
    document.getElementById("prev").disabled = view.page === 0;
    document.getElementById("next").disabled = view.page >= pages - 1;
    document.documentElement.dataset.samplesShown = String(cards.length);
    document.documentElement.dataset.samplesMs = String(Math.round(performance.now()));
  }
  const filterButtons = {};
  function samples() {
    const b = body("samples");
    if (!R.pairs.length) return;
    const pick = el("select", { id: "pair", onchange: (e) => { view.pair = +e.target.value; view.page = 0; refilter(); } },
      ...R.pairs.map((p, k) => el("option", { value: k, text: `${p.model} / ${p.dataset}` })));
    pick.value = String(view.pair);
    const buttons = ["all", "r", "w", "f", "u"].map((v) => (filterButtons[v] = el("button", { type: "button", "data-filter": v, onclick: () => { view.filter = v; view.page = 0; drawSamples(); } })));
    const search = el("input", { type: "search", id: "search", placeholder: "search prompts, answers, gold, errors", value: view.q });
    search.addEventListener("change", () => { view.q = search.value; view.page = 0; drawSamples(); });
    const prev = el("button", { id: "prev", type: "button", text: "← previous", onclick: () => { view.page -= 1; drawSamples(); } });
    const next = el("button", { id: "next", type: "button", text: "next →", onclick: () => { view.page += 1; drawSamples(); } });
    b.append(el("div", { class: "controls" }, pick, ...buttons, search, prev, next), el("p", { id: "sample-status", class: "note" }), el("div", { id: "sample-list" }));
    refilter();
  }
  function refilter() {
    const p = R.pairs[view.pair];
    const n = { all: p.verdicts.length, ...Object.fromEntries(["r", "w", "f", "u"].map((v) => [v, p.counts[v] || 0])) };
    for (const [v, b] of Object.entries(filterButtons)) b.textContent = `${v === "all" ? "all" : VERDICT[v]} (${count(n[v])})`;
    drawSamples();
  }

  about(); leaderboard(); chart(); progress(); failures(); latency(); readHash(); samples();
  document.documentElement.dataset.renderedMs = String(Math.round(performance.now()));
})();
