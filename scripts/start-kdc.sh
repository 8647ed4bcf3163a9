#!/usr/bin/env bash
# Runs a throwaway MIT Kerberos KDC on loopback for the Kerberos (GSSAPI)
# tests: everything lives in DIR (configs, database, log), nothing on the
# system is touched. Needs the distribution's MIT Kerberos packages
# (Debian/Ubuntu: apt-get install -y krb5-kdc krb5-admin-server krb5-user).
#
#   scripts/start-kdc.sh DIR REALM PORT [MAX_LIFE] [MAX_RENEW]
#
# writes DIR/krb5.conf (clients: KRB5_CONFIG, or -Djava.security.krb5.conf
# for a JVM) and DIR/kdc.conf, creates the realm's database, then runs
# krb5kdc in the foreground on 127.0.0.1:PORT (UDP and TCP) until killed.
# MAX_LIFE and MAX_RENEW (MIT duration syntax, default 10h and 7d) bound
# every ticket's lifetime and renewable lifetime; set them short to test
# renewal. Add principals while it runs with
#
#   KRB5_CONFIG=DIR/krb5.conf KRB5_KDC_PROFILE=DIR/kdc.conf kadmin.local -q 'addprinc -pw secret alice'
#
# The harness (internal/kafkatest/kdc.go) runs this script.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 DIR REALM PORT [MAX_LIFE] [MAX_RENEW]" >&2
  exit 2
fi
dir=$1 realm=$2 port=$3 maxlife=${4:-10h} maxrenew=${5:-7d}
for tool in krb5kdc kdb5_util kadmin.local; do
  if ! command -v "$tool" >/dev/null && ! [ -x "/usr/sbin/$tool" ]; then
    echo "start-kdc: $tool not found: install MIT Kerberos (apt-get install -y krb5-kdc krb5-admin-server krb5-user)" >&2
    exit 3
  fi
done
export PATH="$PATH:/usr/sbin:/sbin"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

cat >"$dir/krb5.conf" <<EOF
[libdefaults]
	default_realm = $realm
	dns_lookup_kdc = false
	dns_lookup_realm = false
	rdns = false
	udp_preference_limit = 1
	ticket_lifetime = 24h
	renew_lifetime = 7d
	forwardable = true
	default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
	default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
	permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
	$realm = {
		kdc = 127.0.0.1:$port
		admin_server = 127.0.0.1:$port
	}

[domain_realm]
	localhost = $realm
EOF

cat >"$dir/kdc.conf" <<EOF
[kdcdefaults]
	kdc_listen = 127.0.0.1:$port
	kdc_tcp_listen = 127.0.0.1:$port

[realms]
	$realm = {
		database_name = $dir/principal
		key_stash_file = $dir/stash
		acl_file = $dir/kadm5.acl
		max_life = $maxlife
		max_renewable_life = $maxrenew
		supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
		default_principal_flags = +renewable, +preauth
	}

[logging]
	kdc = FILE:$dir/kdc.log
EOF
: >"$dir/kadm5.acl"

export KRB5_CONFIG="$dir/krb5.conf" KRB5_KDC_PROFILE="$dir/kdc.conf"
if ! [ -e "$dir/principal" ]; then
  kdb5_util create -s -r "$realm" -P "longhaul-test-master-$$" >"$dir/kdb5_util.log" 2>&1 ||
    { cat "$dir/kdb5_util.log" >&2; exit 1; }
fi
exec krb5kdc -n -r "$realm"
