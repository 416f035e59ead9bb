// SPDX-License-Identifier: MIT
// sdk-worker.js - the archive worker a team would otherwise write with the
// official Azure SDK for JavaScript, for `make bench` to run side by side with
// ecworker on the same workload. Written the way the SDK samples write it:
// receive a batch, and for each message read the employee, upsert it into the
// archive (mode "Replace"), delete it from the source (a 404 is fine: already
// moved) and only then delete the message. At most CONCURRENCY messages are
// in flight: a receive asks for min(32, free slots); an empty receive backs
// off (100 ms doubling to 1 s), or, with SDK_WORKER_IDLE_MS=N, waits N ms
// each time (the latency part: every 50 ms, 1,200 requests a minute at rest,
// as the worker that issue 35 measured).
//
//   node sdk-worker.js QUEUE FROM_TABLE TO_TABLE CONCURRENCY
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

const [queueName, fromName, toName, concArg] = process.argv.slice(2);
const concurrency = Number.parseInt(concArg, 10);
const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
if (!queueName || !fromName || !toName || !(concurrency >= 1) || !cs) {
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
const from = TableClient.fromConnectionString(cs, fromName, tableOptions);
const to = TableClient.fromConnectionString(cs, toName, tableOptions);

const VISIBILITY_S = 60;
let inflight = 0;
let stopping = false;
let wake = null; // resolves the receive loop's wait for a free slot

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function archive(msg) {
	const t0 = Date.now();
	const { pk, rk } = JSON.parse(msg.messageText);
	let detail = "moved";
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
		detail = "missing"; // already moved, or never there
	}
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
	await to.createTable();
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
			archive(m)
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
