"""``writerlock.postgres.connect`` over TLS, against a real server that admits TCP sessions
only over TLS: started for this module by ``tests/pg-tls-cluster.sh``, with a certificate
authority and certificates made by ``openssl`` for this run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

from writerlock import postgres

SCRIPT = Path(__file__).resolve().parents[2] / "tests" / "pg-tls-cluster.sh"


class TlsServer(NamedTuple):
    port: int
    certs: Path


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    # Not below pytest's own temporary directory: the server's user must reach the cluster.
    cluster = Path(tempfile.mkdtemp(prefix="writerlock-tls.")) / "cluster"
    cluster.parent.chmod(0o755)
    out = subprocess.run(
        [str(SCRIPT), "start", str(cluster)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, f"the TLS cluster did not start: {out.stdout}{out.stderr}"
    port = next(
        int(line.split("=", 1)[1]) for line in out.stdout.splitlines() if line.startswith("TLS_PG_PORT=")
    )
    try:
        yield TlsServer(port, cluster / "certs")
    finally:
        subprocess.run([str(SCRIPT), "stop", str(cluster)], capture_output=True, check=False)
        shutil.rmtree(cluster.parent, ignore_errors=True)


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ~/.postgresql files and no PGSSL* variables of the runner's own."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGSSLCRL", "PGSSLSNI"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def encrypted(conn: postgres.Connection) -> bool:
    row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    assert row is not None
    return bool(row[0])


def test_tls_verify_full_connects_and_writes(tls_server: TlsServer, empty_home: Path) -> None:
    url = (
        f"postgresql://postgres@localhost:{tls_server.port}/postgres"
        f"?sslmode=verify-full&sslrootcert={tls_server.certs / 'ca.crt'}"
    )
    conn = postgres.connect(url)
    try:
        assert encrypted(conn)
        with conn.write():
            conn.execute("CREATE TABLE IF NOT EXISTS tls_note (n int)")
            conn.execute("INSERT INTO tls_note VALUES (?)", (1,))
        assert conn.execute("SELECT count(*) FROM tls_note").fetchone()[0] >= 1
    finally:
        conn.close()


def test_tls_client_certificate_and_channel_binding(
    tls_server: TlsServer, empty_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    certs = tls_server.certs
    monkeypatch.setenv("PGSSLMODE", "verify-full")
    monkeypatch.setenv("PGSSLROOTCERT", str(certs / "ca.crt"))
    monkeypatch.setenv("PGSSLCERT", str(certs / "client.crt"))
    monkeypatch.setenv("PGSSLKEY", str(certs / "client.key"))
    conn = postgres.connect(f"host=localhost port={tls_server.port} user=tls_cert_user dbname=postgres")
    try:
        assert conn.execute("SELECT current_user::text").fetchone()[0] == "tls_cert_user"
    finally:
        conn.close()
    conn = postgres.connect(
        f"host=localhost port={tls_server.port} user=tls_scram_user password=tls-scram-pw "
        "dbname=postgres channel_binding=require"
    )
    try:
        assert encrypted(conn)
        assert conn.execute("SELECT current_user::text").fetchone()[0] == "tls_scram_user"
    finally:
        conn.close()


def test_tls_refusals_name_the_cause(tls_server: TlsServer, empty_home: Path) -> None:
    base = f"host=localhost port={tls_server.port} user=postgres dbname=postgres"
    with pytest.raises(postgres.ConnectError) as info:
        postgres.connect(f"{base} sslmode=verify-full sslrootcert={tls_server.certs / 'other-ca.crt'}")
    assert "server certificate not verified" in str(info.value)
    assert "sslrootcert" in str(info.value)
    with pytest.raises(postgres.ConnectError) as info:
        postgres.connect(
            f"host=db.invalid hostaddr=127.0.0.1 port={tls_server.port} user=postgres "
            f"dbname=postgres sslmode=verify-full sslrootcert={tls_server.certs / 'ca.crt'}"
        )
    assert "host name mismatch" in str(info.value)
    with pytest.raises(postgres.ConnectError) as info:
        postgres.connect(f"{base} sslmode=disable")
    assert "instead of disable" in str(info.value)


def test_tls_uses_the_one_system_libssl(tls_server: TlsServer, empty_home: Path) -> None:
    # A fresh interpreter with Python's ssl loaded and a TLS session open: /proc/self/maps
    # must list one libssl and one libcrypto, the system's, shared by both.
    url = (
        f"postgresql://postgres@localhost:{tls_server.port}/postgres"
        f"?sslmode=verify-full&sslrootcert={tls_server.certs / 'ca.crt'}"
    )
    code = (
        "import os, ssl, sys\n"
        "from writerlock import postgres\n"
        "conn = postgres.connect(sys.argv[1])\n"
        "conn.execute('SELECT 1')\n"
        "with open('/proc/self/maps') as maps:\n"
        "    paths = {l.split()[5] for l in maps if len(l.split()) >= 6}\n"
        "for p in sorted(paths):\n"
        "    name = os.path.basename(p)\n"
        "    if name.startswith(('libssl', 'libcrypto')):\n"
        "        print(p)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    libs = out.stdout.split()
    ssl_libs = [p for p in libs if os.path.basename(p).startswith("libssl")]
    crypto_libs = [p for p in libs if os.path.basename(p).startswith("libcrypto")]
    assert len(ssl_libs) == 1 and len(crypto_libs) == 1, libs
    assert all(p.startswith(("/usr/lib", "/lib")) for p in libs), libs
