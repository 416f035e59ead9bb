// SPDX-License-Identifier: MIT
// check-dashboard.js - checks the Grafana dashboard against the worker (make rules-test):
//   node tests/check-dashboard.js DASHBOARD.json worker/telemetry/metrics.c [PROMTOOL]
// - every metric a query names (panel targets, template variable queries) is
//   one the worker exports: a family of worker/telemetry/metrics.c (a histogram as its
//   _bucket, _sum and _count series) or an unlabelled metric it renders with
//   add_header; a renamed metric would leave a panel empty without a word;
// - a selector's label matchers name labels that metric has (its own, `le` on
//   _bucket, `exported_job` beside `job`, and the scrape's instance, job,
//   namespace, pod);
// - panel ids are unique, and so are the refIds within a panel;
// - every variable used ($name, ${name}, [[name]]) is defined, or Grafana's
//   own ($__rate_interval...); DS_PROMETHEUS, instance and queue are; every
//   panel and query takes its data source from ${DS_PROMETHEUS};
// - with PROMTOOL, each query parses: variables are given plausible values and
//   the queries checked as recording rules (promtool check rules).
// Then it checks itself: copies with a metric renamed, a label renamed, an id
// repeated and an undefined variable must each be refused.
// Only node's own modules: rules-test needs no npm package.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { execFileSync } = require("child_process");

const [dashPath, metricsPath, promtool] = process.argv.slice(2);
if (!dashPath || !metricsPath) {
	console.error("usage: node tests/check-dashboard.js DASHBOARD.json worker/telemetry/metrics.c [PROMTOOL]");
	process.exit(2);
}

// The worker's metrics: name -> label names.
function exported(src) {
	const m = new Map();
	for (const [, body] of src.matchAll(/static struct family \w+ = \{([\s\S]*?)\n\};/g)) {
		const name = /\.name = "(\w+)"/.exec(body)[1];
		const labels = [...(/\.label_names = \{([^}]*)\}/.exec(body)?.[1] ?? "").matchAll(/"(\w+)"/g)].map((x) => x[1]);
		if (/\.histogram = true/.test(body)) {
			m.set(name + "_bucket", [...labels, "le"]);
			m.set(name + "_sum", labels);
			m.set(name + "_count", labels);
		} else {
			m.set(name, labels);
		}
	}
	for (const [, name] of src.matchAll(/add_header\(\s*&b,\s*"(\w+)"/g)) m.set(name, []);
	return m;
}

const SCRAPE_LABELS = ["instance", "job", "namespace", "pod"];
const KEYWORDS = new Set(["and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
	"bool", "offset", "inf", "nan"]);
const BUILTIN = /^__/; // $__rate_interval, $__interval, $__range, ...

// The problems of one PromQL query (Grafana's form: variables in it).
function queryProblems(where, expr, metrics) {
	const problems = [];
	let e = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
	for (const [, name, body] of e.matchAll(/([A-Za-z_:][\w:]*)\s*\{([^}]*)\}/g)) {
		const labels = metrics.get(name);
		if (!labels) continue; // reported below
		const allowed = new Set([...labels, ...SCRAPE_LABELS, ...(labels.includes("job") ? ["exported_job"] : [])]);
		for (const [, label] of body.matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g))
			if (!allowed.has(label)) problems.push(`${where}: ${name} has no label ${label} (it has ${labels.join(", ") || "none of its own"})`);
	}
	e = e.replace(/\{[^}]*\}/g, " ").replace(/\[[^\]]*\]/g, " ")
		.replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
	let n = 0;
	for (const m of e.matchAll(/\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:ms|[smhdwy])*|[A-Za-z_:][\w:]*(\s*\()?/g)) {
		const tok = m[0];
		if (/^\d/.test(tok) || m[1] || KEYWORDS.has(tok.toLowerCase())) continue;
		n++;
		if (!metrics.has(tok)) problems.push(`${where}: ${tok} is not a metric the worker exports (worker/telemetry/metrics.c)`);
	}
	if (n === 0) problems.push(`${where}: names no metric: ${expr}`);
	return problems;
}

function variablesUsed(text) {
	const used = new Set();
	for (const m of text.matchAll(/\$(\w+)|\$\{(\w+)(?:[.:][^}]*)?\}|\[\[(\w+)(?::\w+)?\]\]/g)) {
		const name = m[1] || m[2] || m[3];
		if (!/^\d+$/.test(name) && !BUILTIN.test(name)) used.add(name); // $1: label_replace's group
	}
	return used;
}

