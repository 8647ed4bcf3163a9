#!/usr/bin/env bash
# install-kafka-deps.sh: prepares a machine for the real-Kafka tests
# (internal/kafkatest). Idempotent; CI runs it before the test suite.
#
# 1. Installs a JDK 17+ (java and javac), Maven and an MIT Kerberos KDC
#    (krb5-kdc, krb5-admin-server, krb5-user, for the GSSAPI tests) with
#    apt-get when missing (as root, or with sudo; noninteractive).
# 2. Resolves the Apache Kafka 4.4.0 jars and Byte Buddy into the harness
#    cache ($LONGHAUL_KAFKA_CACHE, default $HOME/.cache/longhaul/kafka-4.4.0),
#    and builds the KIP-1269 agent jar there, and resolves the jars of every
#    other release of the compatibility matrix (2.4.1 and 2.8.2 with their
#    ZooKeeper, 3.9.1, 4.0.1) into its releases/<version> subdirectories, so
#    that go test does not spend its timeout on Maven or javac. The other
#    releases add about 3 minutes on a cold Maven repository (measured 3m10s
#    on 2 loaded cores; seconds once cached) and about 290 MiB of disk (160
#    MiB of jars in the cache, 130 MiB in ~/.m2).
#
# Usage: scripts/install-kafka-deps.sh
set -euo pipefail

cd "$(dirname "$0")/.."

# java_major prints the major version of the java on PATH, or 0.
java_major() {
	command -v java >/dev/null 2>&1 || { echo 0; return; }
	local v
	v=$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)
	case "$v" in
	1.*) echo "$v" | cut -d. -f2 ;;
	"") echo 0 ;;
	*) echo "$v" | cut -d. -f1 | cut -d- -f1 ;;
	esac
}

need=()
# javac builds the KIP-1269 agent (internal/kafkatest/kip1269agent).
if [ "$(java_major)" -lt 17 ] || ! command -v javac >/dev/null 2>&1; then need+=(java); fi
if ! command -v mvn >/dev/null 2>&1; then need+=(maven); fi
# An MIT Kerberos KDC for the GSSAPI tests (producer/plugin/lhkrb5,
# scripts/start-kdc.sh).
if ! command -v krb5kdc >/dev/null 2>&1 && ! [ -x /usr/sbin/krb5kdc ]; then need+=(kerberos); fi

if [ ${#need[@]} -gt 0 ]; then
	echo "install-kafka-deps: missing: ${need[*]}"
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "install-kafka-deps: no apt-get here; install Java 17+ and Maven by hand" >&2
		exit 1
	fi
	SUDO=""
	if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -q
	pkgs=()
	for n in "${need[@]}"; do
		case "$n" in
		java)
			# The oldest supported JDK the distribution ships.
			for v in 17 21 25; do
				if apt-cache show "openjdk-$v-jdk-headless" >/dev/null 2>&1; then
					pkgs+=("openjdk-$v-jdk-headless")
					break
				fi
			done
			;;
		maven) pkgs+=(maven) ;;
		kerberos) pkgs+=(krb5-kdc krb5-admin-server krb5-user) ;;
		esac
	done
	$SUDO apt-get install -y -q --no-install-recommends "${pkgs[@]}"
	if [ "$(java_major)" -lt 17 ] || ! command -v javac >/dev/null 2>&1; then
		echo "install-kafka-deps: java on PATH is still older than 17, or javac is missing" >&2
		exit 1
	fi
fi

echo "install-kafka-deps: $(java -version 2>&1 | head -n1); $(mvn -v 2>/dev/null | head -n1 | sed 's/\x1b\[[0-9;]*m//g')"
go run ./internal/kafkatest/cmd/kafkajars
go run ./internal/kafkatest/cmd/kip1269agent
