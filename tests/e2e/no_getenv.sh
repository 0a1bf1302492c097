#!/bin/bash
# no_getenv.sh: the library reads no environment variable: no getenv, secure_getenv or environ under vmm/ store/ index/ fs/ (TAP).
set -u
SRC="${STRATA_SRC:?}"
T=$(mktemp -d /tmp/strata-e2e-env.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "1..2"

# Every C source and header of the library's modules; the CLI (mount/)
# reads the environment and passes configuration in. vmm/guest/ is guest
# code, run in the sandbox, not the library: its C library defines a
# getenv that finds nothing (a guest has no environment).
scan() {
	grep -rnE '(^|[^A-Za-z0-9_])((secure_)?getenv|environ|__environ|__secure_getenv)([^A-Za-z0-9_]|$)' \
		--include='*.c' --include='*.h' --exclude-dir=guest "$@"
}

# The pattern finds what it looks for (so the check below can fail).
mkdir -p "$T/probe"
printf 'static const char *f(void) { return getenv("X"); }\n' >"$T/probe/a.c"
printf 'extern char **environ;\n' >"$T/probe/b.h"
if [ "$(scan "$T/probe" | wc -l)" -eq 2 ]; then echo "ok 1 - the scan finds getenv and environ"
else echo "not ok 1 - the scan finds getenv and environ"; fi

if out=$(cd "$SRC" && scan vmm store index fs); then
	echo "not ok 2 - no environment variable is read under vmm/ store/ index/ fs/"
	echo "$out" | sed 's/^/# /'
	exit 1
fi
echo "ok 2 - no environment variable is read under vmm/ store/ index/ fs/"
