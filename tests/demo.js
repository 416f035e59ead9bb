// SPDX-License-Identifier: MIT
// demo.js - the application side of `make demo`, written with the official
// Azure SDK for JavaScript: it seeds and changes entities the way an app
// would, and shows what ecworker derived from them.
//   node demo.js seed | change | show | telemetry | late | rollups | archived | photo | photos | history
"use strict";
const { TableClient } = require("@azure/data-tables");
const { BlobServiceClient } = require("@azure/storage-blob");
const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
const table = (name) => TableClient.fromConnectionString(cs, name, { allowInsecureConnection: true });
const container = (name) => BlobServiceClient.fromConnectionString(cs).getContainerClient(name);

const employees = [
	["Sales", "o'brien 001", "Pat", "O'Brien", "pat.obrien@example.com"],
	["Sales", "jones 002", "Sam", "Jones", "sam.jones@example.com"],
	["Ops", "jones 003", "Alex", "Jones", "alex.jones@example.com"],
	["Ops", "zoë 004", "Zoë", "Smith", "zoe.smith@example.com"],
];

async function seed() {
	for (const t of ["Employees", "Customers", "Orders"]) await table(t).createTable();
	await container("employee-files").createIfNotExists(); // the application's: the worker never creates it
	for (const [pk, rk, first, last, email] of employees)
		await table("Employees").upsertEntity({ partitionKey: pk, rowKey: rk, FirstName: first,
			LastName: last, Email: email, Salary: { value: "50000", type: "Double" } }, "Replace");
	await table("Customers").upsertEntity({ partitionKey: "customers", rowKey: "c1", Name: "Contoso", Email: "buy@contoso.example" }, "Replace");
	await table("Customers").upsertEntity({ partitionKey: "customers", rowKey: "c2", Name: "Fabrikam", Email: "orders@fabrikam.example" }, "Replace");
	for (let i = 1; i <= 3; i++)
		await table("Orders").upsertEntity({ partitionKey: "c1", rowKey: `order-${i}`, Total: 10 * i }, "Replace");
	for (let i = 1; i <= 2; i++)
		await table("Orders").upsertEntity({ partitionKey: "c2", rowKey: `order-${i}`, Total: 7 * i }, "Replace");
}

async function change() {
	// Sam Jones marries and becomes Sam Smith; Contoso renames itself.
	await table("Employees").updateEntity({ partitionKey: "Sales", rowKey: "jones 002", LastName: "Smith",
		Email: "sam.smith@example.com" }, "Merge");
	await table("Customers").updateEntity({ partitionKey: "customers", rowKey: "c1", Name: "Contoso Ltd" }, "Merge");
}

async function list(name, filter) {
	const rows = [];
	for await (const e of table(name).listEntities(filter ? { queryOptions: { filter } } : {})) rows.push(e);
	return rows;
}

async function show() {
	const idx = await list("EmployeeIndex");
	console.log("EmployeeIndex, email partition (one entry per employee):");
	for (const e of idx.filter((e) => e.partitionKey === "email"))
		console.log(`  ${e.rowKey.padEnd(26)} -> ${e.SourcePartitionKey}/${e.SourceRowKey} (${e.FirstName} ${e.LastName})`);
	console.log("EmployeeIndex, lastname partition (a sorted list of keys per value):");
	for (const e of idx.filter((e) => e.partitionKey === "lastname"))
		console.log(`  ${e.rowKey.padEnd(10)} ${e.Keys}`);
	console.log("Orders (CustomerName and CustomerEmail copied from Customers):");
	for (const e of await list("Orders"))
		console.log(`  ${e.partitionKey}/${e.rowKey}  Total ${e.Total}  ${e.CustomerName} <${e.CustomerEmail}>`);
	console.log("EmployeesArchive:");
	for (const e of await list("EmployeesArchive"))
		console.log(`  ${e.partitionKey}/${e.rowKey}  ${e.FirstName} ${e.LastName}`);
}

// A water-tank monitor uploads a reading an hour: PartitionKey
// "<device>_raw", RowKey the Unix second zero-padded to 10 digits.
const day = Date.UTC(2020, 9, 11) / 1000; // Sunday 2020-10-11
const reading = (device, t, depth) => ({ partitionKey: `${device}_raw`, rowKey: String(t).padStart(10, "0"), depth });

