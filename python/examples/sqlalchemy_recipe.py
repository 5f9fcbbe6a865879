import sqlalchemy
from sqlalchemy import event

import writerlock

engine = sqlalchemy.create_engine("sqlite:///app.db")
queue = writerlock.WriterQueue("app.db")


@event.listens_for(engine, "connect")
def autocommit(dbapi_conn, record):
    dbapi_conn.isolation_level = None        # SQLAlchemy's BEGIN comes from the event below


@event.listens_for(engine, "begin")
def begin_in_turn(conn):
    queue.acquire(wait=25.0)                 # the writer turn before BEGIN
    try:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    except BaseException:
        queue.release()
        raise


def end_turn(conn):                          # after SQLAlchemy's COMMIT or ROLLBACK
    if queue.holding and not conn.connection.driver_connection.in_transaction:
        queue.release()


@event.listens_for(engine, "commit")
def commit_in_turn(conn):
    conn.connection.driver_connection.commit()
    end_turn(conn)


@event.listens_for(engine, "rollback")
def rollback_in_turn(conn):
    conn.connection.driver_connection.rollback()
    end_turn(conn)


with engine.begin() as conn:                 # turn, BEGIN IMMEDIATE ... COMMIT, next writer
    conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS events (name TEXT)")
    conn.exec_driver_sql("INSERT INTO events VALUES ('from SQLAlchemy')")
print(queue.holding)                         # False: the turn went back after the COMMIT
