#!/usr/bin/env bash
# Writes the PKCS12 stores the keystore tests read, with the tools Java and
# OpenSSL users make them with: keytool's current and legacy formats and
# openssl's default and -legacy ones (RC2-40 and 3DES, SHA-1 MAC). Run it
# from this directory when a format is added; the files are committed so
# the tests need neither tool. Passwords: "changeit" for every store.
set -euo pipefail
cd "$(dirname "$0")"
rm -f ./*.p12 ./*.pem ./*.key
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A CA and a client certificate it signs (EC P-256, short-lived is fine:
# the tests check parsing and the key pair, not validity).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 36500 \
  -subj /CN=testca -keyout "$tmp/ca.key" -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=client \
  -keyout client.key -out "$tmp/client.csr" 2>/dev/null
openssl x509 -req -in "$tmp/client.csr" -CA ca.pem -CAkey "$tmp/ca.key" -CAcreateserial \
  -days 36500 -out client.pem 2>/dev/null

# OpenSSL 3 default (PBES2 AES-256-CBC, HMAC-SHA256 MAC) and legacy.
openssl pkcs12 -export -in client.pem -inkey client.key -certfile ca.pem -name client \
  -passout pass:changeit -out openssl-key.p12
openssl pkcs12 -export -legacy -in client.pem -inkey client.key -certfile ca.pem -name client \
  -passout pass:changeit -out openssl-legacy-key.p12
openssl pkcs12 -export -nokeys -in ca.pem -passout pass:changeit -out openssl-trust.p12
openssl pkcs12 -export -legacy -nokeys -in ca.pem -passout pass:changeit -out openssl-legacy-trust.p12
# Keys unencrypted inside, no MAC (openssl -keypbe NONE -certpbe NONE -nomac).
openssl pkcs12 -export -keypbe NONE -certpbe NONE -nomac -in client.pem -inkey client.key \
  -certfile ca.pem -passout pass: -out openssl-plain-key.p12

# keytool: import the openssl store into its own formats (current and
# -Dkeystore.pkcs12.legacy), and trust stores with the CA as a trusted entry.
keytool -importkeystore -srckeystore openssl-key.p12 -srcstoretype PKCS12 -srcstorepass changeit \
  -destkeystore keytool-key.p12 -deststoretype PKCS12 -deststorepass changeit -noprompt >/dev/null 2>&1
keytool -J-Dkeystore.pkcs12.legacy -importkeystore -srckeystore openssl-key.p12 -srcstoretype PKCS12 \
  -srcstorepass changeit -destkeystore keytool-legacy-key.p12 -deststoretype PKCS12 \
  -deststorepass changeit -noprompt >/dev/null 2>&1
keytool -importcert -alias ca -file ca.pem -keystore keytool-trust.p12 -storetype PKCS12 \
  -storepass changeit -noprompt >/dev/null 2>&1
keytool -J-Dkeystore.pkcs12.legacy -importcert -alias ca -file ca.pem -keystore keytool-legacy-trust.p12 \
  -storetype PKCS12 -storepass changeit -noprompt >/dev/null 2>&1
rm -f ca.srl
