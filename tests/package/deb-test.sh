#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deb-test.sh DEB - what `make deb-test` runs (after make deps, make deb and
# make deb-check): the package installed into a fresh Debian root filesystem
# and run there the way its systemd unit runs it.
#  1. a `debootstrap --variant=minbase` root filesystem of the host's release
#     (made once and cached as a tarball in build/deb/, unpacked afresh each
#     run), the package installed in it with `apt-get install ./DEB`, which
#     fetches its Depends from Debian's repository;
#  2. what the install left: the package's status and version, the conffile,
#     every file's owner and mode (the environment file root-only, holding no
#     setting yet), the system user ecworker (system UID, no home, no shell),
#     the unit not enabled, `systemd-analyze verify` of the installed unit on
#     the host (its commands pointed into the root filesystem), the unit's
#     sandboxing directives all there, `ecworker --version`;
#  3. the installed unit at work: its ExecStartPre, then ExecStart, read from
#     the unit file and run in the root filesystem as its User and Group
#     (setpriv, no new privileges, umask 077) with only its EnvironmentFile's
#     variables: without a connection string the ExecStartPre refuses (exit 2,
#     which the unit does not restart after); with Azurite's in the
#     environment file (never on a command line) and an archive-move job in
#     the configuration, a reinstall keeps both, the worker starts, an
#     employee enqueued by the installed `ecworker enqueue` is moved (seen with
#     the JavaScript SDK, tests/image/entities.js) and SIGTERM ends the worker
#     with status 0 within its grace;
#  4. removal keeps the configuration and removes the unit and the program;
#     purge removes /etc/ecworker; dpkg warns about nothing.
# Ends with "N passed, 0 failed"; stops at the first failure with the reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
DEB="$(cd "$(dirname "${1:?usage: tests/package/deb-test.sh DEB}")" && pwd)/$(basename "$1")"
WORK="$ROOT/build/deb/test"
R="$WORK/root" # the root filesystem
GRACE=5        # worker.shutdown_grace in the test configuration
started=$(date +%s)
CHECKS_NAME=deb-test
# shellcheck source=tests/checks.sh
source "$ROOT/tests/checks.sh"

[[ -f "$DEB" ]] || die "$DEB not found: run make deb"
[[ "$(id -u)" == 0 ]] || die "deb-test needs root (debootstrap, chroot, mounts)"
version="$(dpkg-deb -f "$DEB" Version)"
. /etc/os-release
# DEB_TEST_RELEASE=trixie: another release's root filesystem, for a package
# built on that release (its Depends name that release's libraries).
release="${DEB_TEST_RELEASE:-${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}}"
arch="$(dpkg --print-architecture)"

# ---- mounts and cleanup -----------------------------------------------------

mounted() { grep -q " $1 " /proc/mounts; }
unmount_all() {
	local m
	for m in "$R/dev" "$R/proc"; do
		mounted "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	return 0
}
bg_pids=()
cleanup() {
	local rc=$?
	for p in "${bg_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	declare -F azurite_stop >/dev/null && azurite_stop
	unmount_all
	exit "$rc"
}
trap cleanup EXIT

in_root() { chroot "$R" "$@"; }

# ---- 1. a fresh root filesystem with the package --------------------------------

say "a fresh $release root filesystem"
mkdir -p "$WORK"
tarball="$ROOT/build/deb/rootfs-$release-$arch.tar"
if [[ ! -s "$tarball" ]]; then
	t0=$(date +%s)
	tmp="$WORK/rootfs.tmp"
	mounted "$tmp/proc" && die "$tmp/proc is mounted: unmount it first"
	rm -rf "$tmp"
	debootstrap --variant=minbase "$release" "$tmp" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log $WORK/debootstrap.log)"; }
	# The package lists too, so that each run's update fetches only changes.
	cp /etc/resolv.conf "$tmp/etc/resolv.conf"
	chroot "$tmp" apt-get -q update >>"$WORK/debootstrap.log" 2>&1 || die "apt-get update in the new root filesystem failed"
	rm -rf "$tmp/var/cache/apt/archives/"*.deb
	tar --numeric-owner -C "$tmp" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
	rm -rf "$tmp"
	echo "   debootstrap --variant=minbase $release: $(($(date +%s) - t0)) s, cached as $tarball"
