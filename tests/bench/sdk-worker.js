// SPDX-License-Identifier: MIT
// sdk-worker.js - the worker a team would otherwise write with the official
// Azure SDK for JavaScript, for `make bench` to run side by side with
// ecworker on the same workload. Written the way the SDK samples write it:
// receive a batch, and for each message do the job's steps, then delete the
// message. At most CONCURRENCY messages are in flight: a receive asks for
// min(32, free slots); an empty receive backs off (100 ms doubling to 1 s),
// or, with SDK_WORKER_IDLE_MS=N, waits N ms each time (the latency part:
// every 50 ms, 1,200 requests a minute at rest, as the worker that issue 35
// measured). SDK_WORKER_JOB picks the steps:
//
//   archive (the default)  read the employee, upsert it into TO (mode
//                          "Replace"), delete it from FROM (a 404 is fine:
//                          already moved)
//   archive-to-blob        read the employee as typed values, write it into
//                          the container TO as the Table service's JSON
//                          ("@odata.type" beside each value whose type JSON
//                          alone would lose, metadata naming the source),
//                          then delete it from FROM If-Match its ETag
//   blob-ref               read the employee (absent: it names nothing),
//                          list the blobs under "{PartitionKey}/{RowKey}/"
//                          in the container TO, and delete (If-Match) each
//                          that its Photo and Resume do not name and that
//                          is older than SDK_WORKER_GRACE_S (by the
//                          service's Last-Modified and Date)
//
//   node sdk-worker.js QUEUE FROM TO CONCURRENCY
//
// The connection string comes from AZURE_STORAGE_CONNECTION_STRING (never
// argv). Prints {"msg":"ready"} once its clients and tables exist, then one
// JSON line per message ({"msg":"done",...,"requests":N}: the storage
// requests this process has sent so far, counted by a pipeline policy in each
// SDK client). SIGTERM stops receiving, lets the messages in flight finish and
// exits.
"use strict";
const { QueueClient, newPipeline } = require("@azure/storage-queue");
const { TableClient } = require("@azure/data-tables");
const { BlobServiceClient, newPipeline: newBlobPipeline } = require("@azure/storage-blob");

const [queueName, fromName, toName, concArg] = process.argv.slice(2);
const concurrency = Number.parseInt(concArg, 10);
const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
if (!queueName || !fromName || !toName || !(concurrency >= 1) || !cs || !["archive", "archive-to-blob", "blob-ref"].includes(process.env.SDK_WORKER_JOB || "archive")) {
	console.error("usage: AZURE_STORAGE_CONNECTION_STRING=... node sdk-worker.js QUEUE FROM TO CONCURRENCY");
	process.exit(2);
}

// Every storage request either client sends, counted where the SDKs let an
// application add its own policy: the queue client's pipeline factories and
// the table client's additionalPolicies.
let requests = 0;
const countQueueRequests = {
	create: (next) => ({ sendRequest: (req) => { requests++; return next.sendRequest(req); } }),
};
const countTableRequests = { name: "countRequests", sendRequest: (req, next) => { requests++; return next(req); } };

const plain = new QueueClient(cs, queueName); // from the connection string: its URL and credential
const pipeline = newPipeline(plain.credential);
pipeline.factories.push(countQueueRequests);
const queue = new QueueClient(plain.url, pipeline);
const tableOptions = { allowInsecureConnection: true, additionalPolicies: [{ policy: countTableRequests, position: "perRetry" }] };
const JOB = process.env.SDK_WORKER_JOB || "archive";
const GRACE_MS = Number.parseFloat(process.env.SDK_WORKER_GRACE_S || "0") * 1000;
const from = TableClient.fromConnectionString(cs, fromName, tableOptions);
const to = JOB === "archive" ? TableClient.fromConnectionString(cs, toName, tableOptions) : null;
const container = JOB === "archive" ? null : (() => {
	const plainBlobs = BlobServiceClient.fromConnectionString(cs);
	const blobPipeline = newBlobPipeline(plainBlobs.credential);
	blobPipeline.factories.push(countQueueRequests);
	return new BlobServiceClient(plainBlobs.url, blobPipeline).getContainerClient(toName);
})();

const VISIBILITY_S = 60;
let inflight = 0;
let stopping = false;
let wake = null; // resolves the receive loop's wait for a free slot

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function archive(pk, rk) {
	try {
		const entity = await from.getEntity(pk, rk);
		await to.upsertEntity(entity, "Replace");
		try {
			await from.deleteEntity(pk, rk);
		} catch (e) {
			if (e.statusCode !== 404) throw e;
		}
	} catch (e) {
		if (e.statusCode !== 404) throw e;
		return "missing"; // already moved, or never there
	}
	return "moved";
}

