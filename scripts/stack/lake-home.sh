# shellcheck shell=bash
# Sourced by scripts/spark-connect, scripts/lakehouse-jobs and scripts/quickstart: where the local
# stack's lake is. The example configs build storage URIs from this path ("file://"${LAKEHOUSE_LAKE_HOME}),
# and storage URIs are literal (no spaces, quotes or escapes), so the default must be a literal path:
# $CACHE/lake when it is one, else a folder of the user's cache keyed by the checkout's cache
# (a checkout under "My Projects/" still gets a lake of its own). LAKEHOUSE_LAKE_HOME, when set, wins.

# Letters, digits and _ - . = + @ ~ between slashes: what a storage URI's path may hold.
lakehouse_literal_path() { [[ "$1" =~ ^/[A-Za-z0-9_.=+@~/-]*$ && "$1" != *//* && "/$1/" != */../* && "/$1/" != */./* ]]; }

lakehouse_lake_home() {
  local cache="$1" home
  if [[ -n "${LAKEHOUSE_LAKE_HOME:-}" ]]; then echo "$LAKEHOUSE_LAKE_HOME"; return 0; fi
  if lakehouse_literal_path "$cache/lake"; then echo "$cache/lake"; return 0; fi
  home="${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/lakehouse-jobs/lake-$(printf '%s' "$cache" | sha256sum | cut -c1-16)"
  if lakehouse_literal_path "$home"; then echo "$home"; return 0; fi
  echo "the lake cannot live under $cache or $home (storage URIs allow letters, digits and _ - . = + @ ~ only):" \
    "set LAKEHOUSE_LAKE_HOME to such a path" >&2
  return 1
}