fi
# Never delete through a mount: a bind mount of /dev left from a killed run
# would take the host's device nodes with it.
mounted "$R/dev" || mounted "$R/proc" && die "$R still has mounts from an earlier run: umount $R/dev $R/proc"
rm -rf "$R" "$WORK"/tmp.*
mkdir -p "$R"
tar --numeric-owner -C "$R" -xf "$tarball"
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
cp /etc/resolv.conf "$R/etc/resolv.conf"
cp "$DEB" "$R/tmp/"
debname="$(basename "$DEB")"
ok "minbase $release root filesystem unpacked in $R (/proc, /dev mounted)"

apt_in_root() { # LOG ARGS...: apt-get in the root filesystem; fails on any dpkg warning
	local log="$1"
	shift
	in_root env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@" >"$log" 2>&1 ||
		{ tail -n 30 "$log" >&2; return 1; }
	if grep -Ei 'dpkg: warning|^W: ' "$log" >&2; then
		echo "(log $log)" >&2
		return 1
	fi
}
apt_in_root "$WORK/apt-update.log" update || die "apt-get update in the root filesystem failed"
t0=$(date +%s)
apt_in_root "$WORK/apt-install.log" install "/tmp/$debname" || die "apt-get install ./$debname failed"
pulled="$(sed -n 's/.* \([0-9]*\) newly installed.*/\1/p' "$WORK/apt-install.log")"
ok "apt-get install ./$debname: ${pulled:-?} packages newly installed with its Depends in $(($(date +%s) - t0)) s"

# ---- 2. what the install left ---------------------------------------------------

say "the installed package"
status="$(in_root dpkg-query -W -f='${Status} ${Version}' ecworker)"
[[ "$status" == "install ok installed $version" ]] || die "dpkg-query says '$status', not 'install ok installed $version'"
conffiles="$(in_root dpkg-query -W -f='${Conffiles}' ecworker)"
grep -q '^ /etc/ecworker/ecworker.yaml [0-9a-f]\{32\}$' <<<"$conffiles" || die "ecworker.yaml is not a conffile: $conffiles"
[[ "$(grep -c . <<<"$conffiles")" == 1 ]] || die "conffiles other than ecworker.yaml: $conffiles"
ok "dpkg: ecworker $version installed; conffile /etc/ecworker/ecworker.yaml only"

