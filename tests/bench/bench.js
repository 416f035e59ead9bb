// SPDX-License-Identifier: MIT
// bench.js - `make bench`: ecworker measured against a local Azurite, and
// side by side with the worker a team would otherwise write with the official
// SDK (sdk-worker.js). Prints one table and writes BUILD/bench/bench.json.
//
//   node tests/bench/bench.js --build BUILD [--out FILE]
//   BENCH_RUNS=N     counted runs per figure (default 3; the table shows the
//                    median and the min-max of the runs)
//   BENCH_QUICK=1    a smaller workload and one run, for development
//   BENCH_PARTS=...  a comma list of archive, fanout, idle, latency, delay,
//                    audit, hotlist, perjob, blobs (default all but audit,
//                    hotlist, perjob and blobs)
//
// Parts:
//   archive  employees moved Employees -> EmployeesArchive, one message each,
//            at concurrency 1, 16 and 64, ecworker and the SDK worker
//            alternating; plus ecworker on messages whose employee is absent
//            (the worker has next to nothing to do: what Azurite allows);
//            and tests/tools/rtfloor, the CPU of a bare round trip to the same
//            Azurite, which times ecworker's requests/msg is a floor under
//            any worker's CPU per message on this machine.
//   fanout   10,000 orders over 10 customers; then the same again, which
//            must write nothing.
//   idle     storage requests per minute on an empty queue at
//            poll_interval.max 10s, once the backoff has reached it; then,
//            BENCH_IDLE_FIRST_S after the worker started (default 600; 60
//            quick), one archive message, and the time until its archive
//            copy is written (bounded by poll_interval.max). It waits more
//            than it works, so it runs alongside the other parts, on an
//            Azurite of its own.
//   latency  end-to-end latency under a steady load: 20, 100 and 200
//            archive messages a second for BENCH_STEADY_WARMUP_S and then
//            BENCH_STEADY_S seconds each (default 5 + 20; 5 + 5 quick),
//            over 50 partitions, to ecworker and to
//            the SDK worker (polling every 50 ms when empty), both at
//            concurrency 16 and ecworker with its default configuration
//            (tests/bench/bench-defaults.yaml): p50,
//            p90, p99 and max of the time from just before a message's send
//            to its archive copy's Timestamp (Azurite's clock is this
//            machine's), of the messages sent after the load's first
//            BENCH_STEADY_WARMUP_S seconds; those sent in them are reported
//            apart as the start of the load (a worker at rest sees the
//            first message at its next poll). Azurite's queue and table
//            services run as two processes here (startAzuriteSplit). Each
//            message's figures: build/bench/<run>-latencies.json.
//            BENCH_STEADY_RATES=20,100,200 (the default) picks the rates.
//   delay    msgs/s through faultproxy (5 ms each way) at concurrency 1 and
//            64, and directly at 64.
//   audit    `ecworker audit` of an index over BENCH_AUDIT_SOURCES employees
//            (default 10,000; 2,000 quick): the index is built by
//            `audit --repair`, 1% of its entries deleted behind the worker's back,
//            then audited (time, storage requests per source, peak RSS),
//            repaired, and audited again (must find nothing). Not in the
//            default parts (it is a scale figure, not a ratio): name it in
//            BENCH_PARTS.
//   hotlist  an index-list by LastName over BENCH_HOT_KEYS employees (default
//            3,000; 600 quick), one message each, two workers at
//            concurrency 16: every employee named Jones (one hot list) and
//            then every name distinct (a list each), side by side: msgs/s,
//            412 answers and storage requests per message, and the messages
//            poisoned; then once BENCH_HOT_KEYS_BIG employees named Jones
//            (default 20,000; 4,000 quick; 0 skips it); at most 4,000
//            messages wait on the queue at a time (Azurite's queue slows
//            with its length), topped up as they run. Each hot list must
//            end holding every key, read as applications read it
//            (tests/interop/index-list-reader.js). Not in the default parts.
//   perjob   storage requests per message for each keyed job type, one
//            worker at concurrency 64 over BENCH_PER_JOB_MSGS messages
//            (default 2,000; 500 quick) spread over the 10 departments:
//            move (archive), index (by e-mail), index-list (by last name,
//            distinct values). Not in the default parts.
//   blobs    issue 36, beside an SDK peer doing the same with
//            @azure/storage-blob and @azure/data-tables (sdk-worker.js
//            with SDK_WORKER_JOB): 2,000 employees archived to blobs (job
//            archive-to-blob, 400 quick) at concurrency 16 and 64, each
//            blob checked afterwards; then 1,000 employees (200 quick) with
//            3 blobs each under their prefix, the one they name and two
//            past the grace, cleaned by the job employee-files (blob-ref)
//            at concurrency 16 until each prefix holds only its named
//            blob. Not in the default parts yet.
//
// Every measured run gets a fresh in-memory Azurite: Azurite 3.37's queue GC
// freezes the whole emulator for about 20 s every 60 s once thousands of
// messages were deleted, which would wreck the figures. Azurite runs with
// --silent (its access log would cost it a console write per request), on
// ports picked here. A worker's figures run from the moment it is ready (its
// "start" line, or the SDK worker's "ready" line) to the moment its last
// message is done (read from its log): CPU is user+sys of the worker process
// alone (/proc/PID/stat), peak RSS its VmHWM, Azurite's CPU share the same
// delta of Azurite's process over the wall time. A run whose tables do not
// show the work done (every employee archived, none left) fails the bench.
"use strict";
const { spawn, execFileSync } = require("child_process");
const fs = require("fs");
const http = require("http");
const net = require("net");
const os = require("os");
const path = require("path");
const readline = require("readline");
const { QueueClient } = require("@azure/storage-queue");
const { TableClient } = require("@azure/data-tables");
const { BlobServiceClient } = require("@azure/storage-blob");
const { readIndexList } = require("../interop/index-list-reader.js");

const TESTS = path.resolve(__dirname, "..");
const ROOT = path.resolve(TESTS, "..");
const DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const QUEUE = "bench";

// ---- options ----------------------------------------------------------------

function parseArgs(argv) {
	const o = { build: "build", out: null };
	for (let i = 0; i < argv.length; i++) {
		if (argv[i] === "--build" && i + 1 < argv.length) o.build = argv[++i];
		else if (argv[i] === "--out" && i + 1 < argv.length) o.out = argv[++i];
		else {
			console.error(`bench.js: unknown argument '${argv[i]}' (usage: bench.js --build BUILD [--out FILE])`);
			process.exit(2);
		}
	}
	o.build = path.resolve(ROOT, o.build);
	o.out = o.out ? path.resolve(o.out) : path.join(o.build, "bench", "bench.json");
	return o;
}

function envInt(name, dflt, min) {
	const s = process.env[name];
	if (s === undefined || s === "") return dflt;
	if (!/^\d+$/.test(s) || Number(s) < min) {
		console.error(`bench.js: ${name} must be a whole number >= ${min}, not '${s}'`);
		process.exit(2);
	}
	return Number(s);
}

const opts = parseArgs(process.argv.slice(2));
const QUICK = process.env.BENCH_QUICK === "1";
const RUNS = envInt("BENCH_RUNS", QUICK ? 1 : 3, 1);
const PARTS = (process.env.BENCH_PARTS || "archive,fanout,idle,latency,delay").split(",").map((s) => s.trim());
for (const p of PARTS)
	if (!["archive", "fanout", "idle", "latency", "delay", "audit", "hotlist", "perjob", "blobs", "export"].includes(p)) {
		console.error(`bench.js: unknown part '${p}' in BENCH_PARTS (archive, fanout, idle, latency, delay, audit, hotlist, perjob, blobs, export)`);
		process.exit(2);
	}

// Workload sizes: enough messages that a run lasts well over the resolution
// of /proc's CPU times (10 ms), few enough that the whole bench stays near a
// quarter of an hour on a 2-core machine.
const SIZE = QUICK
	? { c1: 100, c16: 400, c64: 400, absent: 400, floor: 2000, lat1: 50, lat64: 400, customers: 10, orders: 1000, windows: 1, windowS: 30 }
	: { c1: 500, c16: 2000, c64: 2000, absent: 2000, floor: 5000, lat1: 200, lat64: 2000, customers: 10, orders: 1000, windows: 3, windowS: 60 };
SIZE.hotKeys = envInt("BENCH_HOT_KEYS", QUICK ? 600 : 3000, 10);
SIZE.hotKeysBig = envInt("BENCH_HOT_KEYS_BIG", QUICK ? 4000 : 20000, 0);
const HOT_QUEUED = 4000; // the most hot-list messages waiting on the queue at once
SIZE.perJob = envInt("BENCH_PER_JOB_MSGS", QUICK ? 500 : 2000, 10);
SIZE.blobArchive = QUICK ? 400 : 2000;
SIZE.blobRef = QUICK ? 200 : 1000;
SIZE.exportRows = envInt("BENCH_EXPORT_ROWS", QUICK ? 20000 : 200000, 100);
SIZE.exportSmall = Math.max(100, Math.floor(SIZE.exportRows / 10));
SIZE.auditSources = envInt("BENCH_AUDIT_SOURCES", QUICK ? 2000 : 10000, 100);
const CONCURRENCY = [1, 16, 64];
const LATENCY_MS = 5;
const IDLE_POLL_MAX = "10s";
const RUN_TIMEOUT_MS = 5 * 60 * 1000;

const ECWORKER = path.join(opts.build, "ecworker");
const FAULTPROXY = path.join(opts.build, "tests", "tools", "faultproxy");
const RTFLOOR = path.join(opts.build, "tests", "tools", "rtfloor");
const AZURITE = path.join(TESTS, "node_modules", ".bin", "azurite");
const WORKDIR = path.join(opts.build, "bench");
const CLK_TCK = (() => {
	try {
		return Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;
	} catch {
		return 100;
	}
})();

// ---- processes -----------------------------------------------------------------

const children = new Set();

// A child process whose output is read line by line; until() waits for a line
// (or a state) that a predicate accepts.
class Child {
	constructor(name, cmd, args, { env, cwd, logFile }) {
		this.name = name;
		this.proc = spawn(cmd, args, { env: { ...process.env, ...env }, cwd, stdio: ["ignore", "pipe", "pipe"] });
		this.pid = this.proc.pid;
		this.exited = null;
		this.waiters = [];
		this.log = logFile ? fs.createWriteStream(logFile) : null;
		children.add(this);
		for (const stream of [this.proc.stdout, this.proc.stderr]) {
			readline.createInterface({ input: stream }).on("line", (line) => {
				if (this.log) this.log.write(line + "\n");
				if (this.onLine) this.onLine(line);
				this.check();
			});
		}
		this.exitPromise = new Promise((resolve) => {
			this.proc.on("exit", (code, signal) => {
				this.exited = { code, signal };
				children.delete(this);
				this.check();
				resolve(this.exited);
			});
		});
	}

	check() {
		for (const w of [...this.waiters]) {
			if (w.pred()) {
				this.waiters.splice(this.waiters.indexOf(w), 1);
				clearTimeout(w.timer);
				w.resolve();
			} else if (this.exited) {
				this.waiters.splice(this.waiters.indexOf(w), 1);
				clearTimeout(w.timer);
				w.reject(new Error(`${this.name} exited (${this.exited.code ?? this.exited.signal}) while waiting for ${w.what}`));
			}
		}
	}

	until(what, pred, timeoutMs) {
		return new Promise((resolve, reject) => {
			const w = { what, pred, resolve, reject };
			w.timer = setTimeout(() => {
				this.waiters.splice(this.waiters.indexOf(w), 1);
				reject(new Error(`${this.name}: no ${what} within ${timeoutMs / 1000} s`));
			}, timeoutMs);
			this.waiters.push(w);
			this.check();
		});
	}

