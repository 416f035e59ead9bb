// SPDX-License-Identifier: MIT
// check-circles.js - fails when the product's files call each other in a
// circle that is not a known one (make check-circles; make test runs it after
// the build). STYLE.md: inside a room, too, files call one way.
//
//   node tests/check-circles.js [--known FILE] [--objdir DIR] [--update] [-v] OBJ...
//
// The arrows come from the objects' symbol tables (binutils nm), not from
// reading the sources: for each object its defined external symbols (T, D, B,
// R, C, W, ...) and its undefined ones (U, w); file A -> file B when A uses a
// symbol B defines. So a call, a use of a variable or of a const table, all
// count; a static function or an inline one in a header does not (it is the
// caller's own copy). Each strongly connected component of more than one file
// (Tarjan) is a circle, printed with its files and, per arrow inside it, the
// symbols that tie them:
//   circle: worker/a.c -> worker/b.c: ecw_b_get, ecw_b_put
// An object DIR/x/y.o stands for the source x/y.c (--objdir, the Makefile's
// $(BUILD)/obj); without DIR, for its own path with .c for .o.
//
// --known FILE lists the circles known today (tests/circles-known.txt), one a
// line, its files' source paths separated by spaces; # starts a comment. The
// check fails on a circle not listed there (a new one, or a listed one that
// gained or lost a file: the line must say exactly what remains), and on a
// listed circle that no longer exists, so the list only shrinks as circles are
// broken. --update rewrites FILE with today's circles instead (its leading
// comment kept): after breaking one, or moving files; review the diff.
// -v also prints the arrows of the known circles.
// Exit 0: no circle but the listed ones; 1: a new circle or a listed one
// gone; 2: usage, or nm failed on an object.
// Only node's own modules: the check needs no npm package.
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");

const NAME = "check-circles";
function usage(msg) {
	if (msg) console.error(`${NAME}: ${msg}`);
	console.error("usage: node tests/check-circles.js [--known FILE] [--objdir DIR] [--update] [-v] OBJ...");
	process.exit(2);
}

let knownPath = null;
let objdir = null;
let update = false;
let verbose = false;
const objs = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
	const a = argv[i];
	if (a === "--known" || a === "--objdir") {
		if (i + 1 >= argv.length) usage(`${a} needs a value`);
		if (a === "--known") knownPath = argv[++i];
		else objdir = argv[++i];
	} else if (a === "--update") update = true;
	else if (a === "-v" || a === "--verbose") verbose = true;
	else if (a.startsWith("-")) usage(`unknown option ${a}`);
	else objs.push(a);
}
if (objs.length === 0) usage("no object given");
if (update && !knownPath) usage("--update needs --known FILE");

// The source an object stands for.
function sourceOf(obj) {
	let rel = obj;
	if (objdir !== null) {
		const r = path.relative(objdir, obj);
		if (!r.startsWith("..") && !path.isAbsolute(r)) rel = r;
	}
	return rel.replace(/\.o$/, ".c");
}

// ---- the symbol tables ----------------------------------------------------
// nm -P (POSIX: "NAME TYPE [VALUE SIZE]"), -A (each line prefixed "OBJ: "),
// all the objects in one run. Upper-case types are external; U and w (weak,
// undefined) are uses; lower-case others are local, and ignored.
const NM = process.env.NM || "nm";
let out;
try {
	out = execFileSync(NM, ["-P", "-A", ...objs], { encoding: "utf8", maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "pipe"] });
} catch (e) {
	console.error(`${NAME}: ${NM} failed on the objects (are they built? make check-circles builds them):`);
	console.error(String(e.stderr || e.message).trim());
	process.exit(2);
}

const files = [...new Set(objs.map(sourceOf))].sort();
const byObj = new Map(objs.map((o) => [o, sourceOf(o)]));
const defs = new Map(); // symbol -> {strong: Set(file), weak: Set(file)}
const uses = new Map(files.map((f) => [f, new Set()])); // file -> Set(symbol)
for (const line of out.split("\n")) {
	if (!line) continue;
	// The object is the first "OBJ: " prefix that is one of ours (a path may
	// hold ": " too).
	let at = line.indexOf(": ");
	while (at >= 0 && !byObj.has(line.slice(0, at))) at = line.indexOf(": ", at + 1);
	if (at < 0) continue; // nm's own notes
	const file = byObj.get(line.slice(0, at));
	const [sym, type] = line.slice(at + 2).split(" ");
	if (!sym || !type) continue;
	if (type === "U" || type === "w" || type === "v") {
		uses.get(file).add(sym);
	} else if (/^[A-Z]$/.test(type) || type === "u") {
		if (!defs.has(sym)) defs.set(sym, { strong: new Set(), weak: new Set() });
		defs.get(sym)[type === "W" || type === "V" ? "weak" : "strong"].add(file);
	}
}