expect_file() { # PATH MODE OWNER:GROUP
	local got
	got="$(in_root stat -c '%F %a %U:%G' "$1" 2>/dev/null)" || die "$1 is missing"
	[[ "$got" == *" $2 $3" ]] || die "$1 is '$got', expected mode $2, $3"
}
expect_file /usr/bin/ecworker 755 root:root
expect_file /usr/share/man/man1/ecworker.1.gz 644 root:root
expect_file /etc/ecworker 755 root:root
expect_file /etc/ecworker/ecworker.yaml 644 root:root
expect_file /etc/ecworker/ecworker.env 600 root:root
expect_file /usr/lib/systemd/system/ecworker.service 644 root:root
expect_file /usr/lib/sysusers.d/ecworker.conf 644 root:root
expect_file /usr/share/doc/ecworker/copyright 644 root:root
grep -qx 'License: Expat' "$R/usr/share/doc/ecworker/copyright" || die "the copyright file does not grant the MIT (Expat) license"
expect_file /usr/share/doc/ecworker/changelog.gz 644 root:root
expect_file /usr/share/doc/ecworker/README.md.gz 644 root:root
expect_file /usr/share/doc/ecworker/CONFIGURATION.md.gz 644 root:root
expect_file /usr/share/doc/ecworker/JOBS.md.gz 644 root:root
expect_file /usr/share/doc/ecworker/OPERATING.md.gz 644 root:root
expect_file /usr/share/doc/ecworker/DEPLOYMENT.md.gz 644 root:root
ok "files, modes and owners: program, man page, configuration, environment file (600), unit, sysusers.d, docs"
env_file_mode="$(stat -c %a "$R/etc/ecworker/ecworker.env")"
((8#$env_file_mode & 8#077)) && die "the environment file is mode $env_file_mode: readable beyond root"
# It sets nothing but the ExecStartPre's online check (no secret, no endpoint).
set_lines="$(grep -v '^\(#.*\)\?$' "$R/etc/ecworker/ecworker.env" || true)"
[[ "$set_lines" == "ECW_CHECK_ONLINE=1" ]] || die "the new environment file sets more than ECW_CHECK_ONLINE=1: $set_lines"
grep -q '^#AZURE_STORAGE_CONNECTION_STRING=' "$R/etc/ecworker/ecworker.env" || die "the environment file has no placeholder for the connection string"
ok "the environment file: no group or other access, only comments (a placeholder for the connection string)"

pw="$(in_root getent passwd ecworker)" || die "no user ecworker"
IFS=: read -r _ _ uid gid _ home shell <<<"$pw"
sys_uid_max="$(sed -n 's/^SYS_UID_MAX[[:space:]]*//p' "$R/etc/login.defs")"
((uid <= ${sys_uid_max:-999} && uid > 0)) || die "ecworker has UID $uid, not a system UID"
[[ "$(in_root getent group "$gid" | cut -d: -f1)" == ecworker ]] || die "ecworker's primary group is not ecworker: $(in_root getent group "$gid")"
[[ "$home" == /nonexistent && "$shell" == /usr/sbin/nologin ]] || die "ecworker's home and shell are $home and $shell"
[[ ! -e "$R/nonexistent" ]] || die "/nonexistent exists in the root filesystem"
ok "system user ecworker (UID $uid, group ecworker, home /nonexistent, shell nologin)"

[[ ! -e "$R/etc/systemd/system/multi-user.target.wants/ecworker.service" ]] || die "the install enabled the unit"
ok "the unit is not enabled by the install (no connection string yet)"

unit="$R/usr/lib/systemd/system/ecworker.service"
# The unit as systemd reads it, on the host: its commands are pointed into the
# root filesystem and man finds its man page there (Documentation=man:...).
mkdir -p "$WORK/verify"
sed "s|^\(ExecStart[A-Za-z]*=\)/usr/bin/|\1$R/usr/bin/|" "$unit" >"$WORK/verify/ecworker.service"
out="$(MANPATH="$R/usr/share/man" systemd-analyze verify "$WORK/verify/ecworker.service" 2>&1)" ||
	die "systemd-analyze verify: $out"
[[ -z "$out" ]] || die "systemd-analyze verify warns: $out"
exposure="$(systemd-analyze security --offline=yes "$WORK/verify/ecworker.service" 2>/dev/null |
	sed -n 's/.*Overall exposure level for ecworker.service: \([0-9.]*\).*/\1/p')"
ok "systemd-analyze verify of the installed unit; exposure ${exposure:-?} (systemd-analyze security)"
while IFS= read -r line; do
	case "$line" in '' | '#'* | Documentation=* | DynamicUser=* | ExecStart*) continue ;; esac
	grep -qxF -- "$line" "$unit" || die "the installed unit lacks '$line' of deploy/systemd/ecworker.service"
done <deploy/systemd/ecworker.service
grep -qx 'User=ecworker' "$unit" && grep -qx 'Group=ecworker' "$unit" || die "the unit has no User=ecworker and Group=ecworker"
grep -q '^DynamicUser' "$unit" && die "the unit still has DynamicUser"
ok "every directive of deploy/systemd/ecworker.service in the installed unit, User= and Group= ecworker"