	async stop() {
		if (this.exited) return this.exited;
		this.proc.kill("SIGTERM");
		const t = setTimeout(() => this.proc.kill("SIGKILL"), 10000);
		const r = await this.exitPromise;
		clearTimeout(t);
		if (this.log) this.log.end();
		return r;
	}
}

function killAll() {
	for (const c of children) {
		try {
			c.proc.kill("SIGKILL");
		} catch {
			// already gone
		}
	}
}
process.on("exit", killAll);
for (const sig of ["SIGINT", "SIGTERM"])
	process.on(sig, () => {
		killAll();
		process.exit(130);
	});

// A process's CPU time in microseconds: user+sys, and the system (kernel) part.
function cpuTimes(pid) {
	const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
	const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
	const [user, sys] = [Number(f[11]), Number(f[12])]; // fields 14 and 15: utime, stime
	return { cpu: ((user + sys) * 1e6) / CLK_TCK, sys: (sys * 1e6) / CLK_TCK };
}

// user+sys of a process, in microseconds.
function cpuUs(pid) {
	return cpuTimes(pid).cpu;
}

// Peak resident set size, in kB.
function peakRssKb(pid) {
	const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
	return m ? Number(m[1]) : NaN;
}

function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.once("error", reject);
		s.listen(0, "127.0.0.1", () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

function connects(port) {
	return new Promise((resolve) => {
		const s = net.connect(port, "127.0.0.1");
		s.once("connect", () => {
			s.destroy();
			resolve(true);
		});
		s.once("error", () => resolve(false));
	});
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function connectionString(queuePort, tablePort, blobPort) {
	return `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${DEV_KEY};` +
		`QueueEndpoint=http://127.0.0.1:${queuePort}/devstoreaccount1;TableEndpoint=http://127.0.0.1:${tablePort}/devstoreaccount1;` +
		`BlobEndpoint=http://127.0.0.1:${blobPort}/devstoreaccount1;`;
}

let azuriteCount = 0;

// A fresh in-memory Azurite on free ports.
async function startAzurite() {
	const n = ++azuriteCount;
	const dir = path.join(WORKDIR, `azurite-${n}`);
	fs.mkdirSync(dir, { recursive: true });
	const [bp, qp, tp] = [await freePort(), await freePort(), await freePort()];
	const az = new Child(`Azurite #${n}`, process.execPath, [fs.realpathSync(AZURITE), "--silent", "--inMemoryPersistence",
		"--skipApiVersionCheck", "--disableTelemetry", "--blobHost", "127.0.0.1", "--blobPort", String(bp),
		"--queueHost", "127.0.0.1", "--queuePort", String(qp), "--tableHost", "127.0.0.1", "--tablePort", String(tp)],
	{ cwd: dir, logFile: path.join(dir, "azurite.log") });
	for (let i = 0; ; i++) {
		if (az.exited) throw new Error(`Azurite exited during start-up (see ${dir}/azurite.log)`);
		if ((await connects(qp)) && (await connects(tp)) && (await connects(bp))) break;
		if (i > 200) throw new Error("Azurite did not listen within 20 s");
		await sleep(100);
	}
	az.queuePort = qp;
	az.tablePort = tp;
	az.blobPort = bp;
	az.cs = connectionString(qp, tp, bp);
	return az;
}

// Azurite's queue and table services as two processes, for the latency
// part: one Azurite runs every service on one Node thread, which a steady
// 200 msgs/s (about 1,000 requests a second) saturates here, so that it, not
// the worker, would set the latency. Both workers meet the same pair. pids:
// both processes, for their CPU.
async function startAzuriteSplit() {
	const n = ++azuriteCount;
	const dir = path.join(WORKDIR, `azurite-${n}`);
	fs.mkdirSync(dir, { recursive: true });
	const [qp, tp] = [await freePort(), await freePort()];
	const common = ["--silent", "--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry"];
	const bin = (name) => fs.realpathSync(path.join(path.dirname(AZURITE), name));
	const queue = new Child(`Azurite queue #${n}`, process.execPath, [bin("azurite-queue"), ...common, "--queueHost", "127.0.0.1",
		"--queuePort", String(qp)], { cwd: dir, logFile: path.join(dir, "azurite-queue.log") });
	const table = new Child(`Azurite table #${n}`, process.execPath, [bin("azurite-table"), ...common, "--tableHost", "127.0.0.1",
		"--tablePort", String(tp)], { cwd: dir, logFile: path.join(dir, "azurite-table.log") });
	const az = {
		pids: [queue.pid, table.pid], queuePort: qp, tablePort: tp, cs: connectionString(qp, tp),
		stop: async () => { await queue.stop(); await table.stop(); },
	};
	for (let i = 0; ; i++) {
		if (queue.exited || table.exited) {
			await az.stop();
			throw new Error(`Azurite exited during start-up (see ${dir}/azurite-*.log)`);
		}
		if ((await connects(qp)) && (await connects(tp))) break;
		if (i > 200) throw new Error("Azurite did not listen within 20 s");
		await sleep(100);
	}
	return az;
}

// faultproxy between the worker and Azurite, both services mapped, with
// LATENCY_MS added each way.
async function startProxy(az) {
	const dir = path.join(WORKDIR, `azurite-${azuriteCount}`);
	const ready = path.join(dir, "proxy.ready");
	fs.rmSync(ready, { force: true });
	const p = new Child("faultproxy", FAULTPROXY, ["--map", `0:127.0.0.1:${az.queuePort}`, "--map", `0:127.0.0.1:${az.tablePort}`,
		"--latency-ms", String(LATENCY_MS), "--ready-file", ready], { logFile: path.join(dir, "proxy.log") });
	for (let i = 0; ; i++) {
		if (p.exited) throw new Error(`faultproxy exited during start-up (see ${dir}/proxy.log)`);
		if (fs.existsSync(ready)) {
			const ports = new Map();
			for (const line of fs.readFileSync(ready, "utf8").split("\n")) {
				const m = /^(\d+) 127\.0\.0\.1:(\d+)$/.exec(line.trim());
				if (m) ports.set(Number(m[2]), Number(m[1]));
			}
			if (ports.has(az.queuePort) && ports.has(az.tablePort)) {
				p.cs = connectionString(ports.get(az.queuePort), ports.get(az.tablePort));
				return p;
			}
		}
		if (i > 100) throw new Error("faultproxy did not write its ready file within 10 s");
		await sleep(100);
	}
}

// ---- workers -----------------------------------------------------------------------

function httpGet(port, urlPath) {
	return new Promise((resolve, reject) => {
		http.get({ host: "127.0.0.1", port, path: urlPath, agent: false }, (res) => {
			let body = "";
			res.setEncoding("utf8");
			res.on("data", (d) => (body += d));
			res.on("end", () => resolve(body));
		}).on("error", reject);
	});
}

// ecw_storage_requests_total as [{op, status, value}].
async function storageRequests(port) {
	const text = await httpGet(port, "/metrics");
	const out = [];
	for (const m of text.matchAll(/^ecw_storage_requests_total\{op="([^"]*)",status="([^"]*)"\} (\d+)$/gm))
		out.push({ op: m[1], status: m[2], value: Number(m[3]) });
	return out;
}

const TABLE_WRITES = new Set(["table.batch", "table.insert", "table.upsert", "table.upsert_merge", "table.update",
	"table.merge", "table.delete"]);
const SETUP_OPS = new Set(["queue.create", "table.create", "blob.container_create"]);

// A worker process that logs JSON lines: classify(j) says which line means
// it is ready, which a message done or failed.
class Worker extends Child {
	constructor(name, cmd, args, options, classify) {
		super(name, cmd, args, options);
		this.succeeded = 0;
		this.failed = 0;
		this.isReady = false;
		this.onLine = (line) => {
			let j;
			try {
				j = JSON.parse(line);
			} catch {
				return;
			}
			const what = classify(j);
			if (what === "ready") this.isReady = true;
			else if (what === "succeeded") this.succeeded++;
			else if (what === "failed") this.failed++;
		};
	}

	ready() {
		return this.until("its ready line", () => this.isReady, 20000);
	}

	done(n) {
		return this.until(`${n} messages done`, () => this.succeeded >= n, RUN_TIMEOUT_MS);
	}

	async requests() {
		return (await this.requestCounts()).total;
	}
}

// ecworker with tests/bench/bench.yaml: ready at its "start" line (which
// names its metrics port), one "message" line per outcome.
function startEcworker(cs, concurrency, pollMax, tag, config = "bench.yaml") {
	const w = new Worker(`ecworker ${tag}`, ECWORKER, ["run", "-c", path.join(__dirname, config)], {
		env: { AZURE_STORAGE_CONNECTION_STRING: cs, ECW_BENCH_CONCURRENCY: String(concurrency), ECW_BENCH_POLL_MAX: pollMax },
		logFile: path.join(WORKDIR, `${tag}.log`),
	}, (j) => {
		if (j.event === "start") {
			w.metricsPort = j.metrics_port;
			return "ready";
		}
		if (j.event === "message") {
			w.outcomes[j.outcome] = (w.outcomes[j.outcome] || 0) + 1;
			return j.outcome === "succeeded" ? "succeeded" : "failed";
		}
		return null;
	});
	w.outcomes = {};
	// The storage requests since start, less the start's own (create the
	// queues and tables); byOp says which.
	w.requestCounts = async () => {
		const byOp = {};
		for (const r of await storageRequests(w.metricsPort))
			if (!SETUP_OPS.has(r.op)) byOp[r.op] = (byOp[r.op] || 0) + r.value;
		return { total: Object.values(byOp).reduce((a, v) => a + v, 0), byOp };
	};
	return w;
}

// sdk-worker.js: its lines carry the requests it has sent so far. job:
// its SDK_WORKER_JOB; to: the archive table, or the container.
function startSdkWorker(cs, concurrency, tag, idleMs = 0, job = "archive", to = "EmployeesArchive") {
	let atReady = 0;
	let last = 0;
	const w = new Worker(`SDK worker ${tag}`, process.execPath,
		[path.join(__dirname, "sdk-worker.js"), QUEUE, "Employees", to, String(concurrency)],
		{ env: { AZURE_STORAGE_CONNECTION_STRING: cs, SDK_WORKER_IDLE_MS: String(idleMs), SDK_WORKER_JOB: job,
			SDK_WORKER_GRACE_S: String(BLOB_GRACE_S) }, logFile: path.join(WORKDIR, `${tag}.log`) },
		(j) => {
			if (j.msg === "ready") {
				atReady = j.requests;
				return "ready";
			}
			if (j.msg === "done") {
				last = Math.max(last, j.requests);
				return "succeeded";
			}
			return j.msg === "failed" ? "failed" : null;
		});
	w.requestCounts = async () => ({ total: last - atReady, byOp: null });
	return w;
}

// ---- workloads ------------------------------------------------------------------------

const DEPARTMENTS = ["Sales", "Ops", "Engineering", "Finance", "Support", "Marketing", "Legal", "People", "Research", "Facilities"];
const LAST = ["Jones", "O'Brien", "Smith", "Zoë", "García", "Nguyen", "Müller", "Kowalski", "Okafor", "Tanaka", "Silva"];
const FIRST = ["Pat", "Sam", "Alex", "Robin", "Kim", "Jordan", "Noor", "Lee", "Ana", "Chris", "Mika"];

// An employee as an HR application writes one: about a dozen properties of
// the usual EDM types, keys as in the README ("o'brien 001").
function employee(i) {
	const last = LAST[i % LAST.length];
	const first = FIRST[(i * 7) % FIRST.length];
	const id = String(i).padStart(6, "0");
	return {
		partitionKey: DEPARTMENTS[i % DEPARTMENTS.length],
		rowKey: `${last.toLowerCase()} ${id}`,
		FirstName: first,
		LastName: last,
		Email: `${first}.${last}.${id}@example.com`.toLowerCase(),
		Title: ["Engineer", "Analyst", "Manager", "Associate", "Director"][i % 5],
		Phone: `+1 425 555 ${String(i % 10000).padStart(4, "0")}`,
		Office: `Building ${1 + (i % 40)}, room ${100 + (i % 300)}`,
		EmployeeNo: { value: String(9007199254740993 + i), type: "Int64" },
		Salary: { value: String(48000.25 + (i % 500) * 137.5), type: "Double" },
		HireDate: { value: new Date(Date.UTC(2010 + (i % 15), i % 12, 1 + (i % 28))).toISOString(), type: "DateTime" },
		Active: true,
		Notes: "Prefers email; remote on Fridays; badge renewed annually.",
	};
}

function tableClient(cs, name) {
	return TableClient.fromConnectionString(cs, name, { allowInsecureConnection: true });
}

// Runs fn over items with at most `limit` in flight.
async function pool(items, limit, fn) {
	let next = 0;
	const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
		while (next < items.length) await fn(items[next++]);
	});
	await Promise.all(lanes);
}

