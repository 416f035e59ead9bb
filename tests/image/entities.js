// SPDX-License-Identifier: MIT
// entities.js - the application side of `make image-test`, with the official
// Azure SDK for JavaScript: puts one employee in Employees, and then says
// whether the worker in the image has moved it to EmployeesArchive.
//   node entities.js seed PK RK | moved PK RK
// The connection string comes from AZURE_STORAGE_CONNECTION_STRING.
"use strict";
const { TableClient } = require("@azure/data-tables");
const cs = process.env.AZURE_STORAGE_CONNECTION_STRING;
const table = (name) => TableClient.fromConnectionString(cs, name, { allowInsecureConnection: true });

async function exists(name, pk, rk) {
	try {
		await table(name).getEntity(pk, rk);
		return true;
	} catch (e) {
		if (e.statusCode === 404) return false;
		throw e;
	}
}

async function seed(pk, rk) {
	await table("Employees").createTable();
	await table("Employees").upsertEntity({ partitionKey: pk, rowKey: rk, FirstName: "Ima", LastName: "Container",
		Salary: { value: "50000", type: "Double" } }, "Replace");
}

// Exit 0 once moved, 3 while not yet.
async function moved(pk, rk) {
	const inSource = await exists("Employees", pk, rk);
	const inArchive = await exists("EmployeesArchive", pk, rk);
	if (!inSource && inArchive) {
		const e = await table("EmployeesArchive").getEntity(pk, rk);
		if (e.FirstName !== "Ima" || e.Salary !== 50000) throw new Error("the archived copy differs: " + JSON.stringify(e));
		return 0;
	}
	return 3;
}

const cmds = { seed, moved };
const [cmd, pk, rk] = process.argv.slice(2);
if (!cmds[cmd] || !pk || !rk) {
	console.error("usage: node entities.js seed|moved PK RK");
	process.exit(2);
}
cmds[cmd](pk, rk).then((rc) => process.exit(rc || 0), (e) => { console.error("entities.js: " + e.message); process.exit(1); });
