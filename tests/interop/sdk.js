// sdk.js - the official Azure SDK for JavaScript, driven from the C interop
// tests (tests/integration/test_interop.c) to prove that what ecworker writes
// real applications read, and the other way round.
//   node sdk.js send QUEUE [--base64]          text on stdin; prints the message id
//   node sdk.js receive QUEUE                  prints the first message's text (and deletes it)
//   node sdk.js read-entity TABLE PK RK        prints {"Prop":{"type":"Int64","value":"..."},...}
//   node sdk.js write-entity TABLE PK RK       writes an entity of every EDM type
// The connection string comes from ECW_TEST_CONNECTION_STRING.
"use strict";
const { QueueClient } = require("@azure/storage-queue");
const { TableClient } = require("@azure/data-tables");

const cs = process.env.ECW_TEST_CONNECTION_STRING;
const [cmd, ...args] = process.argv.slice(2);

function stdin() {
	return new Promise((resolve) => {
		const chunks = [];
		process.stdin.on("data", (c) => chunks.push(c));
		process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
	});
}

async function main() {
	if (!cs) throw new Error("ECW_TEST_CONNECTION_STRING is not set");
	switch (cmd) {
	case "send": {
		const q = new QueueClient(cs, args[0]);
		await q.createIfNotExists();
		let text = await stdin();
		// Azure Functions' queue trigger expects base64 by default; the
		// SDK sends text as it is unless the application encodes it.
		if (args[1] === "--base64") text = Buffer.from(text, "utf8").toString("base64");
		const r = await q.sendMessage(text);
		process.stdout.write(r.messageId + "\n");
		break;
	}
	case "receive": {
		const q = new QueueClient(cs, args[0]);
		const r = await q.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 30 });
		if (r.receivedMessageItems.length !== 1) throw new Error("no message");
		const m = r.receivedMessageItems[0];
		await q.deleteMessage(m.messageId, m.popReceipt);
		process.stdout.write(m.messageText);
		break;
	}
	case "read-entity": {
		const t = TableClient.fromConnectionString(cs, args[0], { allowInsecureConnection: true });
		const e = await t.getEntity(args[1], args[2], { disableTypeConversion: true });
		const out = {};
		for (const [k, v] of Object.entries(e)) {
			if (k === "etag" || k === "timestamp" || k === "odata.metadata") continue;
			out[k] = typeof v === "object" && v !== null ? v : { type: typeof v, value: v };
		}
		process.stdout.write(JSON.stringify(out));
		break;
	}
	case "write-entity": {
		const t = TableClient.fromConnectionString(cs, args[0], { allowInsecureConnection: true });
		await t.createTable();
		await t.upsertEntity({
			partitionKey: args[1],
			rowKey: args[2],
			Str: "Zoë & <o'brien>",
			Int: 42,
			Big: { value: "9007199254740993", type: "Int64" },
			Dbl: { value: "50000", type: "Double" },
			Frac: 0.1,
			Flag: true,
			When: { value: "2026-08-19T10:00:00.1234567Z", type: "DateTime" },
			Id: { value: "c9da6455-213d-42c9-9a79-3e9149a57833", type: "Guid" },
			Bytes: new Uint8Array([0, 1, 2, 255, 0]),
		}, "Replace");
		break;
	}
	default:
		throw new Error("unknown command " + cmd);
	}
}

main().then(() => process.exit(0), (e) => {
	process.stderr.write("sdk.js: " + (e && e.message ? e.message : e) + "\n");
	process.exit(1);
});
