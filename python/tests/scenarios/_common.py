"""Helpers of the background scenarios: a database of their own, and the result line."""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from typing import Any, Dict

from writerlock import postgres


def admin_url() -> str:
    url = os.environ.get("TEST_DATABASE_URL", "").strip()
    if not url:
        sys.exit("TEST_DATABASE_URL is not set; run `make test`")
    return url


def create_database(tag: str) -> str:
    """Creates a fresh database and returns its URL."""
    admin = admin_url()
    name = f"wlpy_{tag}_{os.getpid()}"
    conn = postgres.connect(admin, autocommit=True)
    try:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    finally:
        conn.close()
    parts = urllib.parse.urlsplit(admin)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def drop_database(url: str) -> None:
    name = urllib.parse.urlsplit(url).path.lstrip("/")
    conn = postgres.connect(admin_url(), autocommit=True)
    try:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        conn.close()


def report(result: Dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)