async function telemetry() {
	await table("TankTelemetry").createTable();
	// 2020-10-10 and 10-11, hours 3 and 4 of the 11th missing (the uplink was down).
	for (let h = -24; h < 24; h++) {
		if (h === 3 || h === 4) continue;
		await table("TankTelemetry").upsertEntity(reading("tank-7", day + h * 3600, 120 + (h % 12)), "Replace");
	}
}

async function late() {
	// The missing hours arrive late, one of them very low.
	await table("TankTelemetry").upsertEntity(reading("tank-7", day + 3 * 3600, 80), "Replace");
	await table("TankTelemetry").upsertEntity(reading("tank-7", day + 4 * 3600, 119), "Replace");
}

async function rollups() {
	console.log("TankTelemetry aggregates (from the hourly readings):");
	for (const e of await list("TankTelemetry", "PartitionKey eq 'tank-7_daily' or PartitionKey eq 'tank-7_weekly'"))
		console.log(`  ${e.partitionKey.padEnd(13)} ${e.rowKey}  averageDepth ${e.averageDepth.toFixed(2)}` +
			(e.minDepth !== undefined ? `  min ${e.minDepth}  max ${e.maxDepth}` : "") + `  samples ${e.samples}`);
}

async function blobs(name, prefix) {
	const out = [];
	for await (const b of container(name).listBlobsFlat(prefix ? { prefix } : {})) out.push(b);
	return out;
}

// What the blob archive holds, read as any application would: JSON.
async function archived() {
	console.log("employee-archive (blobs, the Table service's JSON):");
	for (const b of await blobs("employee-archive")) {
		const text = (await container("employee-archive").getBlobClient(b.name).downloadToBuffer()).toString("utf8");
		console.log(`  ${b.name}  ${text}`);
	}
	const e = await table("Employees").getEntity("Sales", "o'brien 001").catch(() => null);
	console.log(`Employees has Sales/o'brien 001: ${e ? `yes (${e.FirstName} ${e.LastName}, Salary ${e.Salary})` : "no"}`);
}

// Alex Jones's photo, uploaded before the entity names it; a second call
// replaces it: the new blob is uploaded, then the entity names it.
async function photo() {
	const c = container("employee-files");
	const have = (await blobs("employee-files", "Ops/jones 003/")).length;
	const name = `Ops/jones 003/photo-${have + 1}.jpg`;
	const bytes = Buffer.from(`a photo, take ${have + 1}`);
	await c.getBlockBlobClient(name).upload(bytes, bytes.length, { blobHTTPHeaders: { blobContentType: "image/jpeg" } });
	await table("Employees").updateEntity({ partitionKey: "Ops", rowKey: "jones 003", Photo: name }, "Merge");
}

async function photos() {
	const e = await table("Employees").getEntity("Ops", "jones 003");
	console.log(`employee-files under Ops/jones 003/ (the entity names ${e.Photo}):`);
	for (const b of await blobs("employee-files", "Ops/jones 003/")) console.log(`  ${b.name}`);
}

// The exported day, read as any application would: a line is an entity's
// JSON; and the raw rows the table still holds for that day.
async function history() {
	for (const b of await blobs("tank-history")) {
		const props = await container("tank-history").getBlobClient(b.name).getProperties();
		const lines = (await container("tank-history").getBlobClient(b.name).downloadToBuffer()).toString("utf8").trimEnd().split("\n");
		console.log(`tank-history/${b.name}: ${lines.length} lines (metadata ecw_count ${props.metadata.ecw_count}, ` +
			`${props.metadata.ecw_first_time} to ${props.metadata.ecw_last_time}):`);
		for (const l of [lines[0], lines[1], "...", lines[lines.length - 1]]) console.log(`  ${l}`);
	}
	const left = await list("TankTelemetry", `PartitionKey eq 'tank-7_raw' and RowKey ge '${day}' and RowKey lt '${day + 86400}'`);
	const before = await list("TankTelemetry", `PartitionKey eq 'tank-7_raw' and RowKey lt '${day}'`);
	console.log(`TankTelemetry raw rows of 2020-10-11 left: ${left.length}; of 2020-10-10 (not exported): ${before.length}`);
}

const cmds = { seed, change, show, telemetry, late, rollups, archived, photo, photos, history };
cmds[process.argv[2]]().then(() => process.exit(0), (e) => { console.error("demo.js: " + e.message); process.exit(1); });
