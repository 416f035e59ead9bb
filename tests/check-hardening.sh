#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-hardening.sh - fails when a program lacks a hardening property the
# Makefile's HARDEN_CFLAGS and HARDEN_LDFLAGS give it, so a flag cannot
# silently disappear (make check-hardening, in make test; make check-tests
# shows it failing on a program built with each flag left out).
#
#   tests/check-hardening.sh PROGRAM
#
# Reads PROGRAM with readelf (and objdump for one x86-64 case):
#   pie        ELF type DYN and DT_FLAGS_1 PIE          (-fPIE -pie)
#   bind-now   DT_FLAGS BIND_NOW or DT_FLAGS_1 NOW      (-z now)
#   relro      a GNU_RELRO segment                      (-z relro)
#   nx-stack   a GNU_STACK segment, not executable      (-z noexecstack)
#   canary     calls __stack_chk_fail                   (-fstack-protector-strong)
#   fortify    calls some __*_chk function of libc      (-D_FORTIFY_SOURCE)
#   cet        x86-64 only: the IBT, SHSTK property note (-fcf-protection).
#              The linker keeps the note only when every object has it, and
#              some C libraries' start files lack it (Debian 12's Scrt1.o,
#              crti.o): then main must at least begin with endbr64, which
#              only -fcf-protection puts there, and the line says so.
# Prints one line per property, then exits 0, or 1 naming what is missing;
# 2: usage, or PROGRAM is not an ELF file. (-fstack-clash-protection leaves
# nothing a reader of the binary can check reliably.)
set -euo pipefail

if [[ $# -ne 1 || ! -f "$1" ]]; then
	echo "usage: tests/check-hardening.sh PROGRAM" >&2
	exit 2
fi
prog="$1"
header="$(readelf -hW "$prog" 2>/dev/null)" || {
	echo "check-hardening: $prog is not an ELF file" >&2
	exit 2
}
dynamic="$(readelf -dW "$prog")"
segments="$(readelf -lW "$prog")"
symbols="$(readelf --dyn-syms -W "$prog")"

missing=()
have() { # NAME WHAT
	printf '  %-9s %s\n' "$1" "$2"
}
lack() { # NAME WHY
	printf '  %-9s MISSING: %s\n' "$1" "$2"
	missing+=("$1")
}

if grep -qE '^ *Type: *DYN' <<<"$header" && grep -qE '\(FLAGS_1\).*\bPIE\b' <<<"$dynamic"; then
	have pie "position-independent executable"
else
	lack pie "not a PIE (ELF type DYN with DT_FLAGS_1 PIE): build with -fPIE, link with -pie"
fi
if grep -qE '\(FLAGS\).*\bBIND_NOW\b|\(FLAGS_1\).*\bNOW\b' <<<"$dynamic"; then
	have bind-now "symbols bound at start"
else
	lack bind-now "no BIND_NOW: link with -Wl,-z,now"
fi
if grep -qE '^ *GNU_RELRO ' <<<"$segments"; then
	have relro "relocations read-only after start"
else
	lack relro "no GNU_RELRO segment: link with -Wl,-z,relro"
fi
stack="$(grep -E '^ *GNU_STACK ' <<<"$segments" || true)"
if [[ -n "$stack" && ! "$stack" =~ RWE ]]; then
	have nx-stack "stack not executable"
else
	lack nx-stack "no GNU_STACK segment, or an executable one: link with -Wl,-z,noexecstack"
fi
if grep -qE '\b__stack_chk_fail\b' <<<"$symbols"; then
	have canary "stack protector (__stack_chk_fail)"
else
	lack canary "no call to __stack_chk_fail: compile with -fstack-protector-strong"
fi
fortified="$(grep -oE '\b__[a-z0-9_]+_chk\b' <<<"$symbols" | grep -v '^__stack_chk' | sort -u || true)"
if [[ -n "$fortified" ]]; then
	have fortify "$(wc -l <<<"$fortified") fortified libc functions ($(head -3 <<<"$fortified" | paste -sd ' ') ...)"
else
	lack fortify "no __*_chk call: compile with -O1 or more and -D_FORTIFY_SOURCE"
fi
if grep -qE '^ *Machine: .*X86-64' <<<"$header"; then
	if readelf -nW "$prog" | grep -qE 'x86 feature: .*IBT.*SHSTK'; then
		have cet "IBT and SHSTK property note"
	elif objdump -d --disassemble=main "$prog" 2>/dev/null | grep -A2 '<main>:' | grep -q endbr64; then
		have cet "main begins with endbr64 (no IBT, SHSTK note: an object linked in lacks it, as Debian 12's C start files do)"
	else
		lack cet "no IBT, SHSTK note and main does not begin with endbr64: compile with -fcf-protection"
	fi
fi

if ((${#missing[@]})); then
	echo "check-hardening: $prog lacks: ${missing[*]}" >&2
	exit 1
fi
echo "==== hardening: $prog has every property checked"
