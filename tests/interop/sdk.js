// SPDX-License-Identifier: MIT
// sdk.js - the official Azure SDK for JavaScript, driven from the C interop
// tests (tests/integration/test_interop.c) to prove that what ecworker writes
// real applications read, and the other way round.
//   node sdk.js send QUEUE [--base64]          text on stdin; prints the message id
//   node sdk.js receive QUEUE                  prints the first message's text (and deletes it)
//   node sdk.js read-entity TABLE PK RK        prints {"Prop":{"type":"Int64","value":"..."},...}
//   node sdk.js write-entity TABLE PK RK       writes an entity of every EDM type
//   node sdk.js upsert-employee TABLE PK RK [VERSION]
//                                              writes an employee as an HR application would
//   node sdk.js check-employee TABLE PK RK [VERSION]
//                                              reads it back; exits 1 naming the first difference
//   node sdk.js enqueue QUEUE JOB PK RK [ID] [--base64]
//                                              sends {"job","pk","rk","id"} (JSON.stringify); prints the id
//   node sdk.js read-list TABLE PK VALUE       prints the index list's keys as JSON, read as the
//                                              jobs/README.md's reader reads them (index-list-reader.js)
//   node sdk.js read-blob-entity CONTAINER NAME
//                                              downloads the blob with @azure/storage-blob, checks its
//                                              content type, and parses it with the Tables SDK's own
//                                              deserializer; prints it as read-entity does
//   node sdk.js read-blob-lines CONTAINER NAME  an export's JSON lines, each parsed as read-blob-entity
//                                              parses a blob, printed one per line
// The connection string comes from ECW_TEST_CONNECTION_STRING.
"use strict";
const { QueueClient } = require("@azure/storage-queue");
const { TableClient } = require("@azure/data-tables");
const { BlobServiceClient } = require("@azure/storage-blob");
const path = require("path");
const { readIndexList } = require("./index-list-reader.js");

const cs = process.env.ECW_TEST_CONNECTION_STRING;
const [cmd, ...args] = process.argv.slice(2);

function stdin() {
	return new Promise((resolve) => {
		const chunks = [];
		process.stdin.on("data", (c) => chunks.push(c));
		process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
	});
}

// An employee as an application writes it: plain JS values where the SDK
// infers the type (string, Int32, Double, Boolean, Date, bytes) and typed
// values where it cannot (Int64 beyond 2^53, a Double that is integral, 7
// fractional digits, a Guid). VERSION changes a few values.
function employee(pk, rk, version) {
	return {
		partitionKey: pk,
		rowKey: rk,
		Name: "Zoë O'Brien & <Sons> ✓ " + version,
		Version: version,
		HireYear: 2019,
		EmployeeNo: { value: "9007199254740993", type: "Int64" },
		Salary: { value: "50000", type: "Double" },
		Rating: 4.25 + version,
		Active: version % 2 === 1,
		Hired: { value: "2019-03-04T08:09:10.1234567Z", type: "DateTime" },
		Updated: new Date(Date.UTC(2026, 7, 19, 10, 0, version)),
		BadgeId: { value: "c9da6455-213d-42c9-9a79-3e9149a57833", type: "Guid" },
		Photo: new Uint8Array([0, 1, 2, 255, 0, version & 255]),
	};
}

// A check that an ISO 8601 text is the instant iso, however many
// fractional digits either has.
function sameInstant(iso) {
	const norm = (s) => String(s).replace(/(\.\d*?)0*Z$/, "$1Z").replace(/\.Z$/, "Z");
	const f = (v) => norm(v) === norm(iso);
	f.toJSON = () => iso;
	return f;
}

// raw: read with disableTypeConversion ({value, type} per property); app: read
// as an application reads it; want: what employee() wrote.
function checkEmployee(raw, app, want) {
	const types = {
		Name: ["String", want.Name],
		Version: ["Int32", String(want.Version)],
		HireYear: ["Int32", "2019"],
		EmployeeNo: ["Int64", "9007199254740993"],
		// The SDK parses the service's 50000.0 with JSON.parse and so reads
		// its own integral Double back as Int32 (test_interop.c notes it);
		// the C test checks the exact type through ecworker's client.
		Salary: ["Double|Int32", "50000"],
		Rating: ["Double", String(want.Rating)],
		Active: ["Boolean", String(want.Active)],
		Hired: ["DateTime", "2019-03-04T08:09:10.1234567Z"],
		// The SDK sends a Date with 3 digits; the service answers 7 (Azurite
		// keeps what it got), so compare the instant.
		Updated: ["DateTime", sameInstant(want.Updated.toISOString())],
		BadgeId: ["Guid", "c9da6455-213d-42c9-9a79-3e9149a57833"],
		Photo: ["Binary", Buffer.from(want.Photo).toString("base64")],
	};
	const fail = (what) => { throw new Error(raw.partitionKey + "/" + raw.rowKey + ": " + what); };
	if (raw.partitionKey !== want.partitionKey || raw.rowKey !== want.rowKey)
		fail("keys " + JSON.stringify([raw.partitionKey, raw.rowKey]));
	for (const [k, [type, value]] of Object.entries(types)) {
		const v = raw[k];
		if (!v || typeof v !== "object") fail(k + " missing: " + JSON.stringify(v));
		if (!type.split("|").includes(v.type)) fail(k + " has type " + v.type + ", expected " + type);
		if (typeof value === "function" ? !value(v.value) : v.value !== value) fail(k + " is " + JSON.stringify(v.value) + ", expected " + JSON.stringify(value));
	}
	for (const k of Object.keys(raw))
		if (!(k in types) && !["partitionKey", "rowKey", "etag", "timestamp", "odata.metadata"].includes(k))
			fail("unexpected property " + k);
	// What the application's own code sees.
	if (app.Name !== want.Name || app.Version !== want.Version || app.HireYear !== 2019 ||
	    app.Active !== want.Active || app.Rating !== want.Rating)
		fail("typed read differs: " + JSON.stringify(app, (k, v) => (typeof v === "bigint" ? String(v) : v)));
	if (!(app.Updated instanceof Date) && typeof app.Updated !== "string")
		fail("Updated reads as " + typeof app.Updated);
	if (!(app.Photo instanceof Uint8Array) || Buffer.compare(Buffer.from(app.Photo), Buffer.from(want.Photo)) !== 0)
		fail("Photo reads as " + JSON.stringify(app.Photo));
	// An Int64 reads as a BigInt, exactly (a Number would round it).
	if (app.EmployeeNo !== 9007199254740993n) fail("EmployeeNo reads as " + String(app.EmployeeNo));
	if (!(app.Hired instanceof Date) || app.Hired.toISOString() !== "2019-03-04T08:09:10.123Z")
		fail("Hired reads as " + String(app.Hired));
}

