#!/usr/bin/env bash
# Makes sure a Java 17+ runtime is present (PySpark needs one); installs Debian's if missing.
set -euo pipefail
if command -v java >/dev/null 2>&1; then exit 0; fi
echo "java not found: installing openjdk-17-jre-headless" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jre-headless
