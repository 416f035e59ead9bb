// SPDX-License-Identifier: MIT
// index-list-reader.js - how an application reads an index list that
// ecworker keeps (jobs/README.md, "The list format, and reading a list"), with
// the official Azure SDK for JavaScript. That page shows this function; the
// interop tests (tests/integration/test_index_get.c, through sdk.js read-list)
// prove it reads what the worker writes, small and large, and that the page
// shows these functions exactly.
"use strict";

// Every [PartitionKey, RowKey] with the value, in order; [] when no source
// has it. table: a TableClient on the list table; pk, value: the list's keys.
// Every change of a list writes its head (atomically with its pages): the
// same head ETag after the pages means they were read as one version.
async function readIndexList(table, pk, value) {
	for (let attempt = 0; attempt < 10; attempt++) {
		const head = await getOrNull(table, pk, value);
		if (!head) return [];
		if (head.ListRowKey !== undefined) throw new Error(`${value} is a page of another list`);
		const keys = chunks(head);
		const pages = JSON.parse(head.Pages ?? "[]");
		let whole = true;
		for (const n of pages) {
			const page = await getOrNull(table, pk, `${value}~~${n}`);
			if (page?.ListRowKey !== value) whole = false; // changed meanwhile: read again
			else keys.push(...chunks(page));
		}
		if (pages.length === 0) return keys;
		if (whole && (await getOrNull(table, pk, value))?.etag === head.etag) return keys;
	}
	throw new Error(`list ${value} kept changing while it was read`);
}

async function getOrNull(table, pk, rk) {
	try {
		return await table.getEntity(pk, rk);
	} catch (e) {
		if (e.statusCode === 404) return null;
		throw e;
	}
}

// An entity's keys: Keys, Keys2, Keys3, ... while they exist.
function chunks(entity) {
	const keys = [];
	for (let i = 1; entity[i === 1 ? "Keys" : `Keys${i}`] !== undefined; i++)
		keys.push(...JSON.parse(entity[i === 1 ? "Keys" : `Keys${i}`]));
	return keys;
}

module.exports = { readIndexList };