// Entities in transactions of up to 100 per partition.
async function insertAll(client, entities) {
	const byPk = new Map();
	for (const e of entities) {
		if (!byPk.has(e.partitionKey)) byPk.set(e.partitionKey, []);
		byPk.get(e.partitionKey).push(e);
	}
	const batches = [];
	for (const list of byPk.values())
		for (let i = 0; i < list.length; i += 100) batches.push(list.slice(i, i + 100));
	await pool(batches, 4, (b) => client.submitTransaction(b.map((e) => ["create", e])));
}

async function enqueue(cs, texts) {
	const q = new QueueClient(cs, QUEUE);
	await q.createIfNotExists();
	await pool(texts, 16, (t) => q.sendMessage(t));
}

async function listAll(client) {
	const out = [];
	for await (const e of client.listEntities()) out.push(e);
	return out;
}

// The archive holds exactly the seeded employees (same keys and emails) and
// Employees is empty.
async function verifyArchive(cs, seeded) {
	const [left, archived] = [await listAll(tableClient(cs, "Employees")), await listAll(tableClient(cs, "EmployeesArchive"))];
	if (left.length) throw new Error(`${left.length} employees were not moved (first: ${left[0].partitionKey}/${left[0].rowKey})`);
	const want = new Map(seeded.map((e) => [`${e.partitionKey}\u0000${e.rowKey}`, e.Email]));
	if (archived.length !== want.size) throw new Error(`the archive holds ${archived.length} employees, not ${want.size}`);
	for (const e of archived)
		if (want.get(`${e.partitionKey}\u0000${e.rowKey}`) !== e.Email)
			throw new Error(`archived ${e.partitionKey}/${e.rowKey} is not a seeded employee (or its Email differs)`);
}

function archiveMessage(e) {
	return JSON.stringify({ job: "archive-employee", pk: e.partitionKey, rk: e.rowKey });
}

// One measured archive run on a fresh Azurite. kind: "ecworker" or "sdk";
// present: whether the employees exist (false: the worker has nothing to
// move); proxy: through faultproxy.
// toBlob: the archive-to-blob job (issue 36), into the container
// employee-archive, instead of the table move.
async function archiveRun({ kind, concurrency, n, present = true, proxy = false, toBlob = false, tag }) {
	const az = await startAzurite();
	let w = null;
	let px = null;
	try {
		const seeded = Array.from({ length: n }, (_, i) => employee(i));
		const emp = tableClient(az.cs, "Employees");
		await emp.createTable();
		if (!toBlob) await tableClient(az.cs, "EmployeesArchive").createTable();
		if (present) await insertAll(emp, seeded);
		await enqueue(az.cs, seeded.map(toBlob ? blobArchiveMessage : archiveMessage));
		if (proxy) px = await startProxy(az);
		const cs = px ? px.cs : az.cs;
		if (kind === "ecworker") w = startEcworker(cs, concurrency, "1s", tag);
		else w = toBlob ? startSdkWorker(cs, concurrency, tag, 0, "archive-to-blob", ARCHIVE_CONTAINER) : startSdkWorker(cs, concurrency, tag);
		await w.ready();
		const t0 = process.hrtime.bigint();
		const [w0, az0, px0] = [cpuTimes(w.pid), cpuUs(az.pid), px ? cpuUs(px.pid) : 0];
		await w.done(n);
		const wall = Number(process.hrtime.bigint() - t0) / 1e9;
		const [w1, az1, px1] = [cpuTimes(w.pid), cpuUs(az.pid), px ? cpuUs(px.pid) : 0];
		const rssKb = peakRssKb(w.pid);
		const requests = await w.requestCounts();
		await w.stop();
		if (px) await px.stop();
		if (w.failed) throw new Error(`${w.failed} message outcomes other than success (see ${w.log.path})`);
		if (present) await (toBlob ? verifyBlobArchive(az.cs, seeded) : verifyArchive(az.cs, seeded));
		return {
			kind, concurrency, n, present, proxy, seconds: wall, msgsPerS: n / wall, cpuUsPerMsg: (w1.cpu - w0.cpu) / n,
			sysUsPerMsg: (w1.sys - w0.sys) / n,
			peakRssMb: rssKb / 1024, requestsPerMsg: requests.total / n, requestsByOp: requests.byOp,
			azuriteCpuPct: ((az1 - az0) / 1e6 / wall) * 100, proxyCpuPct: px ? ((px1 - px0) / 1e6 / wall) * 100 : null,
		};
	} finally {
		if (w) await w.stop();
		if (px) await px.stop();
		await az.stop();
	}
}

// ---- blobs (issue 36) -----------------------------------------------------------------------

const ARCHIVE_CONTAINER = "employee-archive";
const FILES_CONTAINER = "employee-files";
const BLOB_GRACE_S = 1; // bench.yaml's employee-files grace
const BLOB_CONCURRENCY = [16, 64];

function blobArchiveMessage(e) {
	return JSON.stringify({ job: "archive-to-blob", pk: e.partitionKey, rk: e.rowKey });
}

function containerClient(cs, name) {
	return BlobServiceClient.fromConnectionString(cs).getContainerClient(name);
}

async function listBlobs(cs, container, prefix) {
	const out = [];
	for await (const b of containerClient(cs, container).listBlobsFlat(prefix ? { prefix } : {})) out.push(b);
	return out;
}

// Employees is empty and the container holds one blob per seeded employee,
// "{PartitionKey}/{RowKey}.json", the Table service's JSON of it: its Email,
// and its Int64 beyond 2^53 typed and exact.
async function verifyBlobArchive(cs, seeded) {
	const left = await listAll(tableClient(cs, "Employees"));
	if (left.length) throw new Error(`${left.length} employees were not moved (first: ${left[0].partitionKey}/${left[0].rowKey})`);
	const blobs = await listBlobs(cs, ARCHIVE_CONTAINER);
	if (blobs.length !== seeded.length) throw new Error(`the container holds ${blobs.length} blobs, not ${seeded.length}`);
	const c = containerClient(cs, ARCHIVE_CONTAINER);
	await pool(seeded, 16, async (e) => {
		const name = `${e.partitionKey}/${e.rowKey}.json`;
		const j = JSON.parse((await c.getBlobClient(name).downloadToBuffer()).toString("utf8"));
		if (j.PartitionKey !== e.partitionKey || j.RowKey !== e.rowKey || j.Email !== e.Email ||
			j["EmployeeNo@odata.type"] !== "Edm.Int64" || j.EmployeeNo !== e.EmployeeNo.value)
			throw new Error(`blob ${name} does not hold its employee as the Table service's JSON`);
	});
}

// One measured blob-ref run on a fresh Azurite: n employees, each naming its
// photo, with 3 blobs under "{PartitionKey}/{RowKey}/": the photo it names
// and two it replaced, older than the grace; one message each. Ends when
// each prefix holds only the named photo.
async function blobRefRun({ kind, concurrency, n, tag }) {
	const az = await startAzurite();
	let w = null;
	try {
		const photo = (e, k) => `${e.partitionKey}/${e.rowKey}/photo-${k}.jpg`;
		const seeded = Array.from({ length: n }, (_, i) => employee(i)).map((e) => ({ ...e, Photo: photo(e, 2) }));
		const emp = tableClient(az.cs, "Employees");
		await emp.createTable();
		await insertAll(emp, seeded);
		const c = containerClient(az.cs, FILES_CONTAINER);
		await c.create();
		const jpeg = Buffer.alloc(2048, 0xab);
		await pool(seeded.flatMap((e) => [0, 1, 2].map((k) => photo(e, k))), 16,
			(name) => c.getBlockBlobClient(name).upload(jpeg, jpeg.length));
		await sleep(BLOB_GRACE_S * 1000 + 1100); // the replaced photos are past the grace (Last-Modified has whole seconds)
		await enqueue(az.cs, seeded.map((e) => JSON.stringify({ job: "employee-files", pk: e.partitionKey, rk: e.rowKey })));
		w = kind === "ecworker" ? startEcworker(az.cs, concurrency, "1s", tag) : startSdkWorker(az.cs, concurrency, tag, 0, "blob-ref", FILES_CONTAINER);
		await w.ready();
		const t0 = process.hrtime.bigint();
		const w0 = cpuTimes(w.pid);
		await w.done(n);
		const wall = Number(process.hrtime.bigint() - t0) / 1e9;
		const w1 = cpuTimes(w.pid);
		const rssKb = peakRssKb(w.pid);
		const requests = await w.requestCounts();
		await w.stop();
		if (w.failed) throw new Error(`${w.failed} message outcomes other than success (see ${w.log.path})`);
		const left = (await listBlobs(az.cs, FILES_CONTAINER)).map((b) => b.name).sort();
		const want = seeded.map((e) => e.Photo).sort();
		if (left.length !== want.length || left.some((x, i) => x !== want[i]))
			throw new Error(`the container holds ${left.length} blobs, not the ${want.length} named photos`);
		return { kind, concurrency, n, seconds: wall, msgsPerS: n / wall, cpuUsPerMsg: (w1.cpu - w0.cpu) / n,
			sysUsPerMsg: (w1.sys - w0.sys) / n, peakRssMb: rssKb / 1024, requestsPerMsg: requests.total / n };
	} finally {
		if (w) await w.stop();
		await az.stop();
	}
}

async function measureBlobs() {
	const blobs = { archive: { ecworker: {}, sdk: {} }, ref: { ecworker: [], sdk: [] } };
	for (let r = 1; r <= RUNS; r++) {
		for (const c of BLOB_CONCURRENCY) {
			const order = (r + c / 16) % 2 ? ["ecworker", "sdk"] : ["sdk", "ecworker"];
			for (const kind of order) {
				progress(`blob archive run ${r}/${RUNS}: ${kind} at concurrency ${c}, ${SIZE.blobArchive} messages`);
				const res = await archiveRun({ kind, concurrency: c, n: SIZE.blobArchive, toBlob: true, tag: `blobarchive-${kind}-c${c}-run${r}` });
				progress(`  ${fmt(res.msgsPerS, 1)} msgs/s, ${fmt(res.cpuUsPerMsg, 0)} µs CPU/msg, ${fmt(res.peakRssMb, 1)} MB, ${fmt(res.requestsPerMsg, 2)} requests/msg`);
				(blobs.archive[kind][c] ||= []).push(res);
			}
		}
		for (const kind of r % 2 ? ["ecworker", "sdk"] : ["sdk", "ecworker"]) {
			progress(`blob-ref run ${r}/${RUNS}: ${kind} at concurrency 16, ${SIZE.blobRef} employees with 3 blobs each`);
			const res = await blobRefRun({ kind, concurrency: 16, n: SIZE.blobRef, tag: `blobref-${kind}-run${r}` });
			progress(`  ${fmt(res.msgsPerS, 1)} msgs/s, ${fmt(res.cpuUsPerMsg, 0)} µs CPU/msg, ${fmt(res.peakRssMb, 1)} MB, ${fmt(res.requestsPerMsg, 2)} requests/msg`);
			blobs.ref[kind].push(res);
		}
	}
	return blobs;
}

