#!/bin/sh
# tls_check.sh PEM [-]: read-only, what the proxy's public frontend would refuse or serve badly in PEM (HAProxy's
# `bind ... ssl crt PEM`: the certificate, its chain and its private key in one file). With "-" the CA certificate(s)
# the collection's clients trust come on stdin and the certificate must verify against them. Prints one
# `problem: <what>` line per problem, then `ok: <subject> / <issuer> / <notAfter>` when none; exits 0 either way
# (roles/proxy/tasks/checks.yml reads the lines). Never prints the key.
pem=$1
ca=${2:-}
problems=0
problem() { printf 'problem: %s\n' "$*"; problems=$((problems + 1)); }

if [ ! -e "$pem" ]; then
  problem "there is no such file"
  exit 0
fi
if [ ! -f "$pem" ] || [ ! -r "$pem" ]; then
  problem "it is not a readable file"
  exit 0
fi
if ! command -v openssl >/dev/null 2>&1; then
  problem "openssl is not installed here to read it (apt-get install openssl)"
  exit 0
fi
if ! openssl x509 -in "$pem" -noout 2>/dev/null; then
  problem "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
  exit 0
fi
# -passin pass: an encrypted key fails here as HAProxy, with no passphrase to give, would fail.
if ! key=$(openssl pkey -in "$pem" -passin pass: -pubout 2>/dev/null); then
  problem "it holds no unencrypted private key (HAProxy reads the certificate and its key from the one file)"
elif [ "$key" != "$(openssl x509 -in "$pem" -noout -pubkey 2>/dev/null)" ]; then
  problem "its private key is not the key of its first certificate (the server certificate comes first)"
fi
if ! openssl x509 -in "$pem" -noout -checkend 0 >/dev/null 2>&1; then
  problem "its certificate has expired ($(openssl x509 -in "$pem" -noout -enddate 2>/dev/null))"
fi
if [ "$ca" = "-" ]; then
  # The intermediates the PEM carries are offered as untrusted; only the given CA is trusted.
  if ! verdict=$(openssl verify -CAfile /dev/stdin -purpose sslserver -untrusted "$pem" "$pem" 2>&1); then
    problem "it does not verify against proxy_tls_ca: $(printf '%s\n' "$verdict" | grep -m1 'error' || printf '%s' "$verdict" | tail -n 1)"
  fi
fi
if [ "$problems" -eq 0 ]; then
  printf 'ok: %s / %s / %s\n' "$(openssl x509 -in "$pem" -noout -subject 2>/dev/null)" \
    "$(openssl x509 -in "$pem" -noout -issuer 2>/dev/null)" "$(openssl x509 -in "$pem" -noout -enddate 2>/dev/null)"
fi
exit 0