got="$(in_root ecworker --version)"
[[ "$(head -n 1 <<<"$got")" == "ecworker $version" ]] ||
	die "ecworker --version in the root filesystem says '$got', not 'ecworker $version'"
commit="$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
grep -Eq "^commit $commit(-dirty)?\$" <<<"$got" || die "ecworker --version names no commit $commit: $got"
grep -q '^  libcurl  *[0-9][^ ]* / [0-9]' <<<"$got" || die "ecworker --version names no libcurl versions: $got"
ok "ecworker --version: $(head -n 1 <<<"$got") (the package's version), commit $commit, library versions"

# ---- 3. the installed unit at work ------------------------------------------------

say "the unit's command lines against Azurite"
# What the service runs, read from the installed unit.
unit_value() { # KEY: its one value in the unit
	local v
	v="$(sed -n "s/^$1=//p" "$unit")"
	[[ -n "$v" && "$(grep -c . <<<"$v")" == 1 ]] || die "the unit has no single $1="
	printf '%s' "$v"
}
pre="$(unit_value ExecStartPre)"
start="$(unit_value ExecStart)"
env_file="$(unit_value EnvironmentFile)"
user="$(unit_value User)"
group="$(unit_value Group)"
umask_v="$(unit_value UMask)"
# Only plain words: no quoting, specifiers or $ for this reading to get wrong.
for v in "$pre" "$start" "$env_file"; do
	[[ "$v" =~ ^[A-Za-z0-9/._\ -]+$ ]] || die "'$v' is more than plain words: deb-test.sh cannot run it as systemd would"
done
read -ra pre_cmd <<<"$pre"
read -ra start_cmd <<<"$start"
cfg_path="${start_cmd[3]}"
[[ "${start_cmd[1]} ${start_cmd[2]}" == "run -c" ]] || die "ExecStart is not 'ecworker run -c FILE': $start"
uid="$(in_root id -u "$user")"
gid="$(in_root getent group "$group" | cut -d: -f3)"

# Runs ARGS in the root filesystem as the unit runs its commands: as User and
# Group with no supplementary groups and no new privileges, the unit's umask,
# and an environment of only PATH, the user's names and the EnvironmentFile's
# variables (read here and exported: never on a command line). The
# EnvironmentFile is read the simple way: NAME=value lines, # comments.
# It execs, so that a background job's PID is the command's: call it only in
# a subshell ($(...) or &).
as_unit() {
	[[ "$BASH_SUBSHELL" -gt 0 ]] || die "as_unit runs only in a subshell"
	while IFS= read -r name; do unset "$name"; done < <(compgen -e)
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	export USER="$user" LOGNAME="$user" HOME=/nonexistent SHELL=/usr/sbin/nologin
	while IFS= read -r line || [[ -n "$line" ]]; do
		case "$line" in '' | '#'* | ';'*) continue ;; esac
		export "${line?}"
	done <"$R${env_file#-}"
	umask "$umask_v"
	exec chroot "$R" setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs -- "$@"
}

# Without a connection string, the service does not start: its ExecStartPre
# fails with 2, which the unit does not restart after.
if out="$(as_unit "${pre_cmd[@]}" 2>&1)"; then rc=0; else rc=$?; fi
[[ "$rc" == 2 ]] || die "the ExecStartPre of the fresh install exited $rc, not 2: $out"
grep -q AZURE_STORAGE_CONNECTION_STRING <<<"$out" || die "the ExecStartPre does not name AZURE_STORAGE_CONNECTION_STRING: $out"
grep -qx 'RestartPreventExitStatus=2' "$unit" || die "the unit restarts after exit status 2"
ok "fresh install: ExecStartPre exits 2 naming AZURE_STORAGE_CONNECTION_STRING (no restart after 2)"

