#!/usr/bin/env bash
# libc.sh: the guest C library (musl's printf, strtod, qsort, setjmp, math; the runtime's stdio, errno, files, locale) in real sandboxes on each backend, against the host's C library (TAP).
set -u
S=${STRATA_BIN:?} B=${STRATA_BUILD:?}
T=$(mktemp -d /tmp/strata-e2e-libc.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0
fails=0
echo "1..24"
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
G=$B/vmm/guest/libcguest.elf
H=$B/tests/e2e/libc_host
st() { "$S" --store "$T/store" "$@"; }
st init >/dev/null

# Formats and values: every float conversion, flags, precisions, and the
# numbers where formatting is hard (subnormals, halfway cases, infinities).
formats=('%g' '%f' '%e' '%a' '%.17g' '%.0f' '%.3e' '%+012.4f' '%#g' '%-10.2e|' '%.30f' '%A' '%G' '%.0e' '%10.3a')
values=(0 -0 0.1 1 -1.5 2.5 0.5 1e-300 4.9e-324 2.2250738585072014e-308 1.7976931348623157e308
	123456789.125 1e22 1e23 0.000123456 3.141592653589793 -2.718281828459045 1e100 inf -inf nan 9007199254740993)
fmt_all() {  # every (format, value): the guest's snprintf against the host's printf
	local be=$1 f v got want total=0
	for f in "${formats[@]}"; do
		for v in "${values[@]}"; do
			# %a of a subnormal: C lets the leading hex digit be chosen
			# (glibc prints 0x0.0000000000001p-1022, musl 0x1p-1074).
			case "$f:$v" in *[aA]:4.9e-324) continue ;; esac
			total=$((total + 1))
			# A leading space (strtod skips it) keeps "-inf" from being an option.
			got=$(st run "$G" --backend "$be" --call fmt "$f" " $v" 2>&1) || { echo "fmt '$f' $v: $got"; return 1; }
			want=$("$H" fmt "$f" "$v")
			[ "$got" = "$want" ] || { echo "fmt '$f' $v: guest '$got' host '$want'"; return 1; }
		done
	done
	echo "all $total agree"
}
roundtrip_all() {  # strtod then %.17g then strtod gives the same double, as text the host agrees with
	local be=$1 v got want
	for v in 0.1 1e-310 5e-324 1.7976931348623157e308 0.30000000000000004 123.456e-78 0x1.8p3 -7e22 2.4703282292062327e-324 9007199254740993; do
		got=$(st run "$G" --backend "$be" --call roundtrip " $v" 2>&1)
		want="$("$H" fmt '%.17g' "$v") same"
		[ "$got" = "$want" ] || { echo "roundtrip $v: guest '$got' want '$want'"; return 1; }
	done
	echo "all round trips agree"
}
math_all() {  # libm functions within two units in the last place of glibc's
	local be=$1 f x got
	for f in sin cos tan exp log log10 sqrt atan cbrt floor ceil tanh erf; do
		for x in 0.5 1.5 -2.25 10 100.125 1e-5; do
			case $f in log|log10|sqrt) x=${x#-} ;; esac
			got=$(st run "$G" --backend "$be" --call math "$f" " $x" 2>&1) || { echo "math $f $x: $got"; return 1; }
			"$H" math "$f" "$x" "$got" >/dev/null || { "$H" math "$f" "$x" "$got"; return 1; }
		done
	done
	echo "all math agrees"
}

when_all() {  # gmtime + asctime against date(1) in UTC; mktime and timegm give the seconds back
	local be=$1 t got want
	for t in 0 86399 951782400 1700000000 2147483648 -86400 4102444800; do
		got=$(st run "$G" --backend "$be" --call when " $t" 2>&1)
		want="$(TZ=UTC date -d "@$t" '+%a %b %e %T %Y')|$t|$t|UTC"
		[ "$got" = "$want" ] || { echo "when $t: guest '$got' want '$want'"; return 1; }
	done
	echo "all times agree"
}