function summarizeBlobs(blobs, t) {
	const summary = { archive: {} };
	for (const c of BLOB_CONCURRENCY) {
		const [e, s] = [blobs.archive.ecworker[c], blobs.archive.sdk[c]];
		const [E, S] = [statsOf(e), statsOf(s)];
		const rate = stat(e.map((x, i) => x.msgsPerS / s[i].msgsPerS));
		const cpu = stat(e.map((x, i) => x.cpuUsPerMsg / s[i].cpuUsPerMsg));
		summary.archive[c] = { ecworker: E, sdk: S, msgsPerSRatio: rate, cpuPerMsgRatio: cpu };
		t.add(`archive to blobs c${c} (${SIZE.blobArchive} msgs): msgs/s`, fmtStat(E.msgsPerS, 1), fmtStat(S.msgsPerS, 1), fmtStat(rate, 2),
			">= 1 x peer", rate.median >= 1);
		t.add(`archive to blobs c${c}: CPU µs/msg`, fmtStat(E.cpuUsPerMsg, 0), fmtStat(S.cpuUsPerMsg, 0), fmtStat(cpu, 3),
			"<= 0.05 x peer", cpu.median <= 0.05);
		t.add(`archive to blobs c${c}: peak RSS MB`, fmtStat(E.peakRssMb, 1), fmtStat(S.peakRssMb, 1), "", "<= 20", E.peakRssMb.median <= 20);
		t.add(`archive to blobs c${c}: storage requests/msg`, fmtStat(E.requestsPerMsg, 2), fmtStat(S.requestsPerMsg, 2));
	}
	const [E, S] = [statsOf(blobs.ref.ecworker), statsOf(blobs.ref.sdk)];
	summary.ref = { ecworker: E, sdk: S };
	t.add(`blob-ref c16 (${SIZE.blobRef} employees x 3 blobs): msgs/s`, fmtStat(E.msgsPerS, 1), fmtStat(S.msgsPerS, 1),
		fmt(E.msgsPerS.median / S.msgsPerS.median, 2));
	t.add("blob-ref c16: CPU µs/msg", fmtStat(E.cpuUsPerMsg, 0), fmtStat(S.cpuUsPerMsg, 0), fmt(E.cpuUsPerMsg.median / S.cpuUsPerMsg.median, 3));
	t.add("blob-ref c16: peak RSS MB", fmtStat(E.peakRssMb, 1), fmtStat(S.peakRssMb, 1));
	t.add("blob-ref c16: storage requests/msg", fmtStat(E.requestsPerMsg, 2), fmtStat(S.requestsPerMsg, 2));
	return summary;
}

// ---- export (issue 37): one window of log rows into a blob, then deleted --------------

const EXPORT_WINDOW_S = 1795986000; // 2026-11-29T21:00:00Z, bench-export.yaml's message
const TICKS_EPOCH = 621355968000000000n;
const TICKS_MAX = 3155378975999999999n;
const invTicks = (ms) => String(TICKS_MAX - (BigInt(ms) * 10000n + TICKS_EPOCH)).padStart(19, "0");

// Log row i of n, spread over the hour, about 300 bytes of JSON.
function logRow(i, n) {
	const ms = EXPORT_WINDOW_S * 1000 + Math.floor((i * 3600000) / n);
	return {
		partitionKey: "web",
		rowKey: `${invTicks(ms)}_${String(i).padStart(6, "0")}`,
		Level: i % 10 ? "Info" : "Warn",
		Host: `web-${String(i % 8).padStart(2, "0")}`,
		LatencyMs: i % 997,
		Bytes: { value: String(1000000000000 + i), type: "Int64" },
		When: { value: new Date(ms).toISOString(), type: "DateTime" },
		Message: `GET /api/orders/${i}?page=${i % 50} 200 `.padEnd(150, "."),
	};
}

// Seeds n rows and runs one export of their window with ecworker or the SDK
// script; checks the blob holds every row once and the table none.
async function exportRun({ kind, n, tag }) {
	const az = await startAzurite();
	let w = null;
	try {
		const logs = tableClient(az.cs, "AppLogs");
		await logs.createTable();
		const rows = Array.from({ length: n }, (_, i) => logRow(i, n));
		await insertAll(logs, rows);
		await containerClient(az.cs, "logs").createIfNotExists();
		const name = "web/2026/11/29/2100/000001.log";
		let res;
		if (kind === "ecworker") {
			await enqueue(az.cs, [JSON.stringify({ job: "applogs-hourly", app: "web", window_start: "2026-11-29T21:00Z" })]);
			w = startEcworker(az.cs, 1, "1s", tag, "bench-export.yaml");
			await w.ready();
			const t0 = process.hrtime.bigint();
			const c0 = cpuTimes(w.pid);
			await w.done(1);
			const wall = Number(process.hrtime.bigint() - t0) / 1e9;
			const c1 = cpuTimes(w.pid);
			res = { seconds: wall, cpuUs: c1.cpu - c0.cpu, peakRssMb: peakRssKb(w.pid) / 1024,
				requests: (await w.requestCounts()).total };
			await w.stop();
			if (w.failed) throw new Error(`the export did not succeed (see ${w.log.path})`);
		} else {
			const lo = invTicks((EXPORT_WINDOW_S + 3600) * 1000);
			const hi = invTicks(EXPORT_WINDOW_S * 1000 - 1);
			const t0 = process.hrtime.bigint();
			const out = execFileSync(process.execPath, [path.join(__dirname, "sdk-export.js"), "AppLogs", "web", lo, hi, "logs", name],
				{ env: { ...process.env, AZURE_STORAGE_CONNECTION_STRING: az.cs }, maxBuffer: 1 << 20 }).toString();
			const wall = Number(process.hrtime.bigint() - t0) / 1e9;
			const j = JSON.parse(out.trim().split("\n").pop());
			if (j.rows !== n) throw new Error(`the SDK script exported ${j.rows} rows, not ${n}`);
			res = { seconds: wall, cpuUs: j.cpuUs, peakRssMb: j.maxRssKb / 1024, requests: NaN };
		}
		const text = (await containerClient(az.cs, "logs").getBlobClient(name).downloadToBuffer()).toString("utf8");
		const lines = text.split("\n").filter((l) => l);
		const keys = new Set(lines.map((l) => JSON.parse(l).RowKey));
		if (lines.length !== n || keys.size !== n) throw new Error(`${kind}: the blob holds ${lines.length} lines (${keys.size} rows), not ${n}`);
		const left = await listAll(logs);
		if (left.length) throw new Error(`${kind}: ${left.length} rows left in the table`);
		return { kind, n, ...res, cpuUsPerRow: res.cpuUs / n, rowsPerS: n / res.seconds };
	} finally {
		if (w) await w.stop();
		await az.stop();
	}
}

async function measureExport() {
	const runs = { ecworker: [], sdk: [], small: [] };
	for (let r = 1; r <= RUNS; r++) {
		for (const kind of r % 2 ? ["ecworker", "sdk"] : ["sdk", "ecworker"]) {
			progress(`export run ${r}/${RUNS}: ${kind}, one window of ${SIZE.exportRows} rows`);
			const res = await exportRun({ kind, n: SIZE.exportRows, tag: `export-${kind}-run${r}` });
			progress(`  ${fmt(res.seconds, 1)} s, ${fmt(res.cpuUs / 1e6, 2)} s CPU, ${fmt(res.peakRssMb, 1)} MB`);
			runs[kind].push(res);
		}
		progress(`export run ${r}/${RUNS}: ecworker, one window of ${SIZE.exportSmall} rows (memory)`);
		const res = await exportRun({ kind: "ecworker", n: SIZE.exportSmall, tag: `export-small-run${r}` });
		progress(`  ${fmt(res.seconds, 1)} s, ${fmt(res.peakRssMb, 1)} MB`);
		runs.small.push(res);
	}
	return runs;
}

function summarizeExport(runs, t) {
	const keys = ["seconds", "cpuUsPerRow", "peakRssMb", "requests"];
	const of = (list) => Object.fromEntries(keys.map((k) => [k, stat(list.map((x) => x[k]))]));
	const [E, S, M] = [of(runs.ecworker), of(runs.sdk), of(runs.small)];
	const cpu = stat(runs.ecworker.map((x, i) => x.cpuUs / runs.sdk[i].cpuUs));
	const time = stat(runs.ecworker.map((x, i) => x.seconds / runs.sdk[i].seconds));
	t.add(`export of ${SIZE.exportRows} rows: seconds`, fmtStat(E.seconds, 1), fmtStat(S.seconds, 1), fmtStat(time, 2));
	t.add(`export of ${SIZE.exportRows} rows: CPU µs/row`, fmtStat(E.cpuUsPerRow, 1), fmtStat(S.cpuUsPerRow, 1), fmtStat(cpu, 3),
		"<= 0.1 x peer", cpu.median <= 0.1);
	t.add(`export of ${SIZE.exportRows} rows: peak RSS MB`, fmtStat(E.peakRssMb, 1), fmtStat(S.peakRssMb, 1), "", "<= 32",
		E.peakRssMb.max <= 32);
	t.add(`export of ${SIZE.exportSmall} rows: peak RSS MB`, fmtStat(M.peakRssMb, 1), "", "", "flat",
		E.peakRssMb.max <= M.peakRssMb.max * 1.25);
	t.add(`export of ${SIZE.exportRows} rows: storage requests`, fmtStat(E.requests, 0), "");
	return { ecworker: E, sdk: S, small: M, cpuRatio: cpu, timeRatio: time };
}

// The CPU floor of one storage round trip on this machine: tests/tools/rtfloor
// sends a small request on one keep-alive connection and reads the answer,
// nothing else. No worker can spend less per request than this.
async function floorRun(count) {
	const az = await startAzurite();
	try {
		const out = JSON.parse(execFileSync(RTFLOOR, [String(az.tablePort), String(count)]).toString());
		return { requests: out.requests, cpuUsPerRequest: out.user_us + out.sys_us, userUs: out.user_us, sysUs: out.sys_us };
	} finally {
		await az.stop();
	}
}

// ---- fan-out -------------------------------------------------------------------------------

function customer(c) {
	return { partitionKey: "customers", rowKey: `c${String(c).padStart(2, "0")}`, Name: `Customer ${c} Ltd`,
		Email: `orders@customer${c}.example` };
}

function order(c, i) {
	return {
		partitionKey: customer(c).rowKey,
		rowKey: `order-${String(i).padStart(5, "0")}`,
		Total: { value: String(10.5 + (i % 300)), type: "Double" },
		Items: 1 + (i % 9),
		Status: ["open", "shipped", "delivered"][i % 3],
		PlacedAt: { value: new Date(Date.UTC(2026, i % 12, 1 + (i % 28))).toISOString(), type: "DateTime" },
		ShipTo: `${i} Main Street, Springfield`,
	};
}