// The Tables SDK's own parser of an entity's JSON (what getEntity runs on the
// service's answer). Its package exports only the client API, so it is
// loaded by its file, beside the entry point.
function tablesDeserialize() {
	const dir = path.dirname(require.resolve("@azure/data-tables"));
	return require(path.join(dir, "serialization.js")).deserialize;
}

// A typed number keeps its JSON number as value where an inferred one is
// given as text (disableTypeConversion): text for both, as read-entity
// prints them.
function typedAsText(e) {
	for (const v of Object.values(e))
		if (typeof v === "object" && v !== null && typeof v.value === "number") v.value = String(v.value);
	return e;
}

// An entity read with disableTypeConversion, as one line of JSON with its
// properties in name order: {"Prop":{"type":"Int64","value":"..."},...}.
function printEntity(e) {
	const out = {};
	for (const k of Object.keys(e).sort()) {
		if (k === "etag" || k === "timestamp" || k === "odata.metadata") continue;
		const v = e[k];
		out[k] = typeof v === "object" && v !== null ? v : { type: typeof v, value: v };
	}
	process.stdout.write(JSON.stringify(out));
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
		printEntity(await t.getEntity(args[1], args[2], { disableTypeConversion: true }));
		break;
	}
	case "read-blob-lines": {
		const b = BlobServiceClient.fromConnectionString(cs).getContainerClient(args[0]).getBlobClient(args[1]);
		const text = (await b.downloadToBuffer()).toString("utf8");
		if (!text.endsWith("\n")) throw new Error("the blob does not end with a newline");
		for (const line of text.slice(0, -1).split("\n")) {
			printEntity(typedAsText(tablesDeserialize()(JSON.parse(line), true)));
			process.stdout.write("\n");
		}
		break;
	}
	case "read-blob-entity": {
		const b = BlobServiceClient.fromConnectionString(cs).getContainerClient(args[0]).getBlobClient(args[1]);
		const body = await b.downloadToBuffer();
		const props = await b.getProperties();
		if (props.contentType !== "application/json")
			throw new Error("the blob's content type is " + props.contentType);
		// JSON.parse as the SDK parses the service's answer; a blob that is
		// not one JSON object fails here.
		const json = JSON.parse(body.toString("utf8"));
		if (typeof json !== "object" || json === null || Array.isArray(json))
			throw new Error("the blob is no JSON object: " + body.toString("utf8").slice(0, 200));
		printEntity(typedAsText(tablesDeserialize()(json, true)));
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
	case "upsert-employee": {
		const t = TableClient.fromConnectionString(cs, args[0], { allowInsecureConnection: true });
		await t.createTable();
		await t.upsertEntity(employee(args[1], args[2], Number(args[3] || 1)), "Replace");
		break;
	}
	case "check-employee": {
		const t = TableClient.fromConnectionString(cs, args[0], { allowInsecureConnection: true });
		checkEmployee(await t.getEntity(args[1], args[2], { disableTypeConversion: true }),
			await t.getEntity(args[1], args[2]), employee(args[1], args[2], Number(args[3] || 1)));
		break;
	}
	case "enqueue": {
		const q = new QueueClient(cs, args[0]);
		await q.createIfNotExists();
		const base64 = args.includes("--base64");
		const rest = args.filter((a) => a !== "--base64");
		const msg = { job: rest[1], pk: rest[2], rk: rest[3] };
		if (rest[4]) msg.id = rest[4];
		let text = JSON.stringify(msg);
		if (base64) text = Buffer.from(text, "utf8").toString("base64");
		const r = await q.sendMessage(text);
		process.stdout.write(r.messageId + "\n");
		break;
	}
	case "read-list": {
		const t = TableClient.fromConnectionString(cs, args[0], { allowInsecureConnection: true });
		process.stdout.write(JSON.stringify(await readIndexList(t, args[1], args[2])));
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
