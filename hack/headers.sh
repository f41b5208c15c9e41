#!/usr/bin/env bash
# License headers (hack/boilerplate.go.txt) on every Go file in git.
#   hack/headers.sh          list the files without one, and fail if there are any (make verify)
#   hack/headers.sh --fix    add it to them (make headers)
# Generated files get it from their generators (make generate passes the same file).
set -euo pipefail
cd "$(dirname "$0")/.."
header=hack/boilerplate.go.txt
missing=()
while IFS= read -r f; do
	[ -f "$f" ] || continue
	head -n 5 "$f" | grep -q "Copyright The Convoy Authors" || missing+=("$f")
done < <(git ls-files --cached --others --exclude-standard '*.go' | grep -v '^hack/tools/')
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "${1:-}" = "--fix" ]; then
	for f in "${missing[@]}"; do
		{ cat "$header"; echo; cat "$f"; } > "$f.tmp" && mv "$f.tmp" "$f"
	done
	exit 0
fi
echo "Go files without the license header of $header (run 'make headers'):"
printf '  %s\n' "${missing[@]}"
exit 1