// One fan-out pass: a fresh worker, one message per customer; seconds from
// ready to the last message done, and its table writes by operation.
async function fanoutPass(az, nCustomers, tag) {
	await enqueue(az.cs, Array.from({ length: nCustomers }, (_, c) =>
		JSON.stringify({ job: "customer-to-orders", pk: "customers", rk: customer(c + 1).rowKey })));
	const w = startEcworker(az.cs, 16, "1s", tag);
	try {
		await w.ready();
		const t0 = process.hrtime.bigint();
		await w.done(nCustomers);
		const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
		const reqs = await storageRequests(w.metricsPort);
		const writes = reqs.filter((r) => TABLE_WRITES.has(r.op));
		const byOp = {};
		for (const r of writes) byOp[r.op] = (byOp[r.op] || 0) + r.value;
		if (w.failed) throw new Error(`${w.failed} fan-out messages did not succeed (see ${w.log.path})`);
		return { seconds, writes: writes.reduce((a, r) => a + r.value, 0), writesByOp: byOp };
	} finally {
		await w.stop();
	}
}

async function fanoutRun(tag) {
	const az = await startAzurite();
	try {
		const nC = SIZE.customers;
		const nO = SIZE.orders;
		const customers = tableClient(az.cs, "Customers");
		const orders = tableClient(az.cs, "Orders");
		await customers.createTable();
		await orders.createTable();
		await insertAll(customers, Array.from({ length: nC }, (_, c) => customer(c + 1)));
		const all = [];
		for (let c = 1; c <= nC; c++) for (let i = 1; i <= nO; i++) all.push(order(c, i));
		await insertAll(orders, all);
		const first = await fanoutPass(az, nC, `${tag}-first`);
		let wrong = 0;
		for (const o of await listAll(orders)) {
			const c = customer(Number(o.partitionKey.slice(1)));
			if (o.CustomerName !== c.Name || o.CustomerEmail !== c.Email || o.Status === undefined) wrong++;
		}
		if (wrong) throw new Error(`${wrong} orders do not carry their customer's name and email after the fan-out`);
		const again = await fanoutPass(az, nC, `${tag}-again`);
		return { targets: nC * nO, partitions: nC, groups: nC * Math.ceil(nO / 100), first, again };
	} finally {
		await az.stop();
	}
}

// ---- audit ------------------------------------------------------------------------------------

// One `ecworker audit` of the index job as a process: its JSON line, wall
// seconds and peak RSS (VmHWM, read until it exits).
async function auditOnce(az, args, tag) {
	const a = new Child(`ecworker audit ${tag}`, ECWORKER, ["audit", "-c", path.join(__dirname, "bench.yaml"), "--json", ...args,
		"employee-by-email"], { env: { AZURE_STORAGE_CONNECTION_STRING: az.cs, ECW_BENCH_CONCURRENCY: "1",
		ECW_BENCH_POLL_MAX: "1s" }, logFile: path.join(WORKDIR, `${tag}.log`) });
	let line = null;
	a.onLine = (l) => {
		if (l.startsWith("{\"job\"")) line = l;
	};
	let rssKb = 0;
	const t0 = process.hrtime.bigint();
	while (!a.exited) {
		try {
			const kb = peakRssKb(a.pid); // NaN once it is a zombie: no VmHWM left
			if (Number.isFinite(kb)) rssKb = Math.max(rssKb, kb);
		} catch {
			// gone between the check and the read
		}
		await Promise.race([a.exitPromise, sleep(50)]);
	}
	const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
	if (a.log) a.log.end();
	if (!line) throw new Error(`ecworker audit ${tag} printed no result (exit ${a.exited.code}; see ${WORKDIR}/${tag}.log)`);
	return { exit: a.exited.code, seconds, peakRssMb: rssKb / 1024, ...JSON.parse(line) };
}

// The index is built by the audit itself (--repair over sources with no
// entries: a run of the job per source, one client), not through messages:
// ten thousand index messages at concurrency 64 meet Azurite's queue GC
// stalls (see the top) and take minutes more than the audit measured.
async function auditRun(tag) {
	const n = SIZE.auditSources;
	const az = await startAzurite();
	try {
		const seeded = Array.from({ length: n }, (_, i) => employee(i));
		const emp = tableClient(az.cs, "Employees");
		await emp.createTable();
		await tableClient(az.cs, "EmployeesByEmail").createTable();
		await insertAll(emp, seeded);
		const build = await auditOnce(az, ["--repair"], `${tag}-build`);
		if (build.exit !== 0 || build.missing !== n || build.repaired !== n)
			throw new Error(`building the index by --repair: ${build.repaired} of ${n} repaired (exit ${build.exit})`);
		// Drift: every 100th entry deleted behind the worker's back.
		const idx = tableClient(az.cs, "EmployeesByEmail");
		const dropped = seeded.filter((_, i) => i % 100 === 0);
		await pool(dropped, 16, (e) => idx.deleteEntity("email", e.Email));
		const found = await auditOnce(az, [], `${tag}-audit`);
		if (found.exit !== 3 || found.missing !== dropped.length)
			throw new Error(`the audit found ${found.missing} missing entries (exit ${found.exit}), not ${dropped.length}`);
		const repair = await auditOnce(az, ["--repair"], `${tag}-repair`);
		if (repair.exit !== 0 || repair.repaired !== dropped.length)
			throw new Error(`--repair repaired ${repair.repaired} (exit ${repair.exit}), not ${dropped.length}`);
		const clean = await auditOnce(az, [], `${tag}-clean`);
		if (clean.exit !== 0) throw new Error(`the audit after the repair exited ${clean.exit}`);
		return { sources: n, drift: dropped.length, build, found, repair, clean };
	} finally {
		await az.stop();
	}
}

async function measureAudit() {
	const runs = [];
	for (let r = 1; r <= RUNS; r++) {
		progress(`audit run ${r}/${RUNS}: an index of ${SIZE.auditSources} employees built by --repair, 1% of it deleted, audited, repaired, audited`);
		const a = await auditRun(`audit-run${r}`);
		progress(`  built in ${fmt(a.build.seconds, 1)} s (${fmt(a.build.requests / a.sources, 2)} requests/source); ` +
			`audit ${fmt(a.found.seconds, 1)} s, ${fmt(a.found.requests / a.sources, 2)} requests/source, ` +
			`peak RSS ${fmt(a.found.peakRssMb, 1)} MB; repair ${fmt(a.repair.seconds, 1)} s`);
		runs.push(a);
	}
	return runs;
}

// ---- hot lists ---------------------------------------------------------------------------------

// n employees indexed by LastName through messages, two workers at
// concurrency 16; hot: all named Jones. Every message must end succeeded or
// poisoned (a retried one comes back); with nothing poisoned, the hot list
// must then hold every key, read as an application reads it.
async function hotlistRun(hot, n, tag) {
	const az = await startAzurite();
	const ws = [];
	try {
		const seeded = Array.from({ length: n }, (_, i) => ({ ...employee(i), LastName: hot ? "Jones" : `Name${i}` }));
		const emp = tableClient(az.cs, "Employees");
		await emp.createTable();
		await insertAll(emp, seeded);
		// Azurite's queue slows down with its length (a receive or delete
		// on a queue of 20,000 messages costs several times one on 2,000),
		// so at most HOT_QUEUED messages wait at a time: the figure is the
		// worker's and the list's, not the emulator's queue.
		const texts = seeded.map((e) => JSON.stringify({ job: "employees-by-last-name", pk: e.partitionKey, rk: e.rowKey }));
		let queued = Math.min(texts.length, HOT_QUEUED);
		await enqueue(az.cs, texts.slice(0, queued));
		for (let k = 0; k < 2; k++) ws.push(startEcworker(az.cs, 16, "1s", `${tag}-w${k + 1}`));
		await Promise.all(ws.map((w) => w.ready()));
		const t0 = process.hrtime.bigint();
		const ended = () => ws.reduce((a, w) => a + (w.outcomes.succeeded || 0) + (w.outcomes.poisoned || 0), 0);
		// A message can also end without a final outcome: a delete that
		// timed out and applied, then 404 on its retry, is "lease-lost"
		// with the message gone. So once every message is queued and few
		// remain, the queue's count (hidden messages included) says when
		// none is left; the list check below proves the work.
		const queue = new QueueClient(az.cs, QUEUE);
		let checked = 0;
		for (const deadline = Date.now() + RUN_TIMEOUT_MS * (n > 5000 ? 6 : 1); ended() < n;) {
			if (Date.now() > deadline) throw new Error(`${ended()} of ${n} index-list messages ended within ${RUN_TIMEOUT_MS / 1000} s`);
			if (queued < texts.length && queued - ended() < HOT_QUEUED / 2) {
				const more = texts.slice(queued, queued + HOT_QUEUED / 2);
				await enqueue(az.cs, more);
				queued += more.length;
			}
			if (queued === texts.length && n - ended() <= 32 && Date.now() - checked > 2000) {
				checked = Date.now();
				if ((await queue.getProperties()).approximateMessagesCount === 0) break;
			}
			await sleep(50);
		}
		const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
		let requests = 0;
		let status412 = 0;
		const byOp = {};
		for (const w of ws)
			for (const r of await storageRequests(w.metricsPort)) {
				if (!SETUP_OPS.has(r.op)) {
					requests += r.value;
					byOp[r.op] = (byOp[r.op] || 0) + r.value;
				}
				if (r.status === "412") status412 += r.value;
			}
		const perOp = Object.entries(byOp).sort((a, b) => b[1] - a[1]).map(([op, v]) => `${op} ${fmt(v / n, 2)}`);
		const count = (o) => ws.reduce((a, w) => a + (w.outcomes[o] || 0), 0);
		const poisoned = count("poisoned");
		const leaseLost = count("lease-lost");
		if (hot && poisoned === 0) {
			const keys = await readIndexList(tableClient(az.cs, "EmployeesByLastName"), "lastname", "Jones");
			if (keys.length !== n) throw new Error(`the Jones list holds ${keys.length} keys, not ${n}`);
		}
		return { hot, n, seconds, msgsPerS: n / seconds, requestsPerMsg: requests / n, precondition412PerMsg: status412 / n,
			poisoned, retried: count("retried"), leaseLost, perOp: perOp.join(", ") };
	} finally {
		for (const w of ws) await w.stop();
		await az.stop();
	}
}

async function measureHotlist() {
	const runs = { hot: [], distinct: [], big: [] };
	const one = async (hot, n, key, r) => {
		const what = hot ? "one value (Jones)" : "distinct values";
		progress(`hot-list ${r ? `run ${r}/${RUNS}` : "once"}: ${n} employees of ${what}, 2 workers x 16`);
		const res = await hotlistRun(hot, n, `hotlist-${key}-${r ? `run${r}` : "once"}`);
		progress(`  ${fmt(res.msgsPerS, 1)} msgs/s, ${fmt(res.precondition412PerMsg, 2)} 412/msg, ${fmt(res.requestsPerMsg, 2)} requests/msg, ${res.poisoned} poisoned, ${res.retried} retried, ${res.leaseLost} lease-lost`);
		progress(`  requests/msg by operation: ${res.perOp}`);
		runs[key].push(res);
	};
	for (let r = 1; r <= RUNS; r++) {
		await one(true, SIZE.hotKeys, "hot", r);
		await one(false, SIZE.hotKeys, "distinct", r);
	}
	if (SIZE.hotKeysBig > 0) await one(true, SIZE.hotKeysBig, "big", 0);
	return runs;
}

// ---- requests per message, per job type ---------------------------------------------------------