function check(dash, metrics) {
	const problems = [];
	const queries = []; // [where, expr]
	const vars = dash.templating?.list ?? [];
	const defined = new Set(vars.map((v) => v.name));
	const ds = vars.find((v) => v.name === "DS_PROMETHEUS");
	if (!ds || ds.type !== "datasource" || ds.query !== "prometheus")
		problems.push("templating: no datasource variable DS_PROMETHEUS of type prometheus");
	for (const name of ["instance", "queue"]) if (!defined.has(name)) problems.push(`templating: no variable ${name}`);
	const dsOk = (d, where) => {
		if (d?.uid !== "${DS_PROMETHEUS}") problems.push(`${where}: data source ${JSON.stringify(d)}, not \${DS_PROMETHEUS}`);
	};
	for (const v of vars) {
		if (v.type !== "query") continue;
		dsOk(v.datasource, `variable ${v.name}`);
		const q = typeof v.query === "string" ? v.query : v.query?.query;
		const lv = /^label_values\((.*),\s*(\w+)\)$/.exec(q ?? "");
		if (!lv) {
			problems.push(`variable ${v.name}: not label_values(SELECTOR, LABEL): ${q}`);
			continue;
		}
		queries.push([`variable ${v.name}`, lv[1]]);
		const metric = /^[A-Za-z_:][\w:]*/.exec(lv[1])?.[0];
		if (metrics.has(metric) && !metrics.get(metric).concat(SCRAPE_LABELS).includes(lv[2]))
			problems.push(`variable ${v.name}: ${metric} has no label ${lv[2]}`);
	}
	const panels = (dash.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
	const ids = new Map();
	for (const p of panels) {
		const where = `panel ${p.id} "${p.title}"`;
		if (ids.has(p.id)) problems.push(`${where}: id ${p.id} also belongs to "${ids.get(p.id)}"`);
		ids.set(p.id, p.title);
		if (!Number.isInteger(p.id)) problems.push(`${where}: the id is not an integer`);
		if (p.type === "row") continue;
		dsOk(p.datasource, where);
		if (!p.targets?.length) problems.push(`${where}: no query`);
		const refIds = new Set();
		for (const t of p.targets ?? []) {
			if (refIds.has(t.refId)) problems.push(`${where}: refId ${t.refId} twice`);
			refIds.add(t.refId);
			dsOk(t.datasource, `${where} ${t.refId}`);
			queries.push([`${where} ${t.refId}`, t.expr ?? ""]);
		}
	}
	for (const [where, expr] of queries) problems.push(...queryProblems(where, expr, metrics));
	for (const name of variablesUsed(JSON.stringify({ panels: dash.panels, templating: dash.templating })))
		if (!defined.has(name)) problems.push(`$${name} is used and not defined in templating`);
	return { problems, queries };
}

// Each query as a recording rule, the variables given values (JSON is YAML).
function promtoolProblems(queries) {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ecw-dashboard-"));
	const file = path.join(dir, "dashboard-queries.yaml");
	const values = { __rate_interval: "1m", __interval: "1m", __range: "1h" };
	const rules = queries.map(([, expr], i) => ({
		record: `dashboard_query_${i}`,
		expr: expr.replace(/\$(__\w+)|\$\{(__\w+)\}/g, (m, a, b) => values[a || b] ?? m)
			.replace(/\$(instance|queue)\b/g, ".*"),
	}));
	fs.writeFileSync(file, JSON.stringify({ groups: [{ name: "dashboard", rules }] }));
	try {
		execFileSync(promtool, ["check", "rules", file], { stdio: "pipe" });
		return [];
	} catch (e) {
		return [`promtool check rules of the queries failed:\n${e.stdout}${e.stderr}`];
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
}

const metrics = exported(fs.readFileSync(metricsPath, "utf8"));
if (metrics.size < 10 || !metrics.has("ecw_messages_total") || !metrics.has("ecw_jobs_in_flight")) {
	console.error(`check-dashboard: read only ${metrics.size} metric names from ${metricsPath}: has its shape changed?`);
	process.exit(1);
}
const text = fs.readFileSync(dashPath, "utf8");
const { problems, queries } = check(JSON.parse(text), metrics);
if (promtool) problems.push(...promtoolProblems(queries));

// The check must refuse a broken dashboard: one mistake at a time.
const mutants = [
	["a metric renamed", (s) => s.replace("ecw_jobs_in_flight{", "ecw_jobs_inflight{")],
	["a label renamed", (s) => s.replace('outcome=\\"retried\\"', 'result=\\"retried\\"')],
	["an id repeated", (s) => s.replace(/"id": 2,/, '"id": 1,')],
	["an undefined variable", (s) => s.replace('queue=~\\"$queue\\"', 'queue=~\\"$queues\\"')],
];
for (const [what, mutate] of mutants) {
	const broken = mutate(text);
	if (broken === text) problems.push(`self-check: the dashboard no longer has what "${what}" changes`);
	else if (check(JSON.parse(broken), metrics).problems.length === 0) problems.push(`self-check: ${what} went unnoticed`);
}

if (problems.length) {
	console.error(`${dashPath}:\n  ${problems.join("\n  ")}`);
	process.exit(1);
}
console.log(`${dashPath}: ${queries.length} queries name only the worker's metrics${promtool ? " and parse" : ""}; ` +
	`ids and variables in order`);
