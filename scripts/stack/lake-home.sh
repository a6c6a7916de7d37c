# shellcheck shell=bash
# Sourced by scripts/spark-connect, scripts/lakehouse-jobs and scripts/quickstart: where the local
# stack's lake is. The example configs build storage URIs from this path ("file://"${LAKEHOUSE_LAKE_HOME}),
# and storage URIs are literal (no spaces, quotes or escapes), so the default must be a literal path:
# $CACHE/lake when it is one, else a folder of the user's cache named by an id kept in $CACHE/lake-id
# (a checkout under "My Projects/" still gets a lake of its own). The id, not the checkout's path,
# names it: the spark_catalog metastore lives in $CACHE, so a lake must live and die with that
# cache; a fresh clone at a deleted checkout's path gets a new lake, never the old one's orphaned
# tables (which the location guard rightly refuses to adopt). LAKEHOUSE_LAKE_HOME, when set, wins.

# Letters, digits and _ - . = + @ ~ between slashes: what a storage URI's path may hold.
lakehouse_literal_path() { [[ "$1" =~ ^/[A-Za-z0-9_.=+@~/-]*$ && "$1" != *//* && "/$1/" != */../* && "/$1/" != */./* ]]; }

# The cache's lake id (16 hex digits), made once; two scripts starting at once agree (ln is atomic).
lakehouse_lake_id() {
  local cache="$1" tmp
  if [[ ! -s "$cache/lake-id" ]]; then
    mkdir -p "$cache" && tmp="$(mktemp "$cache/.lake-id.XXXXXX")" || return 1
    od -An -N8 -tx1 /dev/urandom | tr -d ' \n' >"$tmp"
    ln "$tmp" "$cache/lake-id" 2>/dev/null || true
    rm -f "$tmp"
  fi
  local id
  id="$(cat "$cache/lake-id")"
  [[ "$id" =~ ^[0-9a-f]{16}$ ]] || { echo "$cache/lake-id does not hold a lake id: remove it" >&2; return 1; }
  echo "$id"
}

lakehouse_lake_home() {
  local cache="$1" home
  if [[ -n "${LAKEHOUSE_LAKE_HOME:-}" ]]; then echo "$LAKEHOUSE_LAKE_HOME"; return 0; fi
  if lakehouse_literal_path "$cache/lake"; then echo "$cache/lake"; return 0; fi
  home="${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/lakehouse-jobs/lake-$(lakehouse_lake_id "$cache")" || return 1
  if lakehouse_literal_path "$home"; then echo "$home"; return 0; fi
  echo "the lake cannot live under $cache or $home (storage URIs allow letters, digits and _ - . = + @ ~ only):" \
    "set LAKEHOUSE_LAKE_HOME to such a path" >&2
  return 1
}