// n messages of one job over the seeded employees, one worker at c64: the
// storage requests it made per message (setup excluded).
async function perJobRun(job, n, tag) {
	const az = await startAzurite();
	let w = null;
	try {
		const seeded = Array.from({ length: n }, (_, i) => ({ ...employee(i), LastName: `Name${i}` }));
		const emp = tableClient(az.cs, "Employees");
		await emp.createTable();
		await insertAll(emp, seeded);
		await enqueue(az.cs, seeded.map((e) => JSON.stringify({ job, pk: e.partitionKey, rk: e.rowKey })));
		w = startEcworker(az.cs, 64, "1s", tag);
		await w.ready();
		const done = () => (w.outcomes.succeeded || 0) + (w.outcomes.poisoned || 0);
		for (const deadline = Date.now() + RUN_TIMEOUT_MS; done() < n;) {
			if (Date.now() > deadline) throw new Error(`${done()} of ${n} ${job} messages ended within ${RUN_TIMEOUT_MS / 1000} s`);
			await sleep(50);
		}
		if (w.outcomes.poisoned) throw new Error(`${w.outcomes.poisoned} ${job} messages were poisoned`);
		let requests = 0;
		for (const r of await storageRequests(w.metricsPort)) if (!SETUP_OPS.has(r.op)) requests += r.value;
		return { job, n, requestsPerMsg: requests / n };
	} finally {
		if (w) await w.stop();
		await az.stop();
	}
}

const PER_JOB = [["move", "archive-employee"], ["index", "employee-by-email"], ["index-list", "employees-by-last-name"]];

async function measurePerJob() {
	const runs = {};
	for (const [type, job] of PER_JOB) {
		runs[type] = [];
		for (let r = 1; r <= RUNS; r++) {
			progress(`per job, ${type} run ${r}/${RUNS}: ${SIZE.perJob} messages, one worker at c64`);
			const res = await perJobRun(job, SIZE.perJob, `perjob-${type}-run${r}`);
			progress(`  ${fmt(res.requestsPerMsg, 2)} requests/msg`);
			runs[type].push(res);
		}
	}
	return runs;
}

// ---- latency under a steady load ------------------------------------------------------------

const STEADY_RATES = (process.env.BENCH_STEADY_RATES || "20,100,200").split(",").map((x) => Number.parseInt(x, 10));
const STEADY_S = envInt("BENCH_STEADY_S", QUICK ? 5 : 20, 1);
const STEADY_PARTITIONS = 50;
// The load's first seconds are its start, not its steady state: a worker at
// rest sees the first message only at its next poll (ecworker's grows
// towards poll_interval.max while idle; the SDK worker's stays at 50 ms), and
// what arrived meanwhile comes as a burst, which drains at what the worker
// and Azurite take beyond the load itself. Both workers' messages sent in
// those seconds are reported apart, as "start of load", and the
// BENCH_STEADY_S steady seconds come after them. 5 s: at 200 msgs/s the
// burst after ecworker's first poll (a rest of 0.5-1.6 s) took until 4 s
// into the load to drain (per-second p50 436, 252, then 11 ms, with Azurite
// at 98%), so 2 s counted part of the start as steady.
const STEADY_WARMUP_S = envInt("BENCH_STEADY_WARMUP_S", 5, 0);

function percentile(sorted, p) {
	return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

// Each message's ms from its send to its archive copy's Timestamp, with
// when it was sent (ms after t0), by the copies' keys; fails when a copy is
// missing.
async function archiveLatencies(cs, sentAt, t0) {
	const archived = await listAll(tableClient(cs, "EmployeesArchive"));
	if (archived.length !== sentAt.size) throw new Error(`the archive holds ${archived.length} employees, not ${sentAt.size}`);
	return archived.map((e) => {
		const sent = sentAt.get(`${e.partitionKey}\u0000${e.rowKey}`);
		if (sent === undefined) throw new Error(`archived ${e.partitionKey}/${e.rowKey} was not sent`);
		return { ms: Date.parse(e.timestamp) - sent, sentAfter: sent - t0, pk: e.partitionKey, rk: e.rowKey };
	});
}

// p50/p90/p99/max of some latencies.
function latencyStats(ms) {
	if (ms.length === 0) return { p50: NaN, p90: NaN, p99: NaN, max: NaN };
	ms.sort((a, b) => a - b);
	return { p50: percentile(ms, 50), p90: percentile(ms, 90), p99: percentile(ms, 99), max: ms[ms.length - 1] };
}

// One steady-load run on a fresh Azurite: `rate` archive messages a second
// for STEADY_WARMUP_S + STEADY_S seconds, over 50 partitions, each sent on its own schedule
// (message i at i / rate s, not waiting for the sends before it), to a worker
// at concurrency 16.
async function steadyRun({ kind, rate, tag }) {
	const az = await startAzuriteSplit();
	const azCpuUs = () => az.pids.reduce((sum, pid) => sum + cpuUs(pid), 0);
	let w = null;
	try {
		const n = rate * (STEADY_WARMUP_S + STEADY_S);
		const seeded = Array.from({ length: n }, (_, i) => ({ ...employee(i), partitionKey: `dept-${String(i % STEADY_PARTITIONS).padStart(2, "0")}` }));
		const emp = tableClient(az.cs, "Employees");
		await emp.createTable();
		await tableClient(az.cs, "EmployeesArchive").createTable();
		await insertAll(emp, seeded);
		const q = new QueueClient(az.cs, QUEUE);
		await q.createIfNotExists();
		w = kind === "ecworker" ? startEcworker(az.cs, 16, "10s", tag, "bench-defaults.yaml") : startSdkWorker(az.cs, 16, tag, 50);
		await w.ready();
		await sleep(1000); // at rest, as a worker is when load begins
		const sentAt = new Map();
		const sends = [];
		const t0 = Date.now();
		const [w0, az0] = [cpuTimes(w.pid), azCpuUs()];
		for (let i = 0; i < n; i++) {
			const wait = t0 + (i * 1000) / rate - Date.now();
			if (wait > 0) await sleep(wait);
			const e = seeded[i];
			sentAt.set(`${e.partitionKey}\u0000${e.rowKey}`, Date.now());
			sends.push(q.sendMessage(archiveMessage(e)));
		}
		await Promise.all(sends);
		const sentAll = Date.now();
		const sendSeconds = (sentAll - t0) / 1000;
		await w.done(n);
		const w1 = cpuTimes(w.pid);
		const az1 = azCpuUs();
		// Still draining a second after the last send: the load was more
		// than the worker and Azurite together could take.
		const drainMs = Date.now() - sentAll;
		await w.stop();
		if (w.failed) throw new Error(`${w.failed} message outcomes other than success (see ${w.log.path})`);
		const lat = await archiveLatencies(az.cs, sentAt, t0);
		// Each message's figures beside the worker's log (its lines say
		// when each message's run began and how long it waited for it).
		fs.writeFileSync(path.join(WORKDIR, `${tag}-latencies.json`), JSON.stringify(lat));
		const steady = latencyStats(lat.filter((x) => x.sentAfter >= STEADY_WARMUP_S * 1000).map((x) => x.ms));
		const start = latencyStats(lat.filter((x) => x.sentAfter < STEADY_WARMUP_S * 1000).map((x) => x.ms));
		return {
			kind, rate, n, offeredPerS: n / sendSeconds, ...steady, startP50: start.p50, startP99: start.p99, startMax: start.max,
			cpuUsPerMsg: (w1.cpu - w0.cpu) / n, drainMs, saturated: drainMs > 1000,
			azuriteCpuPct: ((az1 - az0) / 1e6 / ((Date.now() - t0) / 1000)) * 100,
		};
	} finally {
		if (w) await w.stop();
		await az.stop();
	}
}

async function measureSteady() {
	const runs = { ecworker: {}, sdk: {} };
	for (let r = 1; r <= RUNS; r++) {
		for (const rate of STEADY_RATES) {
			const order = (r + rate / 20) % 2 ? ["ecworker", "sdk"] : ["sdk", "ecworker"];
			for (const kind of order) {
				progress(`latency run ${r}/${RUNS}: ${kind} at concurrency 16, ${rate} msgs/s for ${STEADY_WARMUP_S} + ${STEADY_S} s over ${STEADY_PARTITIONS} partitions`);
				const res = await steadyRun({ kind, rate, tag: `latency-${kind}-${rate}-run${r}` });
				progress(`  p50 ${res.p50} ms, p90 ${res.p90}, p99 ${res.p99}, max ${res.max}; the first ${STEADY_WARMUP_S} s: p50 ${res.startP50}, p99 ${res.startP99}, max ${res.startMax} (offered ${fmt(res.offeredPerS, 1)} msgs/s; ` +
					`the last done ${res.drainMs} ms after the last send${res.saturated ? ": saturated" : ""}; Azurite ${fmt(res.azuriteCpuPct, 0)}% CPU)`);
				(runs[kind][rate] ||= []).push(res);
			}
		}
	}
	return runs;
}

function summarizeSteady(runs, t) {
	const S = { ecworker: {}, sdk: {} };
	for (const rate of STEADY_RATES) {
		for (const kind of ["ecworker", "sdk"]) {
			const rs = runs[kind][rate] || [];
			S[kind][rate] = {};
			for (const k of ["p50", "p90", "p99", "max", "startP50", "startP99", "startMax", "cpuUsPerMsg", "offeredPerS", "azuriteCpuPct"]) S[kind][rate][k] = stat(rs.map((x) => x[k]));
			S[kind][rate].saturatedRuns = rs.filter((x) => x.saturated).length;
		}
		const [e, k] = [S.ecworker[rate], S.sdk[rate]];
		const lat = (x) => `${fmtStat(x.p50, 0)} / ${fmtStat(x.p90, 0)} / ${fmtStat(x.p99, 0)} / ${fmtStat(x.max, 0)}`;
		t.add(`steady ${rate} msgs/s, c16, after the first ${STEADY_WARMUP_S} s: latency ms p50 / p90 / p99 / max`, lat(e), lat(k));
		const start = (x) => `${fmtStat(x.startP50, 0)} / ${fmtStat(x.startP99, 0)} / ${fmtStat(x.startMax, 0)}`;
		t.add(`steady ${rate} msgs/s, start of load (sent in the first ${STEADY_WARMUP_S} s): p50 / p99 / max`, start(e), start(k));
		t.add(`steady ${rate} msgs/s: p50 ms`, fmtStat(e.p50, 0), fmtStat(k.p50, 0), fmt(e.p50.median / k.p50.median, 2), "<= SDK",
			e.p50.median <= k.p50.median);
		if (rate < 200)
			t.add(`steady ${rate} msgs/s: p99 ms`, fmtStat(e.p99, 0), fmtStat(k.p99, 0), fmt(e.p99.median / k.p99.median, 2), "<= SDK",
				e.p99.median <= k.p99.median);
		else if (e.saturatedRuns)
			t.add(`steady ${rate} msgs/s: p99 ms (saturated in ${e.saturatedRuns} of ${e.p99.runs.length} run(s))`, fmtStat(e.p99, 0),
				fmtStat(k.p99, 0), "", "<= 200 unless saturated", null);
		else t.add(`steady ${rate} msgs/s: p99 ms`, fmtStat(e.p99, 0), fmtStat(k.p99, 0), "", "<= 200", e.p99.median <= 200);
		t.add(`steady ${rate} msgs/s: Azurite CPU %`, fmtStat(e.azuriteCpuPct, 0), fmtStat(k.azuriteCpuPct, 0));
		t.add(`steady ${rate} msgs/s: CPU µs/msg`, fmtStat(e.cpuUsPerMsg, 0), fmtStat(k.cpuUsPerMsg, 0),
			fmt(e.cpuUsPerMsg.median / k.cpuUsPerMsg.median, 3));
	}
	return S;
}

// ---- idle ------------------------------------------------------------------------------------

const IDLE_FIRST_S = envInt("BENCH_IDLE_FIRST_S", QUICK ? 60 : 600, 30);

async function idleRun() {
	const az = await startAzurite();
	const first = { ...employee(0), partitionKey: "idle" };
	await tableClient(az.cs, "Employees").createTable();
	await tableClient(az.cs, "EmployeesArchive").createTable();
	await tableClient(az.cs, "Employees").createEntity(first);
	const w = startEcworker(az.cs, 16, IDLE_POLL_MAX, "idle");
	try {
		await w.ready();
		const readyAt = Date.now();
		// The pause doubles from 100 ms to the 10 s cap: at most 12.7 s of
		// pauses before it, and one more at the cap to be sure.
		await sleep(25000);
		const windows = [];
		let before = await w.requests();
		for (let i = 0; i < SIZE.windows; i++) {
			await sleep(SIZE.windowS * 1000);
			const after = await w.requests();
			windows.push(((after - before) * 60) / SIZE.windowS);
			before = after;
		}
		// The first message after IDLE_FIRST_S at rest.
		const left = readyAt + IDLE_FIRST_S * 1000 - Date.now();
		if (left > 0) await sleep(left);
		const sentAt = new Map([[`${first.partitionKey}\u0000${first.rowKey}`, Date.now()]]);
		await enqueue(az.cs, [archiveMessage(first)]);
		await w.done(1);
		const [firstMs] = await archiveLatencies(az.cs, sentAt);
		return { pollMax: IDLE_POLL_MAX, windowSeconds: SIZE.windowS, requestsPerMinute: windows, firstAfterS: IDLE_FIRST_S, firstMs };
	} finally {
		await w.stop();
		await az.stop();
	}
}

// ---- statistics and the table ------------------------------------------------------------------

function median(xs) {
	const s = [...xs].sort((a, b) => a - b);
	const m = s.length >> 1;
	return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function stat(xs) {
	return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), runs: xs };
}