// ---- the arrows -------------------------------------------------------------
// arrows: file -> Map(file it uses -> sorted symbols). A weak definition counts
// only where there is no strong one (the linker's choice); a symbol no object
// defines is a library's (libc, curl, ...), and no arrow.
const arrows = new Map(files.map((f) => [f, new Map()]));
let narrows = 0;
for (const [file, syms] of uses) {
	for (const sym of [...syms].sort()) {
		const d = defs.get(sym);
		if (!d) continue;
		for (const to of d.strong.size ? d.strong : d.weak) {
			if (to === file) continue;
			const m = arrows.get(file);
			if (!m.has(to)) {
				m.set(to, []);
				narrows++;
			}
			m.get(to).push(sym);
		}
	}
}

// ---- the circles: Tarjan's strongly connected components ------------------
// Iterative, so that no tree is too deep for the stack.
function components() {
	const index = new Map(),
		low = new Map(),
		onStack = new Set(),
		stack = [],
		found = [];
	let next = 0;
	for (const root of files) {
		if (index.has(root)) continue;
		const work = [[root, [...arrows.get(root).keys()].sort(), 0]];
		index.set(root, next);
		low.set(root, next++);
		stack.push(root);
		onStack.add(root);
		while (work.length) {
			const top = work[work.length - 1];
			const [v, succ] = top;
			if (top[2] < succ.length) {
				const w = succ[top[2]++];
				if (!index.has(w)) {
					index.set(w, next);
					low.set(w, next++);
					stack.push(w);
					onStack.add(w);
					work.push([w, [...arrows.get(w).keys()].sort(), 0]);
				} else if (onStack.has(w)) {
					low.set(v, Math.min(low.get(v), index.get(w)));
				}
				continue;
			}
			work.pop();
			if (work.length) {
				const u = work[work.length - 1][0];
				low.set(u, Math.min(low.get(u), low.get(v)));
			}
			if (low.get(v) === index.get(v)) {
				const scc = [];
				let w;
				do {
					w = stack.pop();
					onStack.delete(w);
					scc.push(w);
				} while (w !== v);
				if (scc.length > 1) found.push(scc.sort());
			}
		}
	}
	return found.sort((a, b) => (a.join(" ") < b.join(" ") ? -1 : 1));
}
const circles = components();
const key = (c) => c.join(" ");

function printArrows(c, stream) {
	for (const a of c) {
		for (const [b, syms] of [...arrows.get(a)].sort()) {
			if (c.includes(b)) stream(`circle: ${a} -> ${b}: ${syms.join(", ")}`);
		}
	}
}

// ---- the known circles ------------------------------------------------------
let head = [];
const known = new Map(); // key -> line number
if (knownPath) {
	let text = "";
	try {
		text = fs.readFileSync(knownPath, "utf8");
	} catch (e) {
		if (!update) usage(`cannot read ${knownPath}: ${e.message}`);
	}
	// The leading comment is kept by --update; every other line is a circle.
	let inHead = true;
	text.split("\n").forEach((l, i) => {
		const t = l.replace(/#.*/, "").trim();
		if (t === "") {
			if (inHead && l.trim() !== "") head.push(l);
			return;
		}
		inHead = false;
		known.set(key(t.split(/\s+/).sort()), i + 1);
	});
}

if (update) {
	const body = circles.map(key).join("\n");
	fs.writeFileSync(knownPath, head.join("\n") + (head.length ? "\n" : "") + body + (body ? "\n" : ""));
	console.log(`${NAME}: wrote ${circles.length} circle(s) to ${knownPath}`);
	process.exit(0);
}

const short = (c) => "[" + c.map((f) => path.basename(f, ".c")).join(" ") + "]";
let fresh = 0;
for (const c of circles) {
	if (known.has(key(c))) {
		if (verbose) {
			console.log(`${NAME}: known circle of ${c.length} files: ${key(c)}`);
			printArrows(c, (s) => console.log(s));
		}
		continue;
	}
	fresh++;
	// A hint when it is a known one changed, not a wholly new one.
	const near = [...known.keys()].filter((k) => k.split(" ").some((f) => c.includes(f)));
	const hint = near.length
		? ` (it shares files with the known ${near.map((k) => `"${k}"`).join(", ")}: if it is what remains of one, ` +
		  `put it in ${knownPath} in its place)`
		: "";
	console.error(`${NAME}: a new circle of ${c.length} files: ${key(c)}${hint}`);
	printArrows(c, (s) => console.error(s));
}
const now = new Set(circles.map(key));
let gone = 0;
for (const [k, line] of known) {
	if (now.has(k)) continue;
	gone++;
	const missing = k.split(" ").filter((f) => !files.includes(f));
	const why = missing.length ? ` (not among the objects: ${missing.join(" ")}; moved or removed?)` : "";
	console.error(`${knownPath}:${line}: the known circle "${k}" no longer exists${why}: take its line out`);
}

if (fresh || gone) {
	console.error(
		`${NAME}: FAILED: ${fresh} new circle(s), ${gone} known circle(s) gone (${files.length} files, ${narrows} arrows); ` +
			`file A -> file B: A uses a symbol B defines (nm); split along a seam so that arrows point one way`
	);
	process.exit(1);
}
const left = circles.length ? `${circles.length} known circle(s) left: ${circles.map(short).join(" ")}` : "no circle";
console.log(`${NAME}: OK (${files.length} files, ${narrows} arrows; ${left})`);
