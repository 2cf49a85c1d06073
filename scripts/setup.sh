#!/usr/bin/env bash
# Installs everything mm2-assets needs on a fresh machine: a virtualenv in .venv with the
# package and its dev tools, the pinned Apache Kafka jars and the class archives of the Kafka
# JVMs and the Spark driver (all cached in ~/.cache/mm2-assets).
# Re-running is cheap: the install is skipped while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11+ is required (found $("$PYTHON" --version 2>&1))" >&2; exit 1; }
command -v java >/dev/null 2>&1 || { echo "setup: java (17+) is required: apt-get install openjdk-17-jre-headless" >&2; exit 1; }
command -v mvn >/dev/null 2>&1 || { echo "setup: mvn is required to fetch Kafka: apt-get install maven" >&2; exit 1; }
# PostgreSQL's server binaries, for Dagster's production storage (`mm2-assets postgres up`
# and its tests); never started as a system service.
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; } \
      || { echo "setup: apt-get install -y postgresql failed (see above)" >&2; exit 1; }
  else
    echo "setup: PostgreSQL's server is required: apt-get install -y postgresql (as root)" >&2; exit 1
  fi
fi

# The browser tests of the Dagster UI drive Debian's chromium (never a downloaded browser).
if [[ ! -x /usr/bin/chromium ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y chromium >/dev/null || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; } \
      || { echo "setup: installing chromium with apt-get failed" >&2; exit 1; }
  else
    echo "setup: /usr/bin/chromium is required for the UI tests: apt-get install chromium (as root)" >&2
    exit 1
  fi
fi

# uv installs the wheels: from its cache (~/.cache/uv) it hard-links a whole environment in about
# a second, where pip unpacks every wheel again (18 s on a fresh clone). Pinned, and fetched once
# per machine with the interpreter's own pip.
UV_VERSION=0.13.9
cache=${MM2_ASSETS_CACHE:-$HOME/.cache/mm2-assets}
uv_home=$cache/uv-$UV_VERSION
uv=$uv_home/bin/uv
if [[ ! -x $uv ]]; then
  rm -rf "$uv_home.tmp"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$uv_home.tmp" "uv==$UV_VERSION" \
    || { echo "setup: could not install uv $UV_VERSION from PyPI (see above)" >&2; exit 1; }
  rm -rf "$uv_home" && mv "$uv_home.tmp" "$uv_home"
fi
export UV_PYTHON_DOWNLOADS=never  # this machine's Python, never a downloaded one
[[ -x .venv/bin/python ]] || "$uv" venv --quiet --seed --python "$(command -v "$PYTHON")" .venv
stamp=.venv/.mm2-assets-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  # Offline first: what the cache holds satisfies pyproject.toml on every machine that installed
  # once (and spares the index's revalidation, which rebuilds pyspark's sdist each time).
  "$uv" pip install --quiet --offline --python .venv/bin/python -e '.[dev]' 2>/dev/null \
    || "$uv" pip install --quiet --python .venv/bin/python -e '.[dev]'
fi
# The Spark driver's class archive (halves local SparkSession start-up), when there is none this
# virtualenv's jar files can use (the clones uv links from its cache share one while the clone it
# was made in is there). Making one takes about 20 s, its JVM mostly on one core, so it runs
# beside the byte compile and the Kafka steps below.
# In a process group of its own (its leader's pid), so that a step failing below, Ctrl-C or
# SIGTERM stops all of it, the dumping JVM included: it must not outlive the script.
setsid .venv/bin/mm2-assets spark archive >/dev/null &
spark_archive=$!
# SIGKILL: a JVM stopped any other way first writes its half-made archive (seconds, 116 MB).
trap '[[ -z $spark_archive ]] || { kill -KILL -- "-$spark_archive" 2>/dev/null
  rm -f "$cache/spark-cds/"*".$spark_archive.partial"; }' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  # Byte-compiled on every core before any use: Dagster starts its run workers with -B, which
  # would otherwise compile on every start. Packages' own tests and examples, pip and setuptools
  # are never imported.
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  .venv/bin/python -m compileall -q -j 0 -x '/(tests?|examples)/|/site-packages/(pip|setuptools)/' \
    "$site" >/dev/null || true
  echo "$want" > "$stamp"
fi
# And this project's own modules, on every setup (up-to-date ones are skipped): an environment
# with PYTHONDONTWRITEBYTECODE set, and Dagster's -B, would otherwise compile them from source
# in every process that imports them.
.venv/bin/python -m compileall -q -j 0 mm2_assets mm2_assets_tests bench >/dev/null || true
.venv/bin/mm2-assets kafka fetch >/dev/null
# Once per machine: the Kafka JVMs' class archive (a local broker starts on 0.6 of the CPU).
.venv/bin/mm2-assets kafka archive >/dev/null \
  || echo "setup: warning: no Kafka class archive (local brokers start ~1 s slower)" >&2
wait "$spark_archive" \
  || echo "setup: warning: no Spark class archive (local Spark starts ~3 s slower)" >&2
spark_archive=