// The Table service's JSON of an entity read with disableTypeConversion:
// each typed value ({value, type}) with its "@odata.type".
function tableJson(entity) {
	const out = { PartitionKey: entity.partitionKey, RowKey: entity.rowKey };
	for (const [k, v] of Object.entries(entity)) {
		if (k === "partitionKey" || k === "rowKey" || k === "etag" || k === "timestamp" || k.startsWith("odata.")) continue;
		if (v && typeof v === "object" && "type" in v) {
			out[`${k}@odata.type`] = `Edm.${v.type}`;
			out[k] = v.value;
		} else {
			out[k] = v;
		}
	}
	return JSON.stringify(out);
}

async function archiveToBlob(pk, rk) {
	let entity;
	try {
		entity = await from.getEntity(pk, rk, { disableTypeConversion: true });
	} catch (e) {
		if (e.statusCode !== 404) throw e;
		return "missing";
	}
	const body = tableJson(entity);
	await container.getBlockBlobClient(`${pk}/${rk}.json`).upload(body, Buffer.byteLength(body), {
		blobHTTPHeaders: { blobContentType: "application/json" },
		metadata: { ecw_source_table: fromName, ecw_source_etag: entity.etag },
	});
	try {
		await from.deleteEntity(pk, rk, { etag: entity.etag });
	} catch (e) {
		if (e.statusCode !== 404) throw e;
	}
	return "moved";
}

async function blobRef(pk, rk) {
	const named = new Set();
	try {
		const e = await from.getEntity(pk, rk);
		for (const p of ["Photo", "Resume"]) if (typeof e[p] === "string" && e[p]) named.add(e[p]);
	} catch (e) {
		if (e.statusCode !== 404) throw e;
	}
	let deleted = 0;
	for await (const page of container.listBlobsFlat({ prefix: `${pk}/${rk}/` }).byPage({ maxPageSize: 1000 })) {
		const now = Date.parse(page._response.headers.get("date"));
		for (const b of page.segment.blobItems) {
			if (named.has(b.name) || now - b.properties.lastModified.getTime() < GRACE_MS) continue;
			try {
				await container.deleteBlob(b.name, { conditions: { ifMatch: b.properties.etag }, deleteSnapshots: "include" });
				deleted++;
			} catch (e) {
				if (e.statusCode !== 404) throw e;
			}
		}
	}
	return `deleted ${deleted}`;
}

const STEPS = { archive, "archive-to-blob": archiveToBlob, "blob-ref": blobRef };

async function run(msg) {
	const t0 = Date.now();
	const { pk, rk } = JSON.parse(msg.messageText);
	const detail = await STEPS[JOB](pk, rk);
	await queue.deleteMessage(msg.messageId, msg.popReceipt);
	console.log(JSON.stringify({ msg: "done", pk, rk, detail, ms: Date.now() - t0, requests }));
}

function settle() {
	inflight--;
	if (wake) {
		wake();
		wake = null;
	}
}

async function main() {
	await queue.createIfNotExists();
	await from.createTable();
	if (to) await to.createTable();
	if (JOB === "archive-to-blob") await container.createIfNotExists();
	console.log(JSON.stringify({ msg: "ready", queue: queueName, concurrency, requests }));

	const fixedIdleMs = Number.parseInt(process.env.SDK_WORKER_IDLE_MS || "0", 10) || 0;
	let idleMs = fixedIdleMs || 100;
	while (!stopping) {
		if (inflight >= concurrency) {
			await new Promise((resolve) => { wake = resolve; });
			continue;
		}
		let items = [];
		try {
			const res = await queue.receiveMessages({
				numberOfMessages: Math.min(32, concurrency - inflight),
				visibilityTimeout: VISIBILITY_S,
			});
			items = res.receivedMessageItems;
		} catch (e) {
			console.error(JSON.stringify({ msg: "receive failed", error: e.message }));
		}
		if (items.length === 0) {
			await sleep(idleMs);
			if (!fixedIdleMs) idleMs = Math.min(idleMs * 2, 1000);
			continue;
		}
		idleMs = fixedIdleMs || 100;
		for (const m of items) {
			inflight++;
			// A failed message stays in the queue and comes back after the
			// visibility timeout.
			run(m)
				.catch((e) => console.error(JSON.stringify({ msg: "failed", id: m.messageId, error: e.message })))
				.finally(settle);
		}
	}
	while (inflight > 0) await new Promise((resolve) => { wake = resolve; });
	console.log(JSON.stringify({ msg: "stopped", requests }));
}

process.on("SIGTERM", () => {
	stopping = true;
	if (wake) wake();
});
main().then(
	() => process.exit(0),
	(e) => {
		console.error(JSON.stringify({ msg: "fatal", error: e.message }));
		process.exit(1);
	},
);
