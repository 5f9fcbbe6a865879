#!/usr/bin/env bash
# A throwaway PostgreSQL cluster that speaks TLS only, for the TLS tests.
#
#   tests/pg-tls-cluster.sh start DIR [ENV_FILE]
#       Makes, with openssl, a certificate authority and a server certificate for
#       localhost and 127.0.0.1 (DIR/certs/ca.crt, server.crt), a second authority that
#       signed nothing the server has (other-ca.crt), and a client certificate for the user
#       tls_cert_user (client.crt, client.key, and client-encrypted.key with the passphrase
#       tls-key-pass), and two revocation lists of the CA (empty.crl revokes nothing,
#       revoked.crl the server's certificate); then starts a cluster (tests/pg-cluster.sh)
#       with ssl = on and a pg_hba.conf that admits TCP sessions only over TLS: tls_cert_user
#       by its client certificate (cert), tls_scram_user by its password (scram-sha-256,
#       password tls-scram-pw), everyone else trusted; the one exception, tls_plain_user, is
#       admitted only without TLS (hostnossl), for the fallback of sslmode=prefer. Prints (and with ENV_FILE writes as
#       `export` lines)
#           TLS_PG_PORT=PORT
#           TLS_PG_DIR=DIR
#           TLS_CERT_DIR=DIR/certs
#       The directories above DIR must be reachable by the server's user (postgres when run
#       as root).
#   tests/pg-tls-cluster.sh restart DIR [MODE]
#       Restarts the server (pg_ctl restart -m MODE, default fast) on the same port.
#   tests/pg-tls-cluster.sh stop DIR
#       Stops the cluster and removes DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

as_server() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

make_certs() {
    local certs="$1"
    mkdir -p "$certs"
    cd "$certs"
    local days=3
    openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=writerlock test CA" \
        -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=writerlock other CA" \
        -keyout other-ca.key -out other-ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days "$days" -extfile server.ext -out server.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=tls_cert_user" \
        -keyout client.key -out client.csr 2>/dev/null
    openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days "$days" -out client.crt 2>/dev/null
    # The client key again, encrypted with the passphrase tls-key-pass (sslpassword).
    openssl pkey -in client.key -aes256 -passout pass:tls-key-pass -out client-encrypted.key
    # Revocation lists of the CA: one revoking nothing, one revoking the server's certificate.
    printf '[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = %s\n' \
        "$days" >ca.cnf
    : >index.txt
    echo 01 >crlnumber
    openssl ca -batch -config ca.cnf -keyfile ca.key -cert ca.crt -gencrl -out empty.crl 2>/dev/null
    openssl ca -batch -config ca.cnf -keyfile ca.key -cert ca.crt -revoke server.crt 2>/dev/null
    openssl ca -batch -config ca.cnf -keyfile ca.key -cert ca.crt -gencrl -out revoked.crl 2>/dev/null
    chmod 600 ./*.key
    cd - >/dev/null
}

start() {
    local dir="${1:?usage: $0 start DIR [ENV_FILE]}" env_file="${2:-}"
    mkdir -p "$dir"
    chmod 755 "$dir" # the server's user reaches its cluster below it
    make_certs "$dir/certs"
    local out port pg_dir
    out="$("$here/pg-cluster.sh" start "$dir/pg")"
    port="${out##*127.0.0.1:}"
    port="${port%%/*}"
    pg_dir="$dir/pg"
    # The server's copies, owned by the server's user (it refuses a key others can read).
    cp "$dir/certs/server.crt" "$dir/certs/server.key" "$dir/certs/ca.crt" "$pg_dir/data/"
    if [[ "$(id -u)" == 0 ]]; then
        chown postgres:postgres "$pg_dir/data/server.crt" "$pg_dir/data/server.key" \
            "$pg_dir/data/ca.crt"
    fi
    chmod 600 "$pg_dir/data/server.key"
    cat >>"$pg_dir/data/postgresql.conf" <<'CONF'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'
password_encryption = 'scram-sha-256'
CONF
    cat >"$pg_dir/data/pg_hba.conf" <<'HBA'
local   all all                         trust
hostssl all tls_cert_user  127.0.0.1/32 cert
hostssl all tls_cert_user  ::1/128      cert
hostssl all tls_scram_user 127.0.0.1/32 scram-sha-256
hostssl all tls_scram_user ::1/128      scram-sha-256
hostssl all tls_plain_user 127.0.0.1/32 reject
hostssl all tls_plain_user ::1/128      reject
hostnossl all tls_plain_user 127.0.0.1/32 trust
hostnossl all tls_plain_user ::1/128    trust
hostssl all all            127.0.0.1/32 trust
hostssl all all            ::1/128      trust
HBA
    local pg_bin
    pg_bin="$(pg_bin)"
    as_server "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 30 \
        -o "-p $port -k $pg_dir/sock -c listen_addresses=127.0.0.1" restart >/dev/null
    as_server "$pg_bin/psql" -X -q -h "$pg_dir/sock" -p "$port" -U postgres -d postgres \
        -v ON_ERROR_STOP=1 <<'SQL' >/dev/null
CREATE ROLE tls_cert_user LOGIN SUPERUSER;
CREATE ROLE tls_scram_user LOGIN SUPERUSER PASSWORD 'tls-scram-pw';
CREATE ROLE tls_plain_user LOGIN SUPERUSER;
SQL
    printf 'TLS_PG_PORT=%s\nTLS_PG_DIR=%s\nTLS_CERT_DIR=%s\n' "$port" "$dir" "$dir/certs"
    if [[ -n "$env_file" ]]; then
        printf 'export TLS_PG_PORT=%s\nexport TLS_PG_DIR=%s\nexport TLS_CERT_DIR=%s\n' \
            "$port" "$dir" "$dir/certs" >"$env_file"
    fi
}

pg_bin() {
    local pg_bin="${PG_BIN:-}"
    if [[ -z "$pg_bin" ]]; then
        for candidate in /usr/lib/postgresql/*/bin; do
            [[ -x "$candidate/pg_ctl" ]] && pg_bin="$candidate"
        done
    fi
    echo "$pg_bin"
}

restart() {
    local dir="${1:?usage: $0 restart DIR [MODE]}"
    "$here/pg-cluster.sh" restart "$dir/pg" "${2:-fast}"
}

stop() {
    local dir="${1:?usage: $0 stop DIR}"
    if [[ -d "$dir/pg" ]]; then
        "$here/pg-cluster.sh" stop "$dir/pg" || true
    fi
    if [[ -d "$dir/certs" && ! -e "$dir/pg" ]]; then
        rm -rf "$dir"
    fi
}

case "${1:-}" in
start) shift; start "$@" ;;
restart) shift; restart "$@" ;;
stop) shift; stop "$@" ;;
*)
    echo "usage: $0 start DIR [ENV_FILE] | restart DIR [MODE] | stop DIR" >&2
    exit 2
    ;;
esac
