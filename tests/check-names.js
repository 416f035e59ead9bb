// SPDX-License-Identifier: MIT
// check-names.js - fails when a product file exports a name that does not
// carry its file's prefix (make check-names; make test runs it after the
// build). A reader who meets ecw_clock_now_ms knows to open clock.c.
//
//   node tests/check-names.js [--objdir DIR] OBJ...
//
// The names come from the objects' symbol tables (binutils nm): every symbol
// an object defines for others (T, D, B, R, C, W, ...; statics are not
// exported and not looked at), but for the names the compiler makes: a
// name starting with "__" is reserved to it (C11 7.1.3), and a sanitizer
// build defines some (ASan's __odr_asan.NAME beside each global). A file
// DIR/name.c may export:
//   - ecw_<name> and ecw_<name>_*;
//   - ecw_<module>_* where <module> is a part of its name before an
//     underscore and DIR/<module>.c exists: the module the file is part of
//     (node_error.c is part of node.c's, so ecw_node_errors_init passes);
//   - in worker/cmd/, ecw_cmd_*: the commands, called from main.c's table;
//   - in jobs/, ecw_job_<name> or ecw_job_<module>: a job type's descriptor
//     (the registry names them), also when it sits in <type>_audit.c;
//   - main, in worker/main.c.
// An object DIR/x/y.o stands for the source x/y.c (--objdir, the Makefile's
// $(BUILD)/obj); without DIR, for its own path with .c for .o.
// Exit 0: every name carries its prefix; 1: a name does not (each printed
// with its file and the prefixes it may have); 2: usage, or nm failed.
// Only node's own modules: the check needs no npm package.
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");

const NAME = "check-names";
function usage(msg) {
	if (msg) console.error(`${NAME}: ${msg}`);
	console.error("usage: node tests/check-names.js [--objdir DIR] OBJ...");
	process.exit(2);
}

let objdir = null;
const objs = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
	if (argv[i] === "--objdir") {
		if (++i >= argv.length) usage("--objdir needs a folder");
		objdir = argv[i];
	} else if (argv[i].startsWith("-")) {
		usage(`unknown option ${argv[i]}`);
	} else {
		objs.push(argv[i]);
	}
}
if (!objs.length) usage("no objects");

function sourceOf(obj) {
	let rel = obj;
	if (objdir) {
		rel = path.relative(objdir, obj);
		if (rel.startsWith("..")) usage(`${obj} is not under ${objdir}`);
	}
	return rel.replace(/\.o$/, ".c");
}

// Every symbol each object defines for others, by object: one nm for them
// all (-P: "NAME TYPE [VALUE SIZE]"; -A: each line prefixed "OBJ: "), as
// check-circles reads them.
function exportedByObject(objs) {
	let out;
	try {
		out = execFileSync("nm", ["-P", "-A", "--defined-only", "--extern-only", ...objs], {
			encoding: "utf8",
			maxBuffer: 1 << 28,
			stdio: ["ignore", "pipe", "pipe"],
		});
	} catch (e) {
		console.error(`${NAME}: nm failed: ${e.message}`);
		process.exit(2);
	}
	const byObj = new Map(objs.map((o) => [o, []]));
	for (const line of out.split("\n")) {
		const at = line.indexOf(": ");
		if (at < 0) continue;
		const names = byObj.get(line.slice(0, at));
		const f = line.slice(at + 2).trim().split(/\s+/);
		if (!names || f.length < 2) continue;
		if (/^[A-Z]$/.test(f[1]) && f[1] !== "U" && !f[0].startsWith("__")) names.push(f[0]);
	}
	return byObj;
}

// The prefixes src may give its names (without "ecw_"), and the descriptor
// names of jobs/.
function prefixes(src) {
	const dir = path.dirname(src);
	const base = path.basename(src, ".c");
	const own = [base];
	const parts = base.split("_");
	for (let k = 1; k < parts.length; k++) {
		const module = parts.slice(0, k).join("_");
		if (fs.existsSync(path.join(dir, module + ".c"))) own.push(module);
	}
	const exact = [];
	if (dir === "jobs") for (const p of own) exact.push(`ecw_job_${p}`);
	if (dir === path.join("worker", "cmd")) own.push("cmd");
	if (src === path.join("worker", "main.c")) exact.push("main");
	return { own, exact };
}

function allowed(name, p) {
	if (p.exact.includes(name)) return true;
	return p.own.some((o) => name === `ecw_${o}` || name.startsWith(`ecw_${o}_`));
}

let bad = 0;
let files = 0;
let names = 0;
const byObj = exportedByObject(objs);
for (const obj of objs) {
	const src = sourceOf(obj);
	const p = prefixes(src);
	files++;
	for (const name of byObj.get(obj)) {
		names++;
		if (allowed(name, p)) continue;
		bad++;
		const may = p.own.map((o) => `ecw_${o}_*`).concat(p.exact);
		console.error(`${NAME}: ${src} exports ${name}: its names start with ${may.join(", ")}`);
	}
}
if (bad) {
	console.error(
		`${NAME}: FAILED: ${bad} name(s) without their file's prefix (${files} files, ${names} names); ` +
			"rename them, or move them to the file whose name they carry"
	);
	process.exit(1);
}
console.log(`${NAME}: OK (${files} files, ${names} names, each with its file's prefix)`);