AZURITE="$ROOT/tests/node_modules/.bin/azurite"
AZURITE_DIR="$(mktemp -d -p "$WORK")"
AZURITE_LOG="$AZURITE_DIR/azurite.log"
# shellcheck source=tests/azurite.sh
source "$ROOT/tests/azurite.sh"
azurite_start >"$AZURITE_DIR/start.txt" || { cat "$AZURITE_DIR/start.txt" >&2; die "Azurite did not start"; }
sed 's/^/   /' "$AZURITE_DIR/start.txt"
export AZURE_STORAGE_CONNECTION_STRING="$ECW_TEST_CONNECTION_STRING"

# The administrator's two steps: the connection string into the environment
# file (appended: its mode stays), the jobs into the configuration. The chroot
# shares the host's network, so Azurite's 127.0.0.1 ports are reachable.
printf 'AZURE_STORAGE_CONNECTION_STRING=%s\n' "$ECW_TEST_CONNECTION_STRING" >>"$R$env_file"
cat >"$R$cfg_path" <<CFG
# deb-test.sh: the package's configuration replaced by a test one.
storage:
  connection_string: \${AZURE_STORAGE_CONNECTION_STRING}
worker: {queue: ecw-deb-test, concurrency: 4, visibility_timeout: 30s, shutdown_grace: ${GRACE}s,
         poll_interval: {min: 100ms, max: 500ms}}
log: {level: info, format: json}
metrics: {listen: "127.0.0.1:0"}
jobs:
  archive-employee: {type: move, from: Employees, to: EmployeesArchive}
CFG
cp "$R$env_file" "$WORK/env.before"
cp "$R$cfg_path" "$WORK/cfg.before"

# A reinstall (as an upgrade would) keeps both, and the file's mode.
apt_in_root "$WORK/apt-reinstall.log" install --reinstall "/tmp/$debname" || die "apt-get install --reinstall failed"
cmp -s "$R$env_file" "$WORK/env.before" || die "the reinstall changed the environment file"
cmp -s "$R$cfg_path" "$WORK/cfg.before" || die "the reinstall changed the configuration"
[[ "$(stat -c '%a %u:%g' "$R$env_file")" == "600 0:0" ]] || die "the environment file is $(stat -c '%a %u:%g' "$R$env_file") after the reinstall"
ok "reinstall: the environment file (still 600 root:root) and the configuration kept as edited"

# The packaged environment file has the ExecStartPre check storage too
# (ECW_CHECK_ONLINE=1): the job's source table must exist, and the worker
# never creates one, so it fails until the application made it.
grep -qx 'ECW_CHECK_ONLINE=1' "$R$env_file" || die "the environment file does not set ECW_CHECK_ONLINE=1"
if out="$(as_unit "${pre_cmd[@]}" 2>&1)"; then rc=0; else rc=$?; fi
[[ "$rc" == 1 ]] && grep -q "reads table 'Employees', which does not exist" <<<"$out" ||
	die "the ExecStartPre before the source table existed exited $rc: $out"
ok "ExecStartPre as $user, before the application made its table: exit 1 naming Employees"

node tests/image/entities.js seed Sales "deb 001" || die "could not write the employee with the SDK"
ok "the application wrote Employees(Sales, deb 001)"

out="$(as_unit "${pre_cmd[@]}" 2>&1)" || die "ExecStartPre ($pre) as $user failed: $out"
grep -q 'storage OK' <<<"$out" || die "the ExecStartPre did not check storage: $out"
ok "ExecStartPre as $user, online: $pre"

