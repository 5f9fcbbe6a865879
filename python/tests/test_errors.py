"""Every kind of the core's errors becomes a specific Python class through one table, and the
messages are the core's, in the Python API's words."""

from __future__ import annotations

from writerlock import _errors, _native, postgres

# The SQLite queue's table (python/src/errors.rs, queue_class), spelled out: a kind added in
# the core fails here until it is given its class.
QUEUE_CLASSES = {
    "busy": "writerlock.Busy",
    "interrupted": "sqlite3.OperationalError",
    "not_started": "writerlock.NotStarted",
    "sqlite": "sqlite3.Error",
    "lock_file": "sqlite3.OperationalError",
    "lock_file_access": "sqlite3.OperationalError",
    "unsafe_lock_file": "sqlite3.OperationalError",
    "flock": "sqlite3.OperationalError",
    "already_holding": "sqlite3.ProgrammingError",
    "held_through_another_handle": "sqlite3.ProgrammingError",
    "not_holding": "sqlite3.ProgrammingError",
    "in_transaction": "sqlite3.OperationalError",
    "wrong_database": "writerlock.WrongDatabase",
    "database_replaced": "writerlock.WrongDatabase",
    "invalid_argument": "ValueError",
}

# The classes only a few kinds may have: the driver's catch-all and the SQLSTATE's pick.
GENERIC = (postgres.InterfaceError, postgres.DatabaseError)


def test_every_queue_kind_has_its_class() -> None:
    assert _native.queue_error_classes() == QUEUE_CLASSES


def test_every_postgres_kind_has_a_specific_class() -> None:
    kinds = set(_native.PG_ERROR_KINDS)
    assert len(kinds) == len(_native.PG_ERROR_KINDS)
    assert set(_errors._BY_KIND) == kinds
    for kind in kinds:
        cls = _errors._BY_KIND[kind]
        if kind == "database":
            # A server error: its class follows its SQLSTATE.
            assert cls is None
            assert _errors.pg_error(kind, "m", "23505", {}).__class__ is postgres.IntegrityError
        elif kind in ("driver", "invalid_url"):
            assert cls is postgres.InterfaceError, kind
        else:
            assert cls is not None and cls not in GENERIC, kind
            err = _errors.pg_error(kind, "m", None, {})
            assert type(err) is cls, kind


def test_an_unknown_kind_is_not_made_generic() -> None:
    try:
        _errors.pg_error("no_such_kind", "m", None, {})
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown kind became an exception class")


def test_write_ended_texts_are_the_cores_in_pythons_words() -> None:
    assert _native.pg_write_ended_message(
        "its with block is over", "start a new one with conn.write()"
    ) == (
        "this write has already ended (its with block is over), so the statement was "
        "not run: a write's statements run only inside its own transaction, under "
        "the writer lock; start a new one with conn.write()"
    )
    assert _native.pg_write_ended_message(
        "its with block is over, or its transaction was committed or rolled back",
        "start a new one with write()",
    ) == (
        "this write has already ended (its with block is over, or its transaction "
        "was committed or rolled back), so the statement was not run: a write's "
        "statements run only inside its own transaction, under the writer lock; "
        "start a new one with write()"
    )
