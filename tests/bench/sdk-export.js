// SPDX-License-Identifier: MIT
// sdk-export.js - the export a team would otherwise script, on the official
// Azure SDK for JavaScript, for the bench's export part (issue 37): one
// window of a table's rows (a RowKey range of one partition) written to a
// blob as JSON lines in the Table service's own JSON (typed values
// annotated), uploaded in blocks of 4 MiB, then the rows deleted in
// transactions of 100 If-Match the ETags read.
//   node sdk-export.js TABLE PARTITION ROWKEY_LO ROWKEY_HI CONTAINER BLOB
// The connection string comes from AZURE_STORAGE_CONNECTION_STRING. Prints
// one JSON line at the end: {"rows":N,"cpuUs":...,"maxRssKb":...}.
"use strict";
const { TableClient, odata } = require("@azure/data-tables");
const { BlobServiceClient } = require("@azure/storage-blob");

const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
const [table, pk, lo, hi, container, name] = process.argv.slice(2);
const BLOCK = 4 * 1024 * 1024;

// An entity read with disableTypeConversion as the service's JSON: the
// types JSON cannot tell apart annotated.
function tableJson(e) {
	const out = { PartitionKey: e.partitionKey, RowKey: e.rowKey };
	for (const [k, v] of Object.entries(e)) {
		if (["partitionKey", "rowKey", "etag", "timestamp", "odata.metadata", "odata.etag"].includes(k)) continue;
		switch (v.type) {
		case "String": out[k] = v.value; break;
		case "Boolean": out[k] = v.value === "true"; break;
		case "Int32": out[k] = Number(v.value); break;
		case "Double": out[k] = Number(v.value); out[`${k}@odata.type`] = "Edm.Double"; break;
		default: out[k] = v.value; out[`${k}@odata.type`] = `Edm.${v.type}`;
		}
	}
	return JSON.stringify(out);
}

async function main() {
	const t = TableClient.fromConnectionString(cs, table, { allowInsecureConnection: true });
	const blob = BlobServiceClient.fromConnectionString(cs).getContainerClient(container).getBlockBlobClient(name);
	const filter = odata`PartitionKey eq ${pk} and RowKey ge ${lo} and RowKey lt ${hi}`;
	const keys = [];
	const ids = [];
	let parts = [];
	let size = 0;
	const flush = async () => {
		if (!size) return;
		const id = Buffer.from(`block-${String(ids.length).padStart(6, "0")}`).toString("base64");
		const body = Buffer.from(parts.join(""), "utf8");
		await blob.stageBlock(id, body, body.length);
		ids.push(id);
		parts = [];
		size = 0;
	};
	for await (const e of t.listEntities({ queryOptions: { filter }, disableTypeConversion: true })) {
		const line = tableJson(e) + "\n";
		parts.push(line);
		size += Buffer.byteLength(line);
		keys.push([e.rowKey, e.etag]);
		if (size >= BLOCK) await flush();
	}
	await flush();
	await blob.commitBlockList(ids, { blobHTTPHeaders: { blobContentType: "application/x-ndjson" } });
	for (let i = 0; i < keys.length; i += 100)
		await t.submitTransaction(keys.slice(i, i + 100).map(([rowKey, etag]) =>
			["delete", { partitionKey: pk, rowKey }, { etag }]));
	const cpu = process.cpuUsage();
	process.stdout.write(JSON.stringify({ rows: keys.length, cpuUs: cpu.user + cpu.system,
		maxRssKb: process.resourceUsage().maxRSS }) + "\n");
}

main().catch((e) => {
	process.stderr.write(`sdk-export.js: ${e && e.message ? e.message : e}\n`);
	process.exit(1);
});
