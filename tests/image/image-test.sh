#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# image-test.sh - what `make image-test` runs (after `make deps`):
#  1. the deployment files: yamllint on deploy/, `kubectl kustomize` of each
#     overlay, strict schemas (validate.js), `docker-compose config`, a config
#     check of every worker configuration shipped, and the systemd unit
#     (make install into a scratch PREFIX, systemd-analyze verify);
#  2. the image: base images debian:trixie and trixie-slim made locally when
#     missing (base-images.sh), deploy/Dockerfile built unchanged (make image,
#     the local bases passed as BUILD_IMAGE and RUNTIME_IMAGE since the
#     committed defaults are digests of a registry's images), its metadata,
#     labels and size (< 100 MB); Debian 13 inside; the SBOM file (valid JSON,
#     every package dpkg-query lists, ecworker at the Makefile's version) and
#     its labels (the same document, its sha256); `ecworker --version` and the
#     version label both the Makefile's; make image-pin (image-pin-test.sh,
#     against a local OCI layout) and a build from digest references;
#  3. the image at work, run with buildah (chroot isolation, host network)
#     against an Azurite on free ports: an employee written with the JS SDK,
#     an archive move enqueued by `ecworker enqueue` from the image, the move
#     seen done, the image's own HEALTHCHECK command, /readyz and /metrics;
#     SIGTERM ends the worker with status 0 within its grace, both as the
#     image's user and as PID 1 of its own PID namespace (how docker and
#     Kubernetes run it); and a second job done by the worker as UID 10001 on
#     the image's root filesystem mounted read-only (readOnlyRootFilesystem),
#     which then stops cleanly too.
# Ends with "N passed, 0 failed"; stops at the first failure with the reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
HERE="$ROOT/tests/image"
WORK="$ROOT/build/image"
IMAGE="${IMAGE:-localhost/ecworker:test}"
MAX_BYTES=100000000
# The base images the test builds on: the local ones base-images.sh makes.
BUILD_IMAGE="${BUILD_IMAGE:-docker.io/library/debian:trixie}"
RUNTIME_IMAGE="${RUNTIME_IMAGE:-docker.io/library/debian:trixie-slim}"
SBOM=/usr/share/doc/ecworker/sbom.spdx.json
GRACE=5                     # worker.shutdown_grace in the test configuration
mkdir -p "$WORK"
started=$(date +%s)
CHECKS_NAME=image-test
# shellcheck source=tests/checks.sh
source "$ROOT/tests/checks.sh"

# ---- cleanup ------------------------------------------------------------------