function fmt(x, digits) {
	if (!Number.isFinite(x)) return "-";
	return x.toFixed(digits);
}

function fmtStat(s, digits) {
	if (!s) return "-";
	return s.runs.length > 1 ? `${fmt(s.median, digits)} [${fmt(s.min, digits)}-${fmt(s.max, digits)}]` : fmt(s.median, digits);
}

function machine() {
	const cpus = os.cpus();
	let azuriteVersion = "?";
	try {
		azuriteVersion = JSON.parse(fs.readFileSync(path.join(TESTS, "node_modules", "azurite", "package.json"), "utf8")).version;
	} catch {
		// reported as ?
	}
	return {
		cpu: cpus.length ? cpus[0].model.trim() : "?", cores: cpus.length, memoryGiB: Math.round(os.totalmem() / 2 ** 30),
		kernel: os.release(), node: process.version, azurite: azuriteVersion, loadavg: os.loadavg().map((x) => x.toFixed(2)),
	};
}

function printTable(rows) {
	const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] === undefined ? 0 : String(r[i]).length))));
	const line = (r) => r.map((c, i) => String(c ?? "").padEnd(widths[i])).join("  ").trimEnd();
	console.log(line(rows[0]));
	console.log(widths.map((w) => "-".repeat(w)).join("  "));
	for (const r of rows.slice(1)) console.log(r === null ? "" : line(r));
}

// ---- the parts, run and summed up, and main ------------------------------------------------------

function progress(s) {
	process.stderr.write(`bench: ${s}\n`);
}

async function measureArchive() {
	const archive = { ecworker: {}, sdk: {}, absent: [] };
	for (let r = 1; r <= RUNS; r++) {
		for (const c of CONCURRENCY) {
			// Alternate which worker goes first, so a drift in the machine's
			// load does not always favour one.
			const order = (r + c) % 2 ? ["ecworker", "sdk"] : ["sdk", "ecworker"];
			for (const kind of order) {
				const n = SIZE[`c${c}`];
				progress(`archive run ${r}/${RUNS}: ${kind} at concurrency ${c}, ${n} messages`);
				const res = await archiveRun({ kind, concurrency: c, n, tag: `archive-${kind}-c${c}-run${r}` });
				progress(`  ${fmt(res.msgsPerS, 1)} msgs/s, ${fmt(res.cpuUsPerMsg, 0)} µs CPU/msg (system ${fmt(res.sysUsPerMsg, 0)}), ${fmt(res.peakRssMb, 1)} MB, Azurite ${fmt(res.azuriteCpuPct, 0)}%`);
				(archive[kind][c] ||= []).push(res);
			}
		}
		progress(`archive run ${r}/${RUNS}: ecworker at concurrency 64, ${SIZE.absent} messages for absent employees`);
		const res = await archiveRun({ kind: "ecworker", concurrency: 64, n: SIZE.absent, present: false, tag: `absent-run${r}` });
		progress(`  ${fmt(res.msgsPerS, 1)} msgs/s, Azurite ${fmt(res.azuriteCpuPct, 0)}%`);
		archive.absent.push(res);
		progress(`archive run ${r}/${RUNS}: the CPU floor of a round trip (rtfloor, ${SIZE.floor} requests)`);
		const fl = await floorRun(SIZE.floor);
		progress(`  ${fmt(fl.cpuUsPerRequest, 1)} µs CPU per round trip (user ${fmt(fl.userUs, 1)}, sys ${fmt(fl.sysUs, 1)})`);
		(archive.floor ||= []).push(fl);
	}
	return archive;
}

async function measureFanout() {
	const fanouts = [];
	for (let r = 1; r <= RUNS; r++) {
		progress(`fan-out run ${r}/${RUNS}: ${SIZE.customers * SIZE.orders} orders over ${SIZE.customers} customers, then again`);
		const f = await fanoutRun(`fanout-run${r}`);
		progress(`  ${f.first.writes} writes in ${fmt(f.first.seconds, 2)} s; again: ${f.again.writes} writes in ${fmt(f.again.seconds, 2)} s`);
		fanouts.push(f);
	}
	return fanouts;
}

async function measureDelay() {
	const latency = { proxy1: [], proxy64: [], direct64: [] };
	const plan = [["proxy1", 1, true, SIZE.lat1], ["proxy64", 64, true, SIZE.lat64], ["direct64", 64, false, SIZE.lat64]];
	for (let r = 1; r <= RUNS; r++) {
		for (const [key, c, proxy, n] of plan) {
			progress(`delay run ${r}/${RUNS}: ecworker at concurrency ${c}, ${proxy ? `through faultproxy (+${LATENCY_MS} ms each way)` : "direct"}, ${n} messages`);
			const res = await archiveRun({ kind: "ecworker", concurrency: c, n, proxy, tag: `delay-${key}-run${r}` });
			progress(`  ${fmt(res.msgsPerS, 1)} msgs/s`);
			latency[key].push(res);
		}
	}
	return latency;
}

// The rows of the one table, and whether each target was met.
class Table {
	constructor() {
		this.rows = [["figure", "ecworker", "SDK worker", "ecworker/SDK", "target", "ok"]];
		this.missed = 0;
	}

	add(figure, ecworker, sdk = "", ratio = "", target = "", ok = null) {
		if (ok === false) this.missed++;
		this.rows.push([figure, ecworker, sdk, ratio, target, ok === null ? "" : ok ? "yes" : "NO"]);
	}
}

const FIGURES = ["msgsPerS", "cpuUsPerMsg", "sysUsPerMsg", "peakRssMb", "requestsPerMsg", "azuriteCpuPct"];

function statsOf(runs) {
	return Object.fromEntries(FIGURES.map((k) => [k, stat(runs.map((x) => x[k]))]));
}

function summarizeArchive(archive, t) {
	const summary = {};
	for (const c of CONCURRENCY) {
		const [e, s] = [archive.ecworker[c], archive.sdk[c]];
		const [E, S] = [statsOf(e), statsOf(s)];
		// Ratios per pair of runs with the same number: measured side by side.
		const rate = stat(e.map((x, i) => x.msgsPerS / s[i].msgsPerS));
		const cpu = stat(e.map((x, i) => x.cpuUsPerMsg / s[i].cpuUsPerMsg));
		summary[c] = { ecworker: E, sdk: S, msgsPerSRatio: rate, cpuPerMsgRatio: cpu };
		t.add(`archive c${c} (${SIZE[`c${c}`]} msgs): msgs/s`, fmtStat(E.msgsPerS, 1), fmtStat(S.msgsPerS, 1), fmtStat(rate, 2),
			">= 1 x SDK", rate.median >= 1);
		t.add(`archive c${c}: CPU µs/msg`, fmtStat(E.cpuUsPerMsg, 0), fmtStat(S.cpuUsPerMsg, 0), fmtStat(cpu, 3),
			"<= 100; <= 0.05 x SDK", E.cpuUsPerMsg.median <= 100 && cpu.median <= 0.05);
		t.add(`archive c${c}: of which system (kernel)`, fmtStat(E.sysUsPerMsg, 0), fmtStat(S.sysUsPerMsg, 0));
		if (c === 64) t.add(`archive c${c}: peak RSS MB`, fmtStat(E.peakRssMb, 1), fmtStat(S.peakRssMb, 1), "", "<= 20", E.peakRssMb.median <= 20);
		else t.add(`archive c${c}: peak RSS MB`, fmtStat(E.peakRssMb, 1), fmtStat(S.peakRssMb, 1));
		if (c === 64) t.add(`archive c${c}: storage requests/msg`, fmtStat(E.requestsPerMsg, 2), fmtStat(S.requestsPerMsg, 2), "", "<= 1.5 (issue 22)",
			E.requestsPerMsg.median <= 1.5);
		else t.add(`archive c${c}: storage requests/msg`, fmtStat(E.requestsPerMsg, 2), fmtStat(S.requestsPerMsg, 2));
		t.add(`archive c${c}: Azurite CPU % of a core`, fmtStat(E.azuriteCpuPct, 0), fmtStat(S.azuriteCpuPct, 0));
	}
	const A = statsOf(archive.absent);
	summary.absent = A;
	t.add(`absent employees c64 (${SIZE.absent} msgs): msgs/s`, fmtStat(A.msgsPerS, 1));
	t.add("absent employees c64: requests/msg", fmtStat(A.requestsPerMsg, 2));
	t.add("absent employees c64: Azurite CPU %", fmtStat(A.azuriteCpuPct, 0));
	// The floor in the same runs: CPU of a bare round trip, times the
	// requests ecworker needed per message at c64.
	const F = stat(archive.floor.map((f) => f.cpuUsPerRequest));
	const floorMsg = stat(archive.floor.map((f, i) => f.cpuUsPerRequest * archive.ecworker[64][i].requestsPerMsg));
	summary.floor = { cpuUsPerRequest: F, cpuUsPerMsgC64: floorMsg };
	t.add("floor: CPU µs per bare round trip (rtfloor)", fmtStat(F, 1));
	t.add("floor x requests/msg at c64: CPU µs/msg", fmtStat(floorMsg, 0), "", "", "(no worker goes below)");
	return summary;
}

function summarizeFanout(fanouts, t) {
	const f0 = fanouts[0];
	const limit = 1.1 * f0.groups;
	const summary = { targets: f0.targets, partitions: f0.partitions, groups: f0.groups,
		writes: stat(fanouts.map((f) => f.first.writes)), seconds: stat(fanouts.map((f) => f.first.seconds)),
		againWrites: stat(fanouts.map((f) => f.again.writes)), againSeconds: stat(fanouts.map((f) => f.again.seconds)) };
	t.add(`fan-out ${f0.targets} targets / ${f0.partitions} partitions: writes`, fmtStat(summary.writes, 0), "", "",
		`<= ${fmt(limit, 0)} (1.1 x ${f0.groups} groups)`, summary.writes.max <= limit);
	t.add("fan-out: seconds", fmtStat(summary.seconds, 2));
	t.add("fan-out again, unchanged: writes", fmtStat(summary.againWrites, 0), "", "", "0", summary.againWrites.max === 0);
	t.add("fan-out again: seconds", fmtStat(summary.againSeconds, 2));
	return summary;
}

