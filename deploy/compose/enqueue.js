// SPDX-License-Identifier: MIT
// enqueue.js - the application's side of a change in deploy/compose.yaml: one
// message per changed entity, put on the worker's queue with the official SDK.
"use strict";
const { QueueClient } = require("@azure/storage-queue");
const queue = new QueueClient(process.env.AZURE_STORAGE_CONNECTION_STRING, "ecw-demo");
const messages = [
	["employee-by-email", "Sales", "jones 002"],      // Sam Jones became Sam Smith
	["employees-by-lastname", "Sales", "jones 002"],
	["customer-to-orders", "customers", "c1"],        // Contoso renamed itself
	["archive-employee", "Ops", "zoë 004"],           // Zoë left (then: both indexes)
];
(async () => {
	for (const [job, pk, rk] of messages) {
		await queue.sendMessage(JSON.stringify({ job, pk, rk }));
		console.log(`enqueued ${job} ${pk}/${rk}`);
	}
})().catch((e) => { console.error("enqueue.js: " + e.message); process.exit(1); });
