#!/usr/bin/env bash
# image-test.sh - what `make image-test` runs (after `make deps`):
#  1. the deployment files: yamllint on deploy/, `kubectl kustomize` of each
#     overlay, strict schemas (validate.js), `docker-compose config`, a config
#     check of every worker configuration shipped, and the systemd unit
#     (make install into a scratch PREFIX, systemd-analyze verify);
#  2. the image: base images made locally when missing (base-images.sh),
#     deploy/Dockerfile built unchanged (make image), its metadata and size
#     (< 100 MB);
#  3. the image at work, run with buildah (chroot isolation, host network)
#     against an Azurite on free ports: an employee written with the JS SDK,
#     an archive move enqueued by `ecworker enqueue` from the image, the move
#     seen done, the image's own HEALTHCHECK command, /readyz and /metrics;
#     SIGTERM ends the worker with status 0 within its grace, both as the
#     image's user and as PID 1 of its own PID namespace (how docker and
#     Kubernetes run it).
# Ends with "N passed, 0 failed"; stops at the first failure with the reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
HERE="$ROOT/tests/image"
WORK="$ROOT/build/image"
IMAGE="${IMAGE:-localhost/ecworker:test}"
MAX_BYTES=100000000
GRACE=5                     # worker.shutdown_grace in the test configuration
mkdir -p "$WORK"
started=$(date +%s)
passed=0

say() { printf '== %s\n' "$*"; }
ok() { passed=$((passed + 1)); printf '   ok   %s\n' "$*"; }
die() {
	printf '   FAIL %s\n' "$*" >&2
	echo "image-test: $passed passed, 1 failed" >&2
	exit 1
}

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
"$ROOT/tests/deps.sh" apt podman buildah debootstrap yamllint docker-compose util-linux
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
ok "podman $(podman --version | awk '{print $3}'), buildah $(buildah --version | awk '{print $3}'), kubectl kustomize $kver"

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
make --no-print-directory image IMAGE="$IMAGE" ${IMAGE_CONTEXT:+IMAGE_CONTEXT="$IMAGE_CONTEXT"} >"$WORK/image-build.log" 2>&1 || {
	tail -n 30 "$WORK/image-build.log" >&2
	die "podman build failed (full log: $WORK/image-build.log)"
}
ok "make image: built $IMAGE in $(($(date +%s) - t0)) s (log $WORK/image-build.log)"

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
for l in title description version revision created base.name documentation; do
	[[ -n "$(inspect "{{index .Config.Labels \"org.opencontainers.image.$l\"}}")" ]] || die "label org.opencontainers.image.$l is missing"
done
ok "user 10001, entrypoint, cmd, STOPSIGNAL SIGTERM, port 9464, HEALTHCHECK, OCI labels"

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
ldd_out="$(buildah run --isolation chroot "$c0" -- ldd /usr/local/bin/ecworker 2>&1)"
grep -q 'not found' <<<"$ldd_out" && die "libraries missing in the image: $ldd_out"
grep -Eq 'libicu|libxml2|libstdc' <<<"$ldd_out" && die "the binary links libxml2, ICU or libstdc++: $ldd_out"
ok "every shared library present; no libxml2, ICU or libstdc++"

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
moved=0
for _ in $(seq 1 100); do
	if node "$HERE/entities.js" moved Sales "img 001"; then moved=1; break; else
		rc=$?; [[ "$rc" == 3 ]] || die "could not read the tables"; fi
	sleep 0.2
done
[[ "$moved" == 1 ]] || { tail -n 20 "$log1" >&2; die "the employee was not moved to EmployeesArchive within 20 s"; }
grep -q '"outcome":"succeeded"' "$log1" || die "no outcome succeeded in the worker's log"
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

elapsed=$(($(date +%s) - started))
echo "image-test: ${elapsed} s"
echo "image-test: $passed passed, 0 failed"
