"""Stuart Bishop's DB-API 2.0 compliance suite (``dbapi20.py``, public domain, as psycopg 3
ships it in its tests) run against ``writerlock.postgres``, adapted only as psycopg's own
subclass adapts it: ``test_nextset`` (psycopg tests it elsewhere; this module has no
``nextset``) and ``test_setoutputsize`` (a no-op) are left out. Each run gets a database of
its own.
"""

from __future__ import annotations

from typing import Any, Dict

import dbapi20
from conftest import ScratchDatabase

from writerlock import postgres


class WriterlockPostgresTests(dbapi20.DatabaseAPI20Test):
    driver = postgres
    connect_args: Any = ()  # set in setUpClass
    connect_kw_args: Dict[Any, Any] = {}
    scratch: Any = None

    @classmethod
    def setUpClass(cls) -> None:
        cls.scratch = ScratchDatabase("dbapi20")
        cls.connect_args = (cls.scratch.url,)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.scratch.drop()

    def test_nextset(self) -> None:
        # tested elsewhere (as psycopg's subclass has it)
        pass

    def test_setoutputsize(self) -> None:
        # no-op
        pass