containers=()
bg_pids=()
run_dir=""
cleanup() {
	local rc=$?
	for p in "${bg_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	for c in "${containers[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
	declare -F azurite_stop >/dev/null && azurite_stop
	[[ -n "$run_dir" ]] && rm -rf "$run_dir"
	exit "$rc"
}
trap cleanup EXIT

# ---- tools ----------------------------------------------------------------------

say "tools"
"$ROOT/tests/deps.sh" apt podman buildah skopeo debootstrap yamllint docker-compose util-linux
# kubectl for `kubectl kustomize`: the machine's own when it has one, else
# Debian's kubernetes-client (1.20, kustomize v2). The overlays use the fields
# both kustomize v2 and v5 read (bases, commonLabels, patchesStrategicMerge,
# patchesJson6902), so either renders the same objects.
command -v kubectl >/dev/null || "$ROOT/tests/deps.sh" apt kubernetes-client
command -v kubectl >/dev/null || die "kubectl not found, and Debian's kubernetes-client did not install it"
kver="$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: \(v[0-9.]*\).*/\1/p')"
kver="${kver:-v2 (kubectl $(kubectl version --client 2>/dev/null | sed -n 's/.*GitVersion:"\(v[0-9.]*\)".*/\1/p'))}"
NODE_BIN="$ROOT/tests/node_modules"
[[ -d "$NODE_BIN/typescript" && -d "$NODE_BIN/kubernetes-types" ]] || die "tests/node_modules lacks the validators: run make deps"
ok "podman $(podman --version | awk '{print $3}'), buildah $(buildah --version | awk '{print $3}'), skopeo $(skopeo --version | awk '{print $3}'), kubectl kustomize $kver"

# ---- 1. the deployment files --------------------------------------------------

say "deployment files"
yamllint -c "$HERE/yamllint.yaml" -s deploy/ || die "yamllint found problems in deploy/"
ok "yamllint deploy/"
rendered=()
for o in deploy/kubernetes/overlays/*/; do
	name="$(basename "$o")"
	kubectl kustomize "$o" >"$WORK/k8s-$name.yaml" || die "kubectl kustomize $o failed"
	rendered+=("$name=$WORK/k8s-$name.yaml")
done
ok "kubectl kustomize: ${#rendered[@]} overlays rendered"
node "$HERE/validate.js" k8s "${rendered[@]}" || die "the Kubernetes manifests do not validate"
ok "Kubernetes (kubernetes-types) and KEDA (keda.schema.json) schemas, cross-checks"
node "$HERE/validate.js" compose deploy/compose.yaml || die "deploy/compose.yaml does not validate"
(cd deploy && docker-compose -f compose.yaml config -q) || die "docker-compose config refuses deploy/compose.yaml"
ok "compose: compose-spec schema and docker-compose config"
node "$HERE/validate.js" container-apps deploy/container-apps/ecworker.yaml || die "the Container Apps file does not validate"
ok "Container Apps: resource model and cross-checks"

make --no-print-directory -s build/ecworker
check_config() { # FILE: the worker's own check, with a connection string that holds no secret
	env AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true build/ecworker check-config -c "$1"
}
for f in deploy/ecworker.yaml deploy/compose/ecworker.yaml deploy/kubernetes/overlays/connection-string/ecworker.yaml; do
	out="$(check_config "$f" 2>&1)" || die "ecworker check-config $f: $out"
done
node "$HERE/validate.js" container-apps-config deploy/container-apps/ecworker.yaml >"$WORK/container-apps-ecworker.yaml"
out="$(check_config "$WORK/container-apps-ecworker.yaml" 2>&1)" || die "ecworker check-config (Container Apps secret): $out"
wi=deploy/kubernetes/overlays/workload-identity/ecworker.yaml
out="$(build/ecworker check-config -c "$wi" 2>&1)" || die "ecworker check-config $wi: $out"
ok "ecworker check-config: the 5 worker configurations shipped"

inst="$WORK/install"
rm -rf "$inst"
make --no-print-directory -s install PREFIX="$inst" >/dev/null || die "make install PREFIX=$inst failed"
for f in bin/ecworker lib/systemd/system/ecworker.service share/ecworker/ecworker.yaml; do
	[[ -e "$inst/$f" ]] || die "make install did not install $f"
done
rm -rf "$WORK/destdir"
make --no-print-directory -s install PREFIX=/usr DESTDIR="$WORK/destdir" >/dev/null || die "make install DESTDIR= failed"
grep -q '^ExecStart=/usr/bin/ecworker run' "$WORK/destdir/usr/lib/systemd/system/ecworker.service" ||
	die "make install PREFIX=/usr did not point the unit at /usr/bin/ecworker"
systemd-analyze verify "$inst/lib/systemd/system/ecworker.service" || die "systemd-analyze verify found problems in the unit"
exposure="$(systemd-analyze security --offline=yes "$inst/lib/systemd/system/ecworker.service" 2>/dev/null | sed -n 's/.*Overall exposure level for ecworker.service: \([0-9.]*\).*/\1/p')"
ok "make install (PREFIX, DESTDIR), systemd-analyze verify; exposure ${exposure:-?} (systemd-analyze security)"

# ---- 2. the image ---------------------------------------------------------------

say "image"
"$HERE/base-images.sh" "$WORK" | sed 's/^/   /'
t0=$(date +%s)
make_image() { # IMAGE BUILD_IMAGE RUNTIME_IMAGE LOG
	make --no-print-directory image IMAGE="$1" BUILD_IMAGE="$2" RUNTIME_IMAGE="$3" \
		${IMAGE_CONTEXT:+IMAGE_CONTEXT="$IMAGE_CONTEXT"} >"$4" 2>&1 || {
		tail -n 30 "$4" >&2
		die "podman build failed (full log: $4)"
	}
}
make_image "$IMAGE" "$BUILD_IMAGE" "$RUNTIME_IMAGE" "$WORK/image-build.log"
ok "make image: built $IMAGE on $RUNTIME_IMAGE in $(($(date +%s) - t0)) s (log $WORK/image-build.log)"

inspect() { podman image inspect --format "$1" "$IMAGE"; }
size="$(inspect '{{.Size}}')"
printf '   image size: %s bytes (%s MB)\n' "$size" "$((size / 1000000))"
[[ "$size" -lt "$MAX_BYTES" ]] || die "the image is $size bytes, over $MAX_BYTES"
ok "size under 100 MB"
[[ "$(inspect '{{.Config.User}}')" == "10001:10001" ]] || die "the image's user is '$(inspect '{{.Config.User}}')', not 10001:10001"
[[ "$(inspect '{{json .Config.Entrypoint}}')" == '["ecworker"]' ]] || die "ENTRYPOINT is $(inspect '{{json .Config.Entrypoint}}')"
[[ "$(inspect '{{json .Config.Cmd}}')" == '["run","-c","/etc/ecworker/ecworker.yaml"]' ]] || die "CMD is $(inspect '{{json .Config.Cmd}}')"
[[ "$(inspect '{{.Config.StopSignal}}')" == "SIGTERM" ]] || die "STOPSIGNAL is '$(inspect '{{.Config.StopSignal}}')'"
inspect '{{json .Config.ExposedPorts}}' | grep -q '9464/tcp' || die "port 9464 is not exposed"
health="$(inspect '{{json .Config.Healthcheck.Test}}')"
[[ "$health" == '["CMD","bash","-c",'* ]] || die "no exec-form HEALTHCHECK in the image (was it built as OCI?): $health"
label() { inspect "{{index .Config.Labels \"$1\"}}"; }
for l in title description version revision created base.name documentation; do
	[[ -n "$(label "org.opencontainers.image.$l")" ]] || die "label org.opencontainers.image.$l is missing"
done
[[ "$(label org.opencontainers.image.licenses)" == MIT ]] ||
	die "label org.opencontainers.image.licenses is '$(label org.opencontainers.image.licenses)', not MIT (LICENSE)"
ok "user 10001, entrypoint, cmd, STOPSIGNAL SIGTERM, port 9464, HEALTHCHECK, OCI labels, licenses MIT"
version="$(make --no-print-directory -s print-version)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || die "make print-version says '$version'"
[[ "$(label org.opencontainers.image.version)" == "$version" ]] ||
	die "label org.opencontainers.image.version is '$(label org.opencontainers.image.version)', the Makefile's version $version"
[[ "$(label org.opencontainers.image.base.name)" == "$RUNTIME_IMAGE" ]] ||
	die "label org.opencontainers.image.base.name is '$(label org.opencontainers.image.base.name)', not the base $RUNTIME_IMAGE"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
[[ "$(label org.opencontainers.image.revision)" == "$revision" ]] ||
	die "label org.opencontainers.image.revision is '$(label org.opencontainers.image.revision)', not $revision"
ok "labels: version $version (make print-version), revision, base.name $RUNTIME_IMAGE"

new_container() { # sets c to a new working container of the image
	c="$(buildah from --pull-never "$IMAGE")" || die "buildah from $IMAGE failed"
	containers+=("$c")
}

new_container
c0="$c"
out="$(buildah run --isolation chroot "$c0" -- ecworker check-config 2>&1)" && die "the image's default configuration ran without AZURE_STORAGE_CONNECTION_STRING"
grep -q AZURE_STORAGE_CONNECTION_STRING <<<"$out" || die "without the connection string, check-config says: $out"
buildah config --env AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true "$c0"
out="$(buildah run --isolation chroot "$c0" -- ecworker check-config 2>&1)" || die "the image's default configuration: $out"
ok "default configuration (ECW_CONFIG): needs AZURE_STORAGE_CONNECTION_STRING, valid with it"
in_image() { buildah run --isolation chroot "$c0" -- "$@"; }
debian="$(in_image cat /etc/debian_version)" || die "no /etc/debian_version in the image"
[[ "$debian" =~ ^13(\.[0-9]+)?$ ]] || die "the image runs on Debian '$debian', not 13 (trixie)"
# shellcheck disable=SC2016 # expanded in the image
codename="$(in_image sh -c '. /etc/os-release && echo "$VERSION_CODENAME"')"
[[ "$codename" == trixie ]] || die "/etc/os-release says '$codename', not trixie"
ok "the image is Debian $debian ($codename)"
vout="$(in_image ecworker --version 2>&1)" || die "ecworker --version failed in the image: $vout"
vbin="$(sed -n '1s/^ecworker \([^ ,;()]*\).*/\1/p' <<<"$vout")"
[[ "$vbin" == "$version" ]] || die "ecworker --version in the image says '$vout', not version $version"
grep -qx "commit $revision" <<<"$vout" || die "ecworker --version in the image does not name commit $revision (the revision label): $vout"
grep -q '^  libcurl  *[0-9][^ ]* / [0-9]' <<<"$vout" || die "ecworker --version in the image names no libcurl versions: $vout"
ok "ecworker --version in the image: $(head -n 1 <<<"$vout"), commit = the revision label, library versions"

# The SBOM: the file, against dpkg's own list and against the labels.
in_image cat "$SBOM" >"$WORK/sbom.spdx.json" || die "the image has no $SBOM"
# shellcheck disable=SC2016 # dpkg-query's fields
in_image dpkg-query -W -f='${Status}|${Package}|${Version}|${Architecture}\n' >"$WORK/dpkg.txt" ||
	die "dpkg-query -W failed in the image"
[[ "$(label ecworker.sbom.path)" == "$SBOM" ]] || die "label ecworker.sbom.path is '$(label ecworker.sbom.path)', not $SBOM"
label ecworker.sbom | base64 -d | gunzip >"$WORK/sbom.label.json" || die "label ecworker.sbom is not base64 of gzip"
sha="$(sha256sum "$WORK/sbom.spdx.json" | cut -d' ' -f1)"
[[ "$(label ecworker.sbom.sha256)" == "$sha" ]] || die "label ecworker.sbom.sha256 is '$(label ecworker.sbom.sha256)', the file's sha256 is $sha"
sbom_count="$(node - "$WORK/sbom.spdx.json" "$WORK/sbom.label.json" "$WORK/dpkg.txt" "$version" <<'JS'
const fs = require("fs");
const assert = require("assert");
const [file, labelFile, dpkgFile, version] = process.argv.slice(2);
const fail = (m) => { console.error(m); process.exit(1); };
let doc, fromLabel;
try { doc = JSON.parse(fs.readFileSync(file, "utf8")); } catch (e) { fail(`the SBOM file is no JSON: ${e.message}`); }
try { fromLabel = JSON.parse(fs.readFileSync(labelFile, "utf8")); } catch (e) { fail(`the SBOM label is no JSON: ${e.message}`); }
try { assert.deepStrictEqual(fromLabel, doc); } catch (e) { fail("the ecworker.sbom label is not the document in the file"); }
if (doc.spdxVersion !== "SPDX-2.3" || doc.SPDXID !== "SPDXRef-DOCUMENT" || doc.dataLicense !== "CC0-1.0")
	fail(`not an SPDX 2.3 document: ${doc.spdxVersion} ${doc.SPDXID}`);
if (!/^https:\/\/\S+$/.test(doc.documentNamespace) || !/Z$/.test(doc.creationInfo?.created)) fail("no documentNamespace or creationInfo.created");
const ids = new Set();
for (const p of doc.packages) {
	if (ids.has(p.SPDXID) || !/^SPDXRef-[A-Za-z0-9.-]+$/.test(p.SPDXID)) fail(`bad or repeated SPDXID ${p.SPDXID}`);
	ids.add(p.SPDXID);
	if (!p.name || !p.versionInfo || p.downloadLocation === undefined) fail(`package without name, version or downloadLocation: ${JSON.stringify(p)}`);
}
for (const r of doc.relationships) if (r.spdxElementId !== "SPDXRef-DOCUMENT" || !ids.has(r.relatedSpdxElement)) fail(`relationship to nothing: ${JSON.stringify(r)}`);
const purl = (p) => (p.externalRefs || []).find((r) => r.referenceType === "purl")?.referenceLocator || "";
const eco = doc.packages.filter((p) => p.name === "ecworker");
if (eco.length !== 1 || eco[0].versionInfo !== version || purl(eco[0]) !== `pkg:generic/ecworker@${version}`)
	fail(`ecworker is not in the SBOM once at version ${version}: ${JSON.stringify(eco)}`);
const enc = (s) => s.replace(/%/g, "%25").replace(/\+/g, "%2B").replace(/:/g, "%3A");
const debs = new Map(doc.packages.filter((p) => purl(p).startsWith("pkg:deb/")).map((p) => [purl(p).split("?")[0], p]));
let n = 0;
for (const line of fs.readFileSync(dpkgFile, "utf8").split("\n").filter(Boolean)) {
	const [status, name, ver, arch] = line.split("|");
	if (status !== "install ok installed") fail(`dpkg lists ${name} as '${status}'`);
	const p = debs.get(`pkg:deb/debian/${enc(name)}@${enc(ver)}`);
	if (!p || p.name !== name || p.versionInfo !== ver) fail(`dpkg-query lists ${name} ${ver} ${arch}; the SBOM does not`);
	const q = new URLSearchParams(purl(p).split("?")[1]);
	if (q.get("arch") !== arch || q.get("distro") !== "debian-13") fail(`${name}: purl ${purl(p)} is not arch=${arch}&distro=debian-13`);
	if (!/^built package from: \S+ \S+$/.test(p.sourceInfo)) fail(`${name}: no source package (${p.sourceInfo})`);
	n++;
}
if (n !== debs.size) fail(`the SBOM lists ${debs.size} Debian packages, dpkg-query ${n}`);
console.log(n);
JS
)" || die "the SBOM does not match the image"
ok "SBOM $SBOM: SPDX 2.3 JSON, all $sbom_count packages dpkg-query lists (name, version, arch, source, purl), ecworker $version"
ok "labels ecworker.sbom (the same document, gzip+base64, $(label ecworker.sbom | wc -c) bytes) and ecworker.sbom.sha256 match the file"
ldd_out="$(buildah run --isolation chroot "$c0" -- ldd /usr/local/bin/ecworker 2>&1)"
grep -q 'not found' <<<"$ldd_out" && die "libraries missing in the image: $ldd_out"
grep -Eq 'libicu|libxml2|libstdc' <<<"$ldd_out" && die "the binary links libxml2, ICU or libstdc++: $ldd_out"
ok "every shared library present; no libxml2, ICU or libstdc++"

# make image-pin, without a registry: against a local OCI layout and podman.
"$HERE/image-pin-test.sh" "$WORK" >"$WORK/image-pin-test.log" 2>&1 || {
	sed 's/^/   /' "$WORK/image-pin-test.log" >&2
	die "make image-pin does not pin as it should (tests/image/image-pin-test.sh)"
}
ok "make image-pin: $(tail -n 1 "$WORK/image-pin-test.log" | sed 's/^image-pin-test: //') (tests/image/image-pin-test.sh: OCI layout, re-pin, containers-storage, failures leave the file)"
# Digest references of local images resolve without a registry: the base
# images as `make image-pin` writes them, NAME:TAG@sha256:DIGEST.
pinned_build="localhost/debian:trixie@$(podman image inspect --format '{{.Digest}}' "$BUILD_IMAGE")"
pinned_runtime="localhost/debian:trixie-slim@$(podman image inspect --format '{{.Digest}}' "$RUNTIME_IMAGE")"
t0=$(date +%s)
make_image "$IMAGE-pinned" "$pinned_build" "$pinned_runtime" "$WORK/image-build-pinned.log"
base="$(podman image inspect --format '{{index .Config.Labels "org.opencontainers.image.base.name"}}' "$IMAGE-pinned")"
[[ "$base" == "$pinned_runtime" ]] || die "the image built FROM $pinned_runtime says base.name '$base'"
podman untag "$IMAGE-pinned" >/dev/null 2>&1 || true
ok "built FROM digest references (NAME:TAG@sha256:...) of local images in $(($(date +%s) - t0)) s; base.name $pinned_runtime"

# ---- 3. the image at work -------------------------------------------------------

say "the image against Azurite"
AZURITE="$ROOT/tests/node_modules/.bin/azurite"
run_dir="$(mktemp -d -p "$WORK")"
AZURITE_DIR="$run_dir"
AZURITE_LOG="$run_dir/azurite.log"
# shellcheck source=tests/azurite.sh
source "$ROOT/tests/azurite.sh"
azurite_start >"$run_dir/azurite-start.txt" || { cat "$run_dir/azurite-start.txt" >&2; die "Azurite did not start"; }
sed 's/^/   /' "$run_dir/azurite-start.txt"
[[ -n "${ECW_TEST_CONNECTION_STRING:-}" ]] || die "Azurite did not start"
export AZURE_STORAGE_CONNECTION_STRING="$ECW_TEST_CONNECTION_STRING"

# The configuration goes in a file readable by the image's group only; the
# connection string is in it (Azurite's public key), never on a command line.
cfg_dir="$run_dir/etc"
mkdir -p "$cfg_dir"
cat >"$cfg_dir/ecworker.yaml" <<CFG
storage:
  connection_string: "$ECW_TEST_CONNECTION_STRING"
worker: {queue: ecw-image-test, concurrency: 4, visibility_timeout: 30s, shutdown_grace: ${GRACE}s,
         poll_interval: {min: 100ms, max: 500ms}}
log: {level: info, format: json}
metrics: {listen: "127.0.0.1:0"}
jobs:
  archive-employee: {type: move, from: Employees, to: EmployeesArchive}
CFG
chgrp -R 10001 "$cfg_dir"
chmod 750 "$cfg_dir"
chmod 640 "$cfg_dir/ecworker.yaml"
vol=(-v "$cfg_dir:/etc/ecworker-test:ro")

node "$HERE/entities.js" seed Sales "img 001" || die "could not write the employee with the SDK"
ok "the application wrote Employees(Sales, img 001)"

# The host PID of the process named $2 below $1: buildah run starts
# buildah-chroot-runtime, which starts buildah-chroot-exec, which forks the command.
find_child() {
	local i p queue
	for ((i = 0; i < 100; i++)); do
		queue=("$1")
		while [[ ${#queue[@]} -gt 0 ]]; do
			p="${queue[0]}"
			queue=("${queue[@]:1}")
			if [[ "$p" != "$1" && "$(cat "/proc/$p/comm" 2>/dev/null)" == "$2" ]]; then
				echo "$p"
				return 0
			fi
			mapfile -t -O "${#queue[@]}" queue < <(pgrep -P "$p" 2>/dev/null)
		done
		sleep 0.1
	done
	return 1
}
wait_log() { # FILE PATTERN SECONDS
	local i
	for ((i = 0; i < $3 * 10; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
stop_and_check() { # LABEL HOSTPID WAITPID LOG
	local t0 t1 rc
	t0=$(date +%s%N)
	kill -TERM "$2"
	if wait "$3"; then rc=0; else rc=$?; fi
	t1=$(date +%s%N)
	local ms=$(((t1 - t0) / 1000000))
	[[ "$rc" == 0 ]] || { tail -n 20 "$4" >&2; die "$1: exit status $rc after SIGTERM, not 0"; }
	[[ "$ms" -le $(((GRACE + 5) * 1000)) ]] || die "$1: took $ms ms to stop, over the ${GRACE}s grace"
	grep -q '"stopped cleanly"' "$4" || die "$1: no clean stop in its log"
	ok "$1: SIGTERM -> exit 0 in $ms ms (grace ${GRACE}s)"
}

new_container
c1="$c"
log1="$run_dir/worker.log"
buildah run --isolation chroot "${vol[@]}" "$c1" -- ecworker run -c /etc/ecworker-test/ecworker.yaml 2>"$log1" &
run1=$!
bg_pids+=("$run1")
wait_log "$log1" '"metrics_port"' 20 || { cat "$log1" >&2; die "the worker in the image did not start"; }
port="$(sed -n 's/.*"metrics_port":\([0-9]*\).*/\1/p' "$log1" | head -n 1)"
pid1="$(find_child "$run1" ecworker)" || die "cannot find the worker's process under buildah run"
ok "the worker runs in the image (uid $(awk '/^Uid:/ {print $2}' "/proc/$pid1/status"), metrics port $port)"

new_container
c2="$c"
id="$(buildah run --isolation chroot "${vol[@]}" "$c2" -- ecworker enqueue -c /etc/ecworker-test/ecworker.yaml archive-employee Sales "img 001")" ||
	die "ecworker enqueue in the image failed"
ok "ecworker enqueue from the image: message $id"
wait_moved Sales "img 001" "$log1"
ok "the job ran: Employees(Sales, img 001) moved to EmployeesArchive, identical"

# The image's own HEALTHCHECK command, run in the image; only the port differs.
hc="$(podman image inspect --format '{{index .Config.Healthcheck.Test 3}}' "$IMAGE")"
[[ "$hc" == *"/dev/tcp/127.0.0.1/9464"* ]] || die "the HEALTHCHECK does not probe 127.0.0.1:9464: $hc"
buildah run --isolation chroot "$c2" -- bash -c "${hc//\/9464//$port}" || die "the image's HEALTHCHECK failed against the running worker"
ok "HEALTHCHECK command (bash /dev/tcp, /healthz) answers 200 inside the image"
probe() { buildah run --isolation chroot "$c2" -- bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET $1 HTTP/1.0\r\n\r\n' >&3 && cat <&3"; }
probe /readyz | head -n 1 | grep -q ' 200' || die "/readyz does not answer 200"
probe /metrics | grep -q '^ecw_messages_total{job="archive-employee",outcome="succeeded"} 1' || die "/metrics does not count the job"
ok "/readyz 200; /metrics counts the job"
grep -q 'Eby8vdM02x' "$log1" && die "the account key appears in the worker's log"
ok "no account key in the log"
stop_and_check "worker as the image's user" "$pid1" "$run1" "$log1"

# As PID 1 of a PID namespace, signalled from outside it: what `docker stop`
# and the kubelet do. unshare and setpriv come with the image's util-linux.
new_container
c3="$c"
log3="$run_dir/worker-pid1.log"
buildah run --isolation chroot --user 0:0 --cap-add CAP_SYS_ADMIN "${vol[@]}" "$c3" -- \
	unshare --pid --fork --kill-child setpriv --reuid 10001 --regid 10001 --clear-groups \
	ecworker run -c /etc/ecworker-test/ecworker.yaml 2>"$log3" &
run3=$!
bg_pids+=("$run3")
wait_log "$log3" '"metrics_port"' 20 || { cat "$log3" >&2; die "the worker as PID 1 did not start"; }
pid3="$(find_child "$run3" ecworker)" || die "cannot find the PID 1 worker"
nspid="$(awk '/^NSpid:/ {print $NF}' "/proc/$pid3/status")"
[[ "$nspid" == 1 ]] || die "the worker is PID $nspid in its namespace, not 1"
stop_and_check "worker as PID 1 of its own PID namespace" "$pid3" "$run3" "$log3"

# With readOnlyRootFilesystem, as Kubernetes runs it (deploy/kubernetes): the
# image's root filesystem bind-mounted read-only in a mount namespace of its
# own, /proc and /dev from the host, the configuration on /mnt, and the worker
# run there as 10001:10001 with chroot (buildah run has no read-only option).
# Nothing in the image is writable, and no tmpfs is given: the worker needs none.
new_container
c4="$c"
mnt="$(buildah mount "$c4")" || die "buildah mount $IMAGE failed"
ro_root="$run_dir/ro-root"
mkdir -p "$ro_root"
log4="$run_dir/worker-ro.log"
# shellcheck disable=SC2016 # the arguments come as $1..$3
unshare --mount --propagation private -- bash -euc '
	root="$1" mnt="$2" cfg="$3"
	mount --bind "$mnt" "$root"
	mount -o remount,bind,ro "$root"
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev"
	mount --bind "$cfg" "$root/mnt"
	mount -o remount,bind,ro "$root/mnt"
	if touch "$root/usr/ro-probe" 2>/dev/null || touch "$root/tmp/ro-probe" 2>/dev/null; then
		echo "the root filesystem is writable" >&2
		exit 97
	fi
	exec chroot --userspec=10001:10001 "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin ecworker run -c /mnt/ecworker.yaml
' ro-run "$ro_root" "$mnt" "$cfg_dir" 2>"$log4" &
run4=$!
bg_pids+=("$run4")
wait_log "$log4" '"metrics_port"' 20 || { cat "$log4" >&2; die "the worker on a read-only root filesystem did not start"; }
# unshare, bash, chroot and env each exec the next: the background job is the worker.
pid4="$run4"
[[ "$(cat "/proc/$pid4/comm" 2>/dev/null)" == ecworker ]] || die "the background job $pid4 is not the worker on the read-only root filesystem"
uid4="$(awk '/^Uid:/ {print $2}' "/proc/$pid4/status")"
[[ "$uid4" == 10001 ]] || die "the read-only worker runs as uid $uid4, not 10001"
# Its own view of its mounts: "/" (field 5) with the mount option ro (field 6).
awk '$5 == "/" && $6 ~ /(^|,)ro(,|$)/ {f = 1} END {exit !f}' "/proc/$pid4/mountinfo" ||
	die "the worker's root filesystem is not mounted read-only: $(awk '$5 == "/"' "/proc/$pid4/mountinfo")"
node "$HERE/entities.js" seed Sales "img 002" || die "could not write the second employee with the SDK"
buildah run --isolation chroot "${vol[@]}" "$c2" -- ecworker enqueue -c /etc/ecworker-test/ecworker.yaml archive-employee Sales "img 002" >/dev/null ||
	die "ecworker enqueue of the second move failed"
wait_moved Sales "img 002" "$log4"
ok "the worker on a read-only root filesystem (uid 10001) moved Employees(Sales, img 002)"
stop_and_check "worker on a read-only root filesystem" "$pid4" "$run4" "$log4"

elapsed=$(($(date +%s) - started))
echo "image-test: ${elapsed} s; image $size bytes; SBOM $sbom_count Debian packages + ecworker $version"
checks_done