wait_log() { # FILE PATTERN SECONDS
	local i
	for ((i = 0; i < $3 * 10; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
log="$WORK/worker.log"
as_unit "${start_cmd[@]}" 2>"$log" &
worker=$!
bg_pids+=("$worker")
wait_log "$log" '"metrics_port"' 20 || { cat "$log" >&2; die "the worker did not start"; }
# chroot and setpriv exec: the background job is the worker itself.
[[ "$(cat "/proc/$worker/comm")" == ecworker ]] || die "process $worker is $(cat "/proc/$worker/comm"), not ecworker"
ids="$(awk '/^Uid:/ {u=$2} /^Gid:/ {g=$2} /^NoNewPrivs:/ {n=$2} END {print u, g, n}' "/proc/$worker/status")"
[[ "$ids" == "$uid $gid 1" ]] || die "the worker runs as uid gid nnp '$ids', not '$uid $gid 1'"
[[ "$(readlink "/proc/$worker/root")" == "$R" ]] || die "the worker's root is $(readlink "/proc/$worker/root")"
ok "ExecStart as $user (UID $uid, no new privileges) in the root filesystem: $start"

id="$(as_unit /usr/bin/ecworker enqueue -c "$cfg_path" archive-employee Sales "deb 001")" || die "ecworker enqueue failed"
ok "the installed ecworker enqueue: message $id"
wait_moved Sales "deb 001" "$log"
ok "the job ran: Employees(Sales, deb 001) moved to EmployeesArchive, identical"
grep -q 'Eby8vdM02x' "$log" && die "the account key appears in the worker's log"
ok "no account key in the log"

t0=$(date +%s%N)
kill -TERM "$worker"
if wait "$worker"; then rc=0; else rc=$?; fi
ms=$((($(date +%s%N) - t0) / 1000000))
bg_pids=()
[[ "$rc" == 0 ]] || { tail -n 20 "$log" >&2; die "exit status $rc after SIGTERM, not 0"; }
[[ "$ms" -le $(((GRACE + 5) * 1000)) ]] || die "took $ms ms to stop, over the ${GRACE}s grace"
grep -q '"stopped cleanly"' "$log" || die "no clean stop in the worker's log"
ok "SIGTERM -> exit 0 in $ms ms (grace ${GRACE}s)"
azurite_stop

# ---- 4. remove and purge ----------------------------------------------------------

say "remove and purge"
apt_in_root "$WORK/apt-remove.log" remove ecworker || die "apt-get remove ecworker failed"
[[ "$(in_root dpkg-query -W -f='${Status}' ecworker)" == "deinstall ok config-files" ]] ||
	die "after remove, dpkg says '$(in_root dpkg-query -W -f='${Status}' ecworker)'"
for f in /usr/bin/ecworker /usr/lib/systemd/system/ecworker.service /usr/lib/sysusers.d/ecworker.conf \
	/usr/share/man/man1/ecworker.1.gz; do
	[[ ! -e "$R$f" ]] || die "$f is left after remove"
done
[[ -z "$(find "$R/etc/systemd" "$R/usr/lib/systemd" -name 'ecworker*' 2>/dev/null)" ]] ||
	die "a unit or link is left after remove: $(find "$R/etc/systemd" "$R/usr/lib/systemd" -name 'ecworker*')"
cmp -s "$R$env_file" "$WORK/env.before" && cmp -s "$R$cfg_path" "$WORK/cfg.before" ||
	die "remove did not keep the configuration and the environment file"
ok "remove: program, unit and sysusers.d file gone; configuration and environment file kept"

apt_in_root "$WORK/apt-purge.log" purge ecworker || die "apt-get purge ecworker failed"
[[ ! -e "$R/etc/ecworker" ]] || die "/etc/ecworker is left after purge: $(ls -A "$R/etc/ecworker")"
status="$(in_root dpkg-query -W -f='${Status}' ecworker 2>/dev/null || true)"
[[ -z "$status" || "$status" == *" not-installed" ]] || die "after purge, dpkg says '$status'"
[[ -z "$(find "$R/var/lib/systemd" -name '*ecworker*' 2>/dev/null)" ]] ||
	die "deb-systemd-helper state left after purge: $(find "$R/var/lib/systemd" -name '*ecworker*')"
in_root getent passwd ecworker >/dev/null || die "purge removed the user ecworker (Debian packages keep it)"
ok "purge: /etc/ecworker and every trace in dpkg and systemd's state gone (the user stays, as in Debian)"

unmount_all
elapsed=$(($(date +%s) - started))
echo "deb-test: ${elapsed} s"
checks_done