function summarizeAudit(runs, t) {
	const n = runs[0].sources;
	const A = {
		seconds: stat(runs.map((a) => a.found.seconds)), requestsPerSource: stat(runs.map((a) => a.found.requests / a.sources)),
		peakRssMb: stat(runs.map((a) => a.found.peakRssMb)), repairSeconds: stat(runs.map((a) => a.repair.seconds)),
		sourcesPerS: stat(runs.map((a) => a.sources / a.found.seconds)),
		repairRequestsPerFinding: stat(runs.map((a) => (a.repair.requests - a.found.requests) / a.drift)),
		buildSeconds: stat(runs.map((a) => a.build.seconds)),
	};
	t.add(`audit, index of ${n} sources (1% drift): seconds`, fmtStat(A.seconds, 1));
	t.add("audit: sources/s", fmtStat(A.sourcesPerS, 0));
	t.add("audit: storage requests/source", fmtStat(A.requestsPerSource, 2), "", "", "<= 3.1", A.requestsPerSource.max <= 3.1);
	t.add("audit: peak RSS MB", fmtStat(A.peakRssMb, 1), "", "", "<= 20", A.peakRssMb.max <= 20);
	t.add("audit --repair: seconds", fmtStat(A.repairSeconds, 1));
	t.add("audit --repair: storage requests per repair", fmtStat(A.repairRequestsPerFinding, 1));
	t.add(`index built by --repair (${n} runs, one client): seconds`, fmtStat(A.buildSeconds, 1));
	return { sources: n, ...A };
}

function summarizeHotlist(runs, t) {
	const n = runs.hot[0].n;
	const S = {};
	for (const k of ["hot", "distinct", "big"])
		if (runs[k].length)
			S[k] = Object.fromEntries(["msgsPerS", "precondition412PerMsg", "requestsPerMsg", "poisoned"].map((f) => [f, stat(runs[k].map((x) => x[f]))]));
	const ratio = stat(runs.hot.map((x, i) => x.msgsPerS / runs.distinct[i].msgsPerS));
	t.add(`index-list, ${n} keys of one value, 2 x c16: msgs/s`, fmtStat(S.hot.msgsPerS, 1));
	t.add(`index-list, ${n} distinct values, 2 x c16: msgs/s`, fmtStat(S.distinct.msgsPerS, 1));
	t.add("index-list one value / distinct: msgs/s", fmtStat(ratio, 2), "", "", ">= 0.7 (issue 22)", ratio.median >= 0.7);
	t.add("index-list one value: 412 answers/msg", fmtStat(S.hot.precondition412PerMsg, 2));
	t.add("index-list distinct: 412 answers/msg", fmtStat(S.distinct.precondition412PerMsg, 2));
	t.add("index-list one value: requests/msg", fmtStat(S.hot.requestsPerMsg, 2));
	t.add("index-list distinct: requests/msg", fmtStat(S.distinct.requestsPerMsg, 2));
	t.add("index-list one value: messages poisoned", fmtStat(S.hot.poisoned, 0), "", "", "0 (issue 22)", S.hot.poisoned.max === 0);
	if (S.big) {
		const b = runs.big[0].n;
		t.add(`index-list, ${b} keys of one value, 2 x c16: msgs/s`, fmtStat(S.big.msgsPerS, 1));
		t.add(`index-list, ${b} keys of one value: 412 answers/msg`, fmtStat(S.big.precondition412PerMsg, 2));
		t.add(`index-list, ${b} keys of one value: requests/msg`, fmtStat(S.big.requestsPerMsg, 2));
		t.add(`index-list, ${b} keys of one value: messages poisoned`, fmtStat(S.big.poisoned, 0), "", "", "0 (issue 22)",
			S.big.poisoned.max === 0);
	}
	return { keys: n, ...S, hotOverDistinct: ratio };
}

function summarizePerJob(runs, t) {
	const S = {};
	for (const [type] of PER_JOB) {
		if (!runs[type]) continue;
		S[type] = stat(runs[type].map((x) => x.requestsPerMsg));
		t.add(`${type}, ${runs[type][0].n} msgs, c64: storage requests/msg`, fmtStat(S[type], 2));
	}
	return S;
}

function summarizeIdle(idle, t) {
	const summary = { requestsPerMinute: stat(idle.requestsPerMinute) };
	t.add(`idle, poll max ${IDLE_POLL_MAX}: requests/min (${idle.requestsPerMinute.length} x ${idle.windowSeconds} s)`,
		fmtStat(summary.requestsPerMinute, 1), "", "", "<= 6", summary.requestsPerMinute.max <= 6);
	const maxMs = parseInt(IDLE_POLL_MAX, 10) * 1000;
	summary.firstMs = idle.firstMs;
	t.add(`idle ${idle.firstAfterS} s, then one message: ms to its archive copy`, fmt(idle.firstMs, 0), "", "",
		`<= ${maxMs + 1000} (poll max + 1 s)`, idle.firstMs <= maxMs + 1000);
	return summary;
}

function summarizeDelay(latency, t) {
	const L = {};
	for (const k of Object.keys(latency)) L[k] = statsOf(latency[k]);
	L.proxyCpuPct = stat(latency.proxy64.map((x) => x.proxyCpuPct));
	const ratio = stat(latency.proxy64.map((x, i) => x.msgsPerS / latency.direct64[i].msgsPerS));
	t.add(`+${LATENCY_MS} ms each way, c1 (${SIZE.lat1} msgs): msgs/s`, fmtStat(L.proxy1.msgsPerS, 1));
	t.add(`+${LATENCY_MS} ms each way, c64 (${SIZE.lat64} msgs): msgs/s`, fmtStat(L.proxy64.msgsPerS, 1));
	// Azurite's CPU per message shows whether it was the ceiling either way;
	// the proxy shares the machine's two cores with it and the worker.
	const azMs = (runs) => stat(runs.map((x) => (x.azuriteCpuPct * 10) / x.msgsPerS));
	L.proxy64.azuriteCpuMsPerMsg = azMs(latency.proxy64);
	L.direct64.azuriteCpuMsPerMsg = azMs(latency.direct64);
	t.add("+latency c64: Azurite CPU %, ms/msg", `${fmtStat(L.proxy64.azuriteCpuPct, 0)}, ${fmtStat(L.proxy64.azuriteCpuMsPerMsg, 1)}`);
	t.add("+latency c64: faultproxy CPU %", fmtStat(L.proxyCpuPct, 0));
	t.add(`direct, c64 (${SIZE.lat64} msgs): msgs/s`, fmtStat(L.direct64.msgsPerS, 1));
	t.add("direct c64: Azurite CPU %, ms/msg", `${fmtStat(L.direct64.azuriteCpuPct, 0)}, ${fmtStat(L.direct64.azuriteCpuMsPerMsg, 1)}`);
	t.add("latency c64 / direct c64", fmtStat(ratio, 2), "", "", ">= 0.8", ratio.median >= 0.8);
	return { ...L, latency64OverDirect64: ratio, latencyMs: LATENCY_MS };
}

async function main() {
	for (const [what, file] of [["ecworker", ECWORKER], ["Azurite", AZURITE]])
		if (!fs.existsSync(file)) throw new Error(`${what} not found at ${file} (run make bench, which builds and installs it)`);
	if (PARTS.includes("delay") && !fs.existsSync(FAULTPROXY))
		throw new Error(`faultproxy not found at ${FAULTPROXY} (make bench builds tests/tools/faultproxy.c)`);
	fs.mkdirSync(WORKDIR, { recursive: true });
	const started = Date.now();
	const result = { date: new Date().toISOString(), machine: machine(), runs: RUNS, quick: QUICK, sizes: SIZE, raw: {}, summary: {} };
	progress(`${RUNS} counted run(s) per figure${QUICK ? " (quick mode)" : ""}; a fresh in-memory Azurite for every measured run; logs in ${WORKDIR}`);

	const idle = PARTS.includes("idle") ? idleRun() : null;
	if (idle) progress(`idle: ${SIZE.windows} window(s) of ${SIZE.windowS} s at poll max ${IDLE_POLL_MAX}, alongside the runs below`);
	if (PARTS.includes("archive")) result.raw.archive = await measureArchive();
	if (PARTS.includes("fanout")) result.raw.fanout = await measureFanout();
	if (PARTS.includes("latency")) result.raw.latency = await measureSteady();
	if (PARTS.includes("delay")) result.raw.delay = await measureDelay();
	if (PARTS.includes("audit")) result.raw.audit = await measureAudit();
	if (PARTS.includes("hotlist")) result.raw.hotlist = await measureHotlist();
	if (PARTS.includes("perjob")) result.raw.perjob = await measurePerJob();
	if (PARTS.includes("blobs")) result.raw.blobs = await measureBlobs();
	if (PARTS.includes("export")) result.raw.export = await measureExport();
	if (idle) {
		progress("idle: waiting for its windows to end");
		result.raw.idle = await idle;
	}

	const t = new Table();
	const { raw, summary } = result;
	if (raw.archive) summary.archive = summarizeArchive(raw.archive, t);
	if (raw.fanout) summary.fanout = summarizeFanout(raw.fanout, t);
	if (raw.idle) summary.idle = summarizeIdle(raw.idle, t);
	if (raw.latency) summary.latency = summarizeSteady(raw.latency, t);
	if (raw.delay) summary.delay = summarizeDelay(raw.delay, t);
	if (raw.audit) summary.audit = summarizeAudit(raw.audit, t);
	if (raw.hotlist) summary.hotlist = summarizeHotlist(raw.hotlist, t);
	if (raw.perjob) summary.perjob = summarizePerJob(raw.perjob, t);
	if (raw.blobs) summary.blobs = summarizeBlobs(raw.blobs, t);
	if (raw.export) summary.export = summarizeExport(raw.export, t);
	result.seconds = (Date.now() - started) / 1000;
	result.loadavgEnd = os.loadavg().map((x) => x.toFixed(2));
	fs.mkdirSync(path.dirname(opts.out), { recursive: true });
	fs.writeFileSync(opts.out, JSON.stringify(result, null, 2) + "\n");

	const m = result.machine;
	console.log(`ecworker bench, ${result.date}: ${m.cores} x ${m.cpu}, ${m.memoryGiB} GiB, Linux ${m.kernel}, Node ${m.node}, Azurite ${m.azurite}`);
	console.log(`load average ${m.loadavg.join(" ")} at the start, ${result.loadavgEnd.join(" ")} at the end (other work on the machine makes the figures noisy)`);
	console.log(`median [min-max] of ${RUNS} counted run(s)${QUICK ? " (quick mode)" : ""}; a fresh in-memory Azurite for every measured run; ` +
		"CPU and RSS of the worker process alone; idle measured alongside the other runs");
	console.log("");
	printTable(t.rows);
	console.log("");
	console.log(`${t.missed ? `${t.missed} target(s) missed` : "every target met"}; ` +
		`${Math.round(result.seconds)} s; JSON in ${path.relative(process.cwd(), opts.out) || opts.out}`);
	// The one hard failure besides a run that did not do its work: a fan-out
	// re-run that writes.
	if (summary.fanout && summary.fanout.againWrites.max !== 0) {
		console.error(`bench: FAILED: the fan-out re-run over unchanged data wrote ${summary.fanout.againWrites.max} times (must be 0)`);
		return 1;
	}
	return 0;
}

main().then(
	(rc) => process.exit(rc),
	(e) => {
		console.error(`bench: FAILED: ${e.message}`);
		killAll();
		process.exit(1);
	},
);