# Every conversion of C's strftime (and the E/O modifiers, ignored in the C
# locale) at times around each new year, where the ISO week (%G %V) turns.
strf_fmt='%a %A %b %B %c|%C %d %D %e %F %g %G %h %H %I %j %m %M %p %r %R %s %S %T %u %U %V %w %W %x %X %y %Y %z %Z %% %Ey %OH'
strf_all() {  # the guest's strftime against date(1)'s (glibc's) in UTC and the C locale
	local be=$1 y d t got want total=0
	for y in 1970 1998 1999 2000 2003 2004 2008 2009 2010 2015 2016 2020 2021 2026 2027 2032 2037; do
		for d in "$((y - 1))-12-28" "$((y - 1))-12-31" "$y-01-01" "$y-01-03" "$y-01-04" "$y-02-29" "$y-06-15"; do
			t=$(TZ=UTC date -d "$d 13:05:09" +%s 2>/dev/null) || continue  # no Feb 29
			total=$((total + 1))
			got=$(st run "$G" --backend "$be" --call strf "$strf_fmt" " $t" 2>&1)
			want=$(LC_ALL=C TZ=UTC date -d "@$t" "+$strf_fmt")
			[ "$got" = "$want" ] || { echo "strftime at $t: guest '$got' date '$want'"; return 1; }
		done
	done
	echo "all $total times agree"
}

kvm_why=
kvm_unusable && kvm_why=$KVM_WHY
for be in process kvm; do
	SANDBOX_WHY=
	[ "$be" = kvm ] && SANDBOX_WHY=$kvm_why
	check_kvm "$be: snprintf's float conversions (%f %e %g %a, flags, precision) match the host's printf" 0 \
		'^all [0-9]+ agree$' -- fmt_all "$be"
	check_kvm "$be: strtod and %.17g round-trip every double exactly, as the host's do" 0 '^all round trips agree$' -- \
		roundtrip_all "$be"
	check_kvm "$be: sin cos tan exp log log10 sqrt atan cbrt floor ceil tanh erf agree with the host's libm (within 2 ulp)" 0 \
		'^all math agrees$' -- math_all "$be"
	check_kvm "$be: gmtime, asctime, mktime and timegm agree with date(1) in UTC, the guest's only zone" 0 \
		'^all times agree$' -- when_all "$be"
	check_kvm "$be: strftime's every conversion agrees with date(1) in UTC around each new year" 0 \
		'^all [0-9]+ times agree$' -- strf_all "$be"
	check_kvm "$be: qsort sorts and bsearch finds every word" 0 '^apple banana cherry fig pear$' -- \
		st run "$G" --backend "$be" --call sort "pear fig apple cherry banana"
	check_kvm "$be: longjmp leaves 500 nested calls with setjmp's value" 0 '^42$' -- \
		st run "$G" --backend "$be" --call jump 500
	check_kvm "$be: fopen fails with ENOENT, the clock is the host's (run registers clock_gettime), the locale is C only" 0 \
		"^fopen=NULL errno=No such file or directory; clock_gettime=0 errno=[^;]*; time=[1-9][0-9]{9}; locale=C point='\\.' fr=NULL$" -- \
		st run "$G" --backend "$be" --call files
	check_kvm "$be: stdin is empty, stdout unseekable; no popen, dlopen, tmpfile, remove or environment" 0 \
		'^scanf=-1 getchar=-1 eof=1 fseek=-1\(Illegal seek\) popen=NULL\(Function not implemented\) dlopen=NULL\(a strata guest loads no shared objects\) tmpfile=NULL remove=-1 getenv=NULL$' -- \
		st run "$G" --backend "$be" --call streams
	check_kvm "$be: printf to stdout reaches the host log at info, a line a record, fflush sends a partial line" 0 \
		'^guest info: stdout: x1 2\.5$' -- st run "$G" --backend "$be" --call say "x1"
	check_kvm "$be: what a call leaves in stdout's buffer reaches the log when the call returns" 0 \
		'^guest info: no newline 5$' -- st run "$G" --backend "$be" --call partial
	check_kvm "$be: fprintf to stderr reaches the host log at warn; ctype classifies" 0 \
		'^guest warn: stderr: 1\.000000e-03$' -- sh -c "'$S' --store '$T/store' run '$G' --backend '$be' --call say 'Ab12c' 2>&1 |
		grep -x 'guest info: unterminated 7' >/dev/null && '$S' --store '$T/store' run '$G' --backend '$be' --call say 'Ab12c' 2>&1 |
		grep -q '^3 alpha 2 digit A' && '$S' --store '$T/store' run '$G' --backend '$be' --call say 'Ab12c' 2>&1 >/dev/null"
done
[ "$fails" -eq 0 ]
