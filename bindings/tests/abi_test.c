/*
 * The C ABI of writerlock, exercised from C against the installed header and
 * library, with real processes and (when TEST_DATABASE_URL is set) a real
 * PostgreSQL server. bindings/tests/run.sh builds it with pkg-config and runs
 * it under valgrind.
 *
 * usage: abi_test [NAME-SUBSTRING]   (runs the tests whose name contains it)
 *
 * Prints one line per test (`test NAME ... ok` / `FAILED`) and a closing
 * `N passed, N failed` line; exits non-zero when a test failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <writerlock.h>
#include <sqlite3.h>

#include "abi_helpers.h"

/* Under valgrind a process that execs another program leaves a log without a summary
 * (valgrind follows no exec'd program): bindings/tests/run.sh accepts such a log for the
 * pids listed, one a line, in the file WL_ABI_EXEC_PIDS names. */
static void note_exec_pid(pid_t pid) {
    const char *list = getenv("WL_ABI_EXEC_PIDS");
    if (!list || !*list) return;
    FILE *f = fopen(list, "a");
    if (!f) return;
    fprintf(f, "%d\n", (int)pid);
    fclose(f);
}

static int lock_file_is_held(const char *lock);

/* ------------------------------------------------------------------------ */
/* The SQLite queue                                                          */
/* ------------------------------------------------------------------------ */

/* The number after `after` in `msg` (-1 when there is none). */
static double number_after(const char *msg, const char *after) {
    const char *at = msg ? strstr(msg, after) : NULL;
    if (!at) return -1.0;
    char *end = NULL;
    double v = strtod(at + strlen(after), &end);
    return end == at + strlen(after) ? -1.0 : v;
}

/* Checks that the last error is the exact busy message `format` with the waited seconds
 * (its one %.1f) as the message gives them, that they lie in [lo, hi], and that they agree
 * with the error's waited field; returns them. */
static double check_busy_sentence(const char *format, double lo, double hi) {
    char got[1024], want[1024];
    snprintf(got, sizeof got, "%s", last_message());
    double waited = number_after(got, "waited ");
    snprintf(want, sizeof want, format, waited);
    CHECK_STR(got, want);
    CHECK(waited >= lo && waited <= hi, "waited %.1f s, expected between %.1f and %.1f", waited,
          lo, hi);
    wl_error *err = wl_last_error();
    CHECK(err && fabs(wl_error_busy_waited(err) - waited) <= 0.051,
          "the message says waited %.1f s, the error's field %.3f s", waited,
          err ? wl_error_busy_waited(err) : -1.0);
    wl_error_free(err);
    return waited;
}

/* With `setting` NULL, a C program's busy message names the function's argument. */
static const char BUSY_TXN_FMT[] =
    "database is busy: the transaction could not start within 1 s (waited %.1f s, "
    "wait_seconds of wl_queue_begin), another write held the lock all that time; "
    "nothing was written";
static const char BUSY_STMT_FMT[] =
    "database is busy: the statement waited %.1f s for another write to end (limit 0.3 s, "
    "busy_timeout_seconds of wl_queue_exec) and was not run; nothing was written";
static const char BUSY_TAKE_FMT[] =
    "database is busy: the statement waited %.1f s for another write to end (limit 0.3 s, "
    "wait_seconds of wl_queue_take) and was not run; nothing was written";

static void test_header_constants(void) {
    CHECK(WL_OK == 0, "WL_OK is %d", (int)WL_OK);
    CHECK(WL_BUSY == 1 && WL_NOT_STARTED == 2 && WL_SQLITE == 3 && WL_IO == 4 &&
              WL_INVALID_ARGUMENT == 5 && WL_STATE == 6 && WL_PANIC == 7,
          "SQLite-side codes were renumbered");
    CHECK(WL_PG_CONNECT == 100 && WL_PG_SETTING == 101 && WL_PG_NOT_GRANTED == 102 &&
              WL_PG_REFUSED == 103 && WL_PG_DATABASE == 104 && WL_PG_SESSION_ENDED == 105 &&
              WL_PG_CLOSED == 106 && WL_PG_ROLLED_BACK == 107 && WL_PG_DRIVER == 108 &&
              WL_PG_OUTCOME_UNKNOWN == 109,
          "Postgres codes were renumbered");
    CHECK_STR(wl_result_name(WL_BUSY), "WL_BUSY");
    CHECK_STR(wl_result_name(WL_PG_REFUSED), "WL_PG_REFUSED");
    CHECK_STR(wl_result_name(WL_PG_OUTCOME_UNKNOWN), "WL_PG_OUTCOME_UNKNOWN");
    CHECK_STR(wl_result_name(4242), "WL_UNKNOWN");
    CHECK(wl_version() != NULL && strlen(wl_version()) >= 5, "wl_version() is empty");
    CHECK(WL_TRANSACTION_WAIT == 25.0 && WL_CLI_TRANSACTION_WAIT == 300.0 &&
              WL_BUSY_TIMEOUT == 5.0 && WL_CLI_BUSY_TIMEOUT == 30.0,
          "wait defaults differ from Exponential's driver");
    CHECK_STR(WL_TRANSACTION_SETTING, "[DatabaseSettings] SQLiteTransactionWait");
    CHECK_STR(WL_BUSY_SETTING, "[DatabaseSettings] SQLiteBusyTimeout");
    CHECK_STR(WL_PG_REFUSED_SQLSTATE, "LW001");
    CHECK(WL_PG_WRITER_LOCK == 1279607879LL, "writer lock key is %lld", (long long)WL_PG_WRITER_LOCK);
}

static void test_null_pointers(void) {
    wl_queue *q = (wl_queue *)0x1; /* must be reset to NULL on failure */
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_new(NULL, &q));
    CHECK(q == NULL, "*out was not reset to NULL on failure");
    CHECK_CONTAINS(last_message(), "invalid argument path: it is NULL");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_new("x.db", NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_new_with_strategy(NULL, WL_STRATEGY_POLL, &q));

    char path[PATH_MAX];
    scratch_path(path, "nulls.db");
    sqlite3 *db = open_db(path);
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));

    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_begin(NULL, db, 1.0, NULL));
    CHECK_CONTAINS(last_message(), "queue");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_begin(q, NULL, 1.0, NULL));
    CHECK_CONTAINS(last_message(), "invalid argument db: it is NULL");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_commit(NULL, db));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_commit(q, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_rollback(NULL, db));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_rollback(q, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_exec(NULL, db, "SELECT 1", 1.0, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_exec(q, NULL, "SELECT 1", 1.0, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_exec(q, db, NULL, 1.0, NULL));
    CHECK_CONTAINS(last_message(), "invalid argument sql");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_take(NULL, WL_BUSY_TRANSACTION, 1.0, NULL, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_release(NULL, NULL));
    CHECK(!wl_queue_holding(NULL), "holding(NULL) is true");
    CHECK(wl_queue_last_wait(NULL) == 0.0, "last_wait(NULL) is not 0");
    CHECK(wl_queue_database(NULL, NULL, 0) == 0, "database(NULL) is not empty");
    CHECK(!wl_queue_holding(q), "a NULL-argument call took the turn");
    wl_queue_free(NULL);
    wl_queue_free(q);
    sqlite3_close(db);

    /* Errors and their accessors. */
    char buf[64] = "untouched";
    CHECK(wl_error_message(NULL, buf, sizeof buf) == 0 && buf[0] == '\0', "message(NULL)");
    CHECK(wl_error_code(NULL) == WL_OK, "code(NULL)");
    CHECK(wl_error_busy_kind(NULL) == WL_BUSY_NONE, "busy_kind(NULL)");
    CHECK(wl_error_busy_holder_pid(NULL) == 0, "holder_pid(NULL)");
    CHECK(wl_error_refused_version(NULL) == -1, "refused_version(NULL)");
    CHECK(wl_error_sqlstate(NULL, buf, sizeof buf) == 0, "sqlstate(NULL)");
    wl_error_free(NULL);

    /* Postgres objects. */
    wl_pg_conn *conn = (wl_pg_conn *)0x1;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_connect(NULL, NULL, &conn));
    CHECK(conn == NULL, "wl_pg_connect left *out set");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_connect("postgresql://x@127.0.0.1/x", NULL, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_exec(NULL, "SELECT 1", 0, NULL, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_exec_batch(NULL, "SELECT 1"));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_query(NULL, "SELECT 1", 0, NULL, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_begin(NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_commit(NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_rollback(NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_show(NULL, "lock_timeout", buf, sizeof buf, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_setup_schema(NULL, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_write_begin(NULL, NULL));
    int64_t floor_v = 0;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_stored_floor(NULL, &floor_v));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_new(NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_lock_wait(NULL, 1.0));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_version(NULL, 2));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_pool_new(NULL, NULL, 2, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_pool_take(NULL, &conn));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_pool_give(NULL, NULL));
    wl_pg_refused_writer rw;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_write_refused(NULL, 0, &rw));
    wl_strings *alerts = NULL;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_write_alerts(NULL, NULL, 0, &alerts));
    CHECK(wl_pg_rows_text(NULL, 0, 0) == NULL, "rows_text(NULL)");
    CHECK(wl_pg_rows_is_null(NULL, 0, 0), "rows_is_null(NULL)");
    CHECK(wl_pg_rows_count(NULL) == 0 && wl_pg_rows_columns(NULL) == 0, "rows counts(NULL)");
    CHECK(wl_pg_rows_column_name(NULL, 0) == NULL, "column_name(NULL)");
    CHECK(wl_strings_count(NULL) == 0 && wl_strings_get(NULL, 0) == NULL, "strings(NULL)");
    CHECK(wl_pg_write_waits(NULL) == 0 && wl_pg_write_floor(NULL) == -1 &&
              wl_pg_write_refused_count(NULL) == 0,
          "write accessors(NULL)");
    CHECK(wl_pg_is_closed(NULL) && !wl_pg_in_transaction(NULL) && wl_pg_pid(NULL) == 0,
          "conn accessors(NULL)");
    CHECK(wl_pg_pool_idle_count(NULL) == 0, "pool_idle_count(NULL)");
    wl_pg_conn_free(NULL);
    wl_pg_pool_free(NULL);
    wl_pg_settings_free(NULL);
    wl_pg_write_free(NULL);
    wl_pg_rows_free(NULL);
    wl_strings_free(NULL);
}

static void test_invalid_utf8_and_numbers(void) {
    wl_queue *q = NULL;
    char bad[PATH_MAX];
    scratch_path(bad, "bad-\xff\xfe.db");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_new(bad, &q));
    CHECK(q == NULL, "a queue was created for a non-UTF-8 path");
    CHECK_CONTAINS(last_message(), "not valid UTF-8");

    char path[PATH_MAX];
    scratch_path(path, "numbers.db");
    sqlite3 *db = open_db(path);
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_begin(q, db, -1.0, NULL));
    CHECK_CONTAINS(last_message(), "invalid argument wait_seconds: -1 is not a number of seconds");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_begin(q, db, NAN, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_begin(q, db, INFINITY, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_exec(q, db, "CREATE TABLE t(x)", -0.5, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_begin(q, db, 1.0, "bad \xc3\x28 setting"));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_exec(q, db, "SELECT '\xff'", 1.0, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_take(q, 7, 1.0, NULL, NULL));
    CHECK_CONTAINS(last_message(), "is not WL_BUSY_TRANSACTION (1) or WL_BUSY_STATEMENT (2)");
    CHECK(!wl_queue_holding(q), "a refused call took the turn");
    wl_queue *q2 = NULL;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_new_with_strategy(path, 9, &q2));
    CHECK(q2 == NULL, "a queue was created with an unknown strategy");
    wl_queue_free(q);
    sqlite3_close(db);

    wl_pg_settings *s = NULL;
    EXPECT_RC(WL_OK, wl_pg_settings_new(&s));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_lock_wait(s, -3.0));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_statement_timeout(s, NAN));
    /* A limit of 0 or under 1 ms would mean no limit to Postgres: refused, naming it. */
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_lock_wait(s, 0.0));
    CHECK_CONTAINS(last_message(), "lock_wait is 0 seconds");
    CHECK_CONTAINS(last_message(), "between 0.001 and 2147483.647 seconds");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_idle_in_transaction(s, 0.0004));
    CHECK_CONTAINS(last_message(), "idle_in_transaction is 0.0004 seconds");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_statement_timeout(s, 3e6));
    CHECK_CONTAINS(last_message(), "statement_timeout is 3000000 seconds");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_tcp_user_timeout(s, 0.0));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_connect_timeout(s, 0.0));
    EXPECT_RC(WL_OK, wl_pg_settings_set_tcp_user_timeout(s, 60.0));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_set_version(s, 70000));
    /* A required floor above the version is refused when used. */
    EXPECT_RC(WL_OK, wl_pg_settings_set_required(s, 2));
    wl_pg_pool *pool = NULL;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_pool_new("postgresql://u@127.0.0.1:1/d", s, 2, &pool));
    CHECK_CONTAINS(last_message(), "that code would refuse its own writes");
    char opts[512];
    size_t n = wl_pg_settings_startup_options(s, opts, sizeof opts);
    CHECK(n > 0 && n < sizeof opts, "startup options length %zu", n);
    CHECK_CONTAINS(opts, "-c lock_timeout=10s -c idle_in_transaction_session_timeout=15s "
                         "-c statement_timeout=60s -c agentihooks.ledger_writer_version=1");
    wl_pg_settings_free(s);
}

static void test_missing_directory(void) {
    char path[PATH_MAX], lock[PATH_MAX + 16];
    scratch_path(path, "no/such/dir/site.db");
    snprintf(lock, sizeof lock, "%s" WL_LOCK_SUFFIX, path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q)); /* opens nothing yet */
    double waited = -1;
    EXPECT_RC(WL_IO, wl_queue_take(q, WL_BUSY_TRANSACTION, 1.0, NULL, &waited));
    CHECK_CONTAINS(last_message(), lock);
    CHECK_CONTAINS(last_message(), "check that the database's directory exists");
    wl_error *err = wl_last_error();
    CHECK(err != NULL && wl_error_code(err) == WL_IO, "wl_last_error code");
    CHECK(wl_error_os_error(err) == ENOENT, "os_error %d, expected ENOENT", wl_error_os_error(err));
    wl_error_free(err);

    /* A connection to another database (here in memory) is refused before any lock file
     * is opened: its writers would not exclude this database's. */
    sqlite3 *mem = open_db(":memory:");
    EXPECT_RC(WL_WRONG_DATABASE, wl_queue_begin(q, mem, 1.0, NULL));
    CHECK_CONTAINS(last_message(), path);
    CHECK_CONTAINS(last_message(), "the connection's database is an in-memory or temporary database");
    CHECK(!wl_queue_holding(q), "holding after a failed begin");
    sqlite3_close(mem);
    wl_queue_free(q);
}

static void test_begin_commit_and_exec(void) {
    char path[PATH_MAX];
    scratch_path(path, "roundtrip.db");
    sqlite3 *db = open_db(path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));
    char back[PATH_MAX];
    CHECK(wl_queue_database(q, back, sizeof back) == strlen(path), "database() length");
    CHECK_STR(back, path);

    EXPECT_RC(WL_OK, wl_queue_exec(q, db, "CREATE TABLE t(x INTEGER)", WL_BUSY_TIMEOUT, NULL));
    /* Each "given back" is checked on the lock file too, from another process: the handle's
     * own flag would say so whatever happened to the lock. */
    char lock[PATH_MAX + 16];
    snprintf(lock, sizeof lock, "%s" WL_LOCK_SUFFIX, path);
    CHECK(!wl_queue_holding(q) && lock_file_is_held(lock) == 0, "a queued statement kept the turn");
    CHECK(file_exists(path, WL_LOCK_SUFFIX) && file_exists(path, WL_QUEUE_SUFFIX),
          "the lock files were not created beside the database");
    EXPECT_RC(WL_OK, wl_queue_exec(q, db, "SELECT count(*) FROM t", WL_BUSY_TIMEOUT, NULL));

    EXPECT_RC(WL_OK, wl_queue_begin(q, db, WL_TRANSACTION_WAIT, NULL));
    CHECK(wl_queue_holding(q) && lock_file_is_held(lock) == 1, "not holding inside a transaction");
    CHECK(sqlite3_get_autocommit(db) == 0, "BEGIN IMMEDIATE did not open a transaction");
    CHECK(wl_queue_last_wait(q) >= 0.0 && wl_queue_last_wait(q) < 5.0, "last_wait %f",
          wl_queue_last_wait(q));
    EXPECT_RC(WL_OK, wl_queue_exec(q, db, "INSERT INTO t VALUES (1)", 1.0, NULL));
    EXPECT_RC(WL_OK, wl_queue_commit(q, db));
    CHECK(!wl_queue_holding(q) && lock_file_is_held(lock) == 0, "holding after commit");
    CHECK(count_rows(db, "SELECT count(*) FROM t") == 1, "the committed row is missing");

    EXPECT_RC(WL_OK, wl_queue_begin(q, db, 0.0 /* raised to 1 s */, "[Test] Wait"));
    EXPECT_RC(WL_OK, wl_queue_exec(q, db, "INSERT INTO t VALUES (2)", 1.0, NULL));
    EXPECT_RC(WL_OK, wl_queue_rollback(q, db));
    CHECK(count_rows(db, "SELECT count(*) FROM t") == 1, "the rolled-back row is there");

    /* A failing queued statement: SQLite's code and message. */
    EXPECT_RC(WL_SQLITE, wl_queue_exec(q, db, "INSERT INTO missing VALUES (1)", 1.0, NULL));
    CHECK_CONTAINS(last_message(), "no such table: missing");
    wl_error *err = wl_last_error();
    CHECK(wl_error_sqlite_code(err) == SQLITE_ERROR, "sqlite code %d", wl_error_sqlite_code(err));
    wl_error_free(err);
    CHECK(!wl_queue_holding(q) && lock_file_is_held(lock) == 0, "a failed statement kept the turn");

    /* Take and release for hosts that run BEGIN themselves. */
    double waited = -1;
    bool released = false;
    EXPECT_RC(WL_OK, wl_queue_take(q, WL_BUSY_STATEMENT, 2.0, NULL, &waited));
    CHECK(waited >= 0.0 && waited < 2.0, "waited %f", waited);
    CHECK(wl_queue_holding(q), "not holding after take");
    EXPECT_RC(WL_STATE, wl_queue_take(q, WL_BUSY_TRANSACTION, 1.0, NULL, NULL));
    CHECK_CONTAINS(last_message(), "already holds the writer turn");
    EXPECT_RC(WL_OK, wl_queue_release(q, &released));
    CHECK(released && lock_file_is_held(lock) == 0, "release did not give the turn back");
    EXPECT_RC(WL_OK, wl_queue_release(q, &released));
    CHECK(!released, "a second release reported a turn");

    /* Strategy: poll. */
    wl_queue *qp = NULL;
    EXPECT_RC(WL_OK, wl_queue_new_with_strategy(path, WL_STRATEGY_POLL, &qp));
    EXPECT_RC(WL_OK, wl_queue_begin(qp, db, 2.0, NULL));
    EXPECT_RC(WL_OK, wl_queue_commit(qp, db));
    wl_queue_free(qp);

    /* An in-memory database needs no queue. */
    sqlite3 *mem = open_db(":memory:");
    wl_queue *qm = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(":memory:", &qm));
    EXPECT_RC(WL_OK, wl_queue_begin(qm, mem, 1.0, NULL));
    EXPECT_RC(WL_OK, wl_queue_commit(qm, mem));
    wl_queue_free(qm);
    sqlite3_close(mem);

    wl_queue_free(q);
    sqlite3_close(db);
}

static void test_state_errors(void) {
    char path[PATH_MAX];
    scratch_path(path, "state.db");
    sqlite3 *db = open_db(path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));

    EXPECT_RC(WL_STATE, wl_queue_commit(q, db));
    CHECK_STR(last_message(),
              "there is no queued transaction to end: this writer queue does not hold the "
              "writer turn; call begin() first");
    EXPECT_RC(WL_STATE, wl_queue_rollback(q, db));

    CHECK(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK, "plain BEGIN failed");
    EXPECT_RC(WL_STATE, wl_queue_begin(q, db, 1.0, NULL));
    CHECK_CONTAINS(last_message(), "the connection is already inside a transaction");
    CHECK(!wl_queue_holding(q), "holding after a refused begin");
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);

    EXPECT_RC(WL_OK, wl_queue_begin(q, db, 1.0, NULL));
    EXPECT_RC(WL_STATE, wl_queue_begin(q, db, 1.0, NULL));
    EXPECT_RC(WL_OK, wl_queue_rollback(q, db));

    /* The last error: kept per thread, cleared by a success, copies stay valid. */
    EXPECT_RC(WL_STATE, wl_queue_commit(q, db));
    wl_error *kept = wl_last_error();
    CHECK(wl_last_error_code() == WL_STATE, "last error code %d", (int)wl_last_error_code());
    size_t need = wl_last_error_message(NULL, 0);
    char *msg = malloc(need + 1);
    CHECK(msg && wl_last_error_message(msg, need + 1) == need && strlen(msg) == need,
          "sizing the message");
    char small[8];
    CHECK(wl_last_error_message(small, sizeof small) == need && strlen(small) == sizeof small - 1,
          "a short buffer is not truncated and terminated");
    EXPECT_RC(WL_OK, wl_queue_exec(q, db, "SELECT 1", 1.0, NULL));
    CHECK(wl_last_error_code() == WL_OK && wl_last_error_message(NULL, 0) == 0,
          "a success did not clear the last error");
    wl_error *none = wl_last_error();
    CHECK(none == NULL, "wl_last_error after a success is not NULL");
    char copy[512];
    wl_error_message(kept, copy, sizeof copy);
    CHECK(wl_error_code(kept) == WL_STATE && msg && strcmp(copy, msg) == 0,
          "the kept error changed after later calls");
    free(msg);
    wl_error_free(kept);

    wl_queue_free(q);
    sqlite3_close(db);
}

static void test_not_a_database(void) {
    char path[PATH_MAX];
    scratch_path(path, "not-a-database.db");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot create %s", path);
    if (!f) return;
    for (int i = 0; i < 256; i++) fputs("this is not an SQLite database file. ", f);
    fclose(f);
    sqlite3 *db = open_db(path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));
    EXPECT_RC(WL_NOT_STARTED, wl_queue_begin(q, db, 1.0, NULL));
    CHECK_STR(last_message(),
              "the transaction could not start: file is not a database; nothing was written");
    wl_error *err = wl_last_error();
    CHECK(wl_error_sqlite_code(err) == SQLITE_NOTADB, "sqlite code %d",
          wl_error_sqlite_code(err));
    CHECK(wl_error_busy_kind(err) == WL_BUSY_NONE, "a NOT_STARTED error has busy fields");
    wl_error_free(err);
    CHECK(!wl_queue_holding(q), "the turn was not given back after BEGIN failed");
    /* The turn is free: another handle takes it at once. */
    wl_queue *q2 = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q2));
    EXPECT_RC(WL_OK, wl_queue_take(q2, WL_BUSY_STATEMENT, 0.5, NULL, NULL));
    EXPECT_RC(WL_OK, wl_queue_release(q2, NULL));
    wl_queue_free(q2);
    wl_queue_free(q);
    sqlite3_close(db);
}

/* A child that holds the turn with an open write until told to end it. */
static int holder_child(const char *path, int ready_fd, int go_fd) {
    alarm(120);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) return 10;
    wl_queue *q = NULL;
    if (wl_queue_new(path, &q) != WL_OK) return 11;
    if (wl_queue_begin(q, db, 10.0, NULL) != WL_OK) {
        fprintf(stderr, "  holder: begin failed: %s\n", last_message());
        return 12;
    }
    if (sqlite3_exec(db, "INSERT INTO t VALUES (42)", NULL, NULL, NULL) != SQLITE_OK) return 13;
    char b = 'r';
    if (write(ready_fd, &b, 1) != 1) return 14;
    if (read(go_fd, &b, 1) < 0) return 15; /* EOF or a byte: the parent is done */
    int rc = wl_queue_rollback(q, db) == WL_OK ? 0 : 16;
    wl_queue_free(q);
    sqlite3_close(db);
    return rc;
}

/* A holder_child running in another process, and the pipes that talk to it. */
struct holder {
    pid_t pid;
    int ready; /* read end: a byte once it holds the turn */
    int go;    /* write end: closing it ends its write */
};

/* Creates table t in a fresh database at `path`, starts a holder_child on it and waits until
 * it holds the turn with an open write (a CHECK fails if it never does); returns 0 (after a
 * failed CHECK) when the pipes could not be made, 1 otherwise. */
static int start_holder(const char *path, struct holder *h) {
    sqlite3 *setup = open_db(path);
    CHECK(sqlite3_exec(setup, "CREATE TABLE t(x INTEGER)", NULL, NULL, NULL) == SQLITE_OK,
          "create table");
    sqlite3_close(setup);

    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        return 0;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        close(ready[0]);
        close(go[1]);
        exit(holder_child(path, ready[1], go[0]));
    }
    close(ready[1]);
    close(go[0]);
    h->pid = child;
    h->ready = ready[0];
    h->go = go[1];
    char b;
    CHECK(read(h->ready, &b, 1) == 1, "the holder did not get its turn");
    return 1;
}

/* Tells the holder to roll back and end; returns its exit status (0: all went well). */
static int stop_holder(struct holder *h) {
    close(h->go);
    int status = wait_child(h->pid);
    close(h->ready);
    return status;
}

static void check_driver_setting(wl_queue *q, sqlite3 *db);

static void test_busy_holder_and_waiter(void) {
    char path[PATH_MAX];
    scratch_path(path, "busy.db");
    struct holder holder;
    if (!start_holder(path, &holder)) return;
    pid_t child = holder.pid;

    sqlite3 *db = open_db(path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));

    /* Warm up the busy path first: under valgrind the first run of any code is
     * translated (tens of ms), which would show in the waited time below. */
    EXPECT_RC(WL_BUSY, wl_queue_take(q, WL_BUSY_STATEMENT, 0.1, NULL, NULL));
    CHECK_CONTAINS(last_message(), "(limit 0.1 s, wait_seconds of wl_queue_take)");

    /* A transaction with a 1 s wait: the driver's exact message with the waited time it
     * measured (a loaded machine may end the wait late: "waited 1.1 s" is right then), and
     * the fields. */
    double t0 = now();
    EXPECT_RC(WL_BUSY, wl_queue_begin(q, db, 1.0, NULL));
    double elapsed = now() - t0;
    double waited = check_busy_sentence(BUSY_TXN_FMT, 1.0, 3.0);
    wl_error *err = wl_last_error();
    CHECK(err != NULL, "no last error");
    CHECK(wl_error_code(err) == WL_BUSY, "code");
    CHECK(wl_error_busy_kind(err) == WL_BUSY_TRANSACTION, "busy kind %d",
          (int)wl_error_busy_kind(err));
    CHECK(elapsed >= 1.0 && elapsed < waited + 1.0, "the call took %.3f s, the message says %.1f",
          elapsed, waited);
    CHECK(wl_error_busy_limit(err) == 1.0, "limit %f", wl_error_busy_limit(err));
    char setting[128];
    wl_error_busy_setting(err, setting, sizeof setting);
    CHECK_STR(setting, "wait_seconds of wl_queue_begin");
    CHECK(wl_error_busy_holder_pid(err) == (uint32_t)child, "holder pid %u, expected %d",
          wl_error_busy_holder_pid(err), (int)child);
    CHECK(wl_error_sqlite_code(err) == SQLITE_BUSY, "sqlite code %d", wl_error_sqlite_code(err));
    wl_error_free(err);
    CHECK(!wl_queue_holding(q), "holding after WL_BUSY");
    CHECK(sqlite3_get_autocommit(db) == 1, "a transaction was left open after WL_BUSY");

    /* A single statement with its own limit and setting name. */
    EXPECT_RC(WL_BUSY, wl_queue_exec(q, db, "INSERT INTO t VALUES (7)", 0.5, "[Test] StatementWait"));
    check_busy_sentence("database is busy: the statement waited %.1f s for another write to end "
                        "(limit 0.5 s, [Test] StatementWait) and was not run; nothing was written",
                        0.5, 2.5);
    err = wl_last_error();
    CHECK(wl_error_busy_kind(err) == WL_BUSY_STATEMENT, "busy kind");
    wl_error_free(err);

    /* take() with a caller's setting name. */
    EXPECT_RC(WL_BUSY, wl_queue_take(q, WL_BUSY_TRANSACTION, 0.2, "[Test] TakeWait", NULL));
    check_busy_sentence("database is busy: the transaction could not start within 1 s (waited "
                        "%.1f s, [Test] TakeWait), another write held the lock all that time; "
                        "nothing was written",
                        1.0, 3.0);

    check_driver_setting(q, db);

    /* Let the holder roll back; then the turn is granted at once. */
    int status = stop_holder(&holder);
    CHECK(status == 0, "the holder exited with %d", status);
    t0 = now();
    EXPECT_RC(WL_OK, wl_queue_begin(q, db, 5.0, NULL));
    CHECK(now() - t0 < 2.0, "the free turn took %.3f s", now() - t0);
    CHECK(count_rows(db, "SELECT count(*) FROM t") == 0, "something was written");
    EXPECT_RC(WL_OK, wl_queue_rollback(q, db));
    wl_queue_free(q);
    sqlite3_close(db);
}

/* Exponential's driver passes its INI setting's name and gets the driver's exact text. */
static void check_driver_setting(wl_queue *q, sqlite3 *db) {
    EXPECT_RC(WL_BUSY, wl_queue_exec(q, db, "INSERT INTO t VALUES (8)", 0.1, WL_BUSY_SETTING));
    CHECK_CONTAINS(last_message(), "(limit 0.1 s, [DatabaseSettings] SQLiteBusyTimeout) and was "
                                   "not run; nothing was written");
    EXPECT_RC(WL_BUSY, wl_queue_exec(q, db, "INSERT INTO t VALUES (8)", 0.1, NULL));
    CHECK_CONTAINS(last_message(), "(limit 0.1 s, busy_timeout_seconds of wl_queue_exec) and "
                                   "was not run; nothing was written");
}

/* --- interrupting a wait (from a signal handler, from another thread) ------- */

static wl_queue *volatile interrupt_target;

static void interrupt_on_signal(int sig) {
    (void)sig;
    wl_queue_interrupt(interrupt_target); /* async-signal-safe */
}

struct interrupter {
    wl_queue *queue;
    int delay_ms;
};

static void *interrupt_later(void *arg) {
    struct interrupter *it = arg;
    struct timespec ts = {it->delay_ms / 1000, (long)(it->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    wl_queue_interrupt(it->queue);
    return NULL;
}

/* An interrupted wait: WL_INTERRUPTED soon after the request, the exact message, no turn,
 * no transaction, and the next wait waits again. */
static void check_interrupted(wl_queue *q, sqlite3 *db, double t0, const char *how) {
    double elapsed = now() - t0;
    CHECK(wl_last_error_code() == WL_INTERRUPTED, "%s: %s", how,
          wl_result_name(wl_last_error_code()));
    CHECK(elapsed >= 0.2 && elapsed < 1.5,
          "%s: the wait ended after %.3f s, the interrupt came at 0.3 s", how, elapsed);
    double waited = -1;
    char expected[256];
    if (sscanf(last_message(), "the wait for the writer turn was interrupted after %lf",
               &waited) != 1)
        waited = -1;
    snprintf(expected, sizeof expected,
             "the wait for the writer turn was interrupted after %.1f s; nothing was written",
             waited);
    CHECK_STR(last_message(), expected);
    CHECK(waited >= 0.2 && waited < 1.5, "%s: waited %.3f s", how, waited);
    CHECK(!wl_queue_holding(q), "%s: the turn is held after WL_INTERRUPTED", how);
    CHECK(sqlite3_get_autocommit(db) == 1, "%s: a transaction was begun", how);
    /* The request was used up: the next wait runs to its limit. */
    EXPECT_RC(WL_BUSY, wl_queue_take(q, WL_BUSY_STATEMENT, 0.1, NULL, NULL));
}

static void test_interrupt(void) {
    char path[PATH_MAX];
    scratch_path(path, "interrupt.db");
    struct holder holder;
    if (!start_holder(path, &holder)) return;
    sqlite3 *db = open_db(path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));
    /* Warm up the busy path (valgrind translates code on its first run). */
    EXPECT_RC(WL_BUSY, wl_queue_take(q, WL_BUSY_STATEMENT, 0.1, NULL, NULL));

    /* 1. From a SIGALRM handler, 0.3 s into a 20 s wait for a transaction. */
    interrupt_target = q;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = interrupt_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    struct itimerval timer = {{0, 0}, {0, 300000}};
    setitimer(ITIMER_REAL, &timer, NULL);
    double t0 = now();
    EXPECT_RC(WL_INTERRUPTED, wl_queue_begin(q, db, 20.0, NULL));
    check_interrupted(q, db, t0, "begin interrupted by a signal handler");
    /* A wait that ended early (a failure above) leaves the timer running: stop it before the
     * default action comes back, or SIGALRM would end the whole run. */
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);

    /* 2. From another thread, a queued statement's wait. */
    struct interrupter it = {q, 300};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, interrupt_later, &it) == 0, "pthread_create");
    t0 = now();
    EXPECT_RC(WL_INTERRUPTED, wl_queue_exec(q, db, "INSERT INTO t VALUES (1)", 20.0, NULL));
    pthread_join(thread, NULL);
    check_interrupted(q, db, t0, "exec interrupted by another thread");

    /* 3. And wl_queue_take's. */
    CHECK(pthread_create(&thread, NULL, interrupt_later, &it) == 0, "pthread_create");
    t0 = now();
    EXPECT_RC(WL_INTERRUPTED, wl_queue_take(q, WL_BUSY_TRANSACTION, 20.0, NULL, NULL));
    pthread_join(thread, NULL);
    check_interrupted(q, db, t0, "take interrupted by another thread");

    /* A request no wait took is withdrawn with wl_queue_clear_interrupt. */
    wl_queue_interrupt(q);
    wl_queue_clear_interrupt(q);
    EXPECT_RC(WL_BUSY, wl_queue_take(q, WL_BUSY_STATEMENT, 0.1, NULL, NULL));
    wl_queue_interrupt(NULL);
    wl_queue_clear_interrupt(NULL);

    CHECK(stop_holder(&holder) == 0, "the holder failed");
    /* Nothing the interrupted calls were given was written. */
    CHECK(count_rows(db, "SELECT count(*) FROM t WHERE x = 1") == 0, "an interrupted write ran");
    /* A pending request does not refuse a free turn. */
    wl_queue_interrupt(q);
    EXPECT_RC(WL_OK, wl_queue_begin(q, db, 5.0, NULL));
    EXPECT_RC(WL_OK, wl_queue_rollback(q, db));
    wl_queue_free(q);
    sqlite3_close(db);
}

/* --- the queue from the connection, another database refused, the busy timeout kept --- */

static long busy_timeout_of(sqlite3 *db) {
    return count_rows(db, "PRAGMA busy_timeout");
}

static void test_for_connection(void) {
    char path[PATH_MAX], other[PATH_MAX];
    scratch_path(path, "for_connection.db");
    scratch_path(other, "typo.db");
    sqlite3 *db = open_db(path);
    CHECK(sqlite3_exec(db, "CREATE TABLE t(x INTEGER)", NULL, NULL, NULL) == SQLITE_OK,
          "create table");

    /* The queue made from the connection serves its file. */
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_for_connection(db, &q));
    char served[PATH_MAX];
    wl_queue_database(q, served, sizeof served);
    char real[PATH_MAX];
    CHECK(realpath(path, real) != NULL, "realpath");
    CHECK_STR(served, real);

    /* The caller's busy timeout is put back after a transaction and a statement. */
    sqlite3_busy_timeout(db, 7000);
    EXPECT_RC(WL_OK, wl_queue_begin(q, db, WL_TRANSACTION_WAIT, NULL));
    CHECK(sqlite3_exec(db, "INSERT INTO t VALUES (1)", NULL, NULL, NULL) == SQLITE_OK, "insert");
    EXPECT_RC(WL_OK, wl_queue_commit(q, db));
    CHECK(busy_timeout_of(db) == 7000, "busy timeout %ld after a transaction, expected 7000",
          busy_timeout_of(db));
    EXPECT_RC(WL_OK, wl_queue_exec(q, db, "INSERT INTO t VALUES (2)", WL_BUSY_TIMEOUT, NULL));
    CHECK(busy_timeout_of(db) == 7000, "busy timeout %ld after a statement, expected 7000",
          busy_timeout_of(db));
    EXPECT_RC(WL_OK, wl_queue_begin(q, db, WL_TRANSACTION_WAIT, NULL));
    EXPECT_RC(WL_OK, wl_queue_rollback(q, db));
    CHECK(busy_timeout_of(db) == 7000, "busy timeout %ld after a rollback, expected 7000",
          busy_timeout_of(db));
    wl_queue_free(q);

    /* A queue for another file refuses this connection, naming both, and runs nothing. */
    wl_queue *typo = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(other, &typo));
    EXPECT_RC(WL_WRONG_DATABASE, wl_queue_begin(typo, db, WL_TRANSACTION_WAIT, NULL));
    CHECK_CONTAINS(last_message(), "typo.db");
    CHECK_CONTAINS(last_message(), "for_connection.db");
    CHECK_CONTAINS(last_message(), "nothing was run");
    CHECK_STR(wl_result_name(WL_WRONG_DATABASE), "WL_WRONG_DATABASE");
    CHECK(sqlite3_get_autocommit(db) == 1, "a transaction was begun on the wrong database");
    CHECK(!wl_queue_holding(typo), "the wrong queue holds a turn");
    EXPECT_RC(WL_WRONG_DATABASE,
              wl_queue_exec(typo, db, "INSERT INTO t VALUES (3)", WL_BUSY_TIMEOUT, NULL));
    CHECK(count_rows(db, "SELECT count(*) FROM t WHERE x = 3") == 0, "the statement ran");
    CHECK(!file_exists(other, ".writer-lock"), "the wrong queue created its lock file");
    wl_queue_free(typo);

    /* An in-memory connection has no other writers: its queue grants the turn at once. */
    sqlite3 *mem = NULL;
    CHECK(sqlite3_open(":memory:", &mem) == SQLITE_OK, "open :memory:");
    wl_queue *none = NULL;
    EXPECT_RC(WL_OK, wl_queue_for_connection(mem, &none));
    EXPECT_RC(WL_OK, wl_queue_begin(none, mem, 1.0, NULL));
    EXPECT_RC(WL_OK, wl_queue_commit(none, mem));
    wl_queue_free(none);
    none = NULL;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_queue_for_connection(NULL, &none));
    CHECK(none == NULL, "*out is set on failure");
    sqlite3_close(mem);
    sqlite3_close(db);
}

enum { ROUNDS = 20 };

/* A writer process: ROUNDS read-then-write transactions through the queue. */
static int contender_child(const char *path, int start_fd, int id) {
    alarm(300);
    char b;
    if (read(start_fd, &b, 1) < 0) return 20; /* EOF: everyone starts together */
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) return 21;
    wl_queue *q = NULL;
    if (wl_queue_new(path, &q) != WL_OK) return 22;
    int failures = 0;
    for (int i = 0; i < ROUNDS; i++) {
        if (wl_queue_begin(q, db, 60.0, NULL) != WL_OK) {
            fprintf(stderr, "  writer %d: begin failed: %s\n", id, last_message());
            failures++;
            continue;
        }
        double start = now();
        if (!wl_queue_holding(q)) failures++;
        long n = count_rows(db, "SELECT n FROM counter");
        usleep(2000); /* widen the read-then-write window */
        char sql[256];
        snprintf(sql, sizeof sql,
                 "UPDATE counter SET n = %ld; INSERT INTO log(writer, round, seen, t0, t1) "
                 "VALUES (%d, %d, %ld, %.6f, %.6f)",
                 n + 1, id, i, n, start, now());
        char *errmsg = NULL;
        if (sqlite3_exec(db, sql, NULL, NULL, &errmsg) != SQLITE_OK) {
            fprintf(stderr, "  writer %d: %s\n", id, errmsg ? errmsg : "?");
            sqlite3_free(errmsg);
            wl_queue_rollback(q, db);
            failures++;
            continue;
        }
        if (wl_queue_commit(q, db) != WL_OK) {
            fprintf(stderr, "  writer %d: commit failed: %s\n", id, last_message());
            failures++;
        }
    }
    wl_queue_free(q);
    sqlite3_close(db);
    return failures ? 1 : 0;
}

static void test_two_processes_contend(void) {
    char path[PATH_MAX];
    scratch_path(path, "contend.db");
    sqlite3 *db = open_db(path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));
    EXPECT_RC(WL_OK, wl_queue_exec(q, db,
                                   "CREATE TABLE counter(n INTEGER); INSERT INTO counter VALUES (0);"
                                   "CREATE TABLE log(writer, round, seen, t0 REAL, t1 REAL)",
                                   5.0, NULL));
    wl_queue_free(q);
    sqlite3_close(db);

    int start[2];
    if (pipe(start) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            close(start[1]);
            exit(contender_child(path, start[0], k + 1));
        }
    }
    close(start[0]);
    close(start[1]); /* go */
    for (int k = 0; k < 2; k++) {
        int status = wait_child(kids[k]);
        CHECK(status == 0, "writer %d exited with %d", k + 1, status);
    }

    db = open_db(path);
    CHECK(count_rows(db, "SELECT n FROM counter") == 2 * ROUNDS,
          "counter is %ld, expected %d: a read-then-write was lost",
          count_rows(db, "SELECT n FROM counter"), 2 * ROUNDS);
    CHECK(count_rows(db, "SELECT count(*) FROM log") == 2 * ROUNDS, "log rows");
    CHECK(count_rows(db, "SELECT count(DISTINCT writer) FROM log") == 2, "both writers wrote");
    /* Each transaction saw the previous one's write: seen runs 0..2*ROUNDS-1. */
    CHECK(count_rows(db, "SELECT count(DISTINCT seen) FROM log") == 2 * ROUNDS,
          "two transactions read the same value");
    /* No two transactions overlapped in time. */
    CHECK(count_rows(db, "SELECT count(*) FROM log a JOIN log b ON a.rowid < b.rowid "
                         "WHERE a.t0 < b.t1 AND b.t0 < a.t1") == 0,
          "two transactions overlapped");
    sqlite3_close(db);
}

/* ------------------------------------------------------------------------ */
/* Exclusion the queue itself provides, with SQLite out of the way          */
/* ------------------------------------------------------------------------ */

/* Every check above that holds the turn inside BEGIN IMMEDIATE would pass if the queue
 * excluded nothing: SQLite's own write lock serializes those writers and its busy error
 * looks the same. The tests below hold the turn alone (wl_queue_take / wl_queue_release,
 * no SQLite transaction), so only the queue's flock() on <db>.writer-lock can keep
 * writers apart. */

/* The lock file of `path` (the database), in `out`. */
static void lock_file_of(char *out, size_t size, const char *path) {
    snprintf(out, size, "%s" WL_LOCK_SUFFIX, path);
}

/* Creates a database with table t at `path` and its lock files (one queued statement). */
static void make_database(const char *path) {
    sqlite3 *db = open_db(path);
    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));
    EXPECT_RC(WL_OK, wl_queue_exec(q, db, "CREATE TABLE IF NOT EXISTS t(x INTEGER)", 5.0, NULL));
    wl_queue_free(q);
    sqlite3_close(db);
}

enum { EXCL_WRITERS = 4, EXCL_TURNS = 12 };

/* What the writers of test_turns_alone_never_overlap record, in memory they share. */
struct turn_log {
    int inside;     /* writers between take and release right now */
    int max_inside; /* the most there ever were */
    int spans;      /* entries used in span[] */
    struct {
        double enter, leave;
        int writer;
    } span[EXCL_WRITERS * EXCL_TURNS];
};

/* A writer process: EXCL_TURNS turns taken alone, each held for 1 ms; half the writers
 * wait by the hand-off page, half by the driver's polling. */
static int turns_alone_child(const char *path, int start_fd, int id, struct turn_log *log) {
    alarm(120);
    char b;
    if (read(start_fd, &b, 1) < 0) return 30; /* EOF: everyone starts together */
    wl_queue *q = NULL;
    uint32_t strategy = id % 2 ? WL_STRATEGY_POLL : WL_STRATEGY_HANDOFF;
    if (wl_queue_new_with_strategy(path, strategy, &q) != WL_OK) return 31;
    int failures = 0;
    for (int i = 0; i < EXCL_TURNS; i++) {
        if (wl_queue_take(q, WL_BUSY_STATEMENT, 60.0, NULL, NULL) != WL_OK) {
            fprintf(stderr, "  writer %d: take failed: %s\n", id, last_message());
            failures++;
            continue;
        }
        double enter = now();
        int inside = __atomic_add_fetch(&log->inside, 1, __ATOMIC_SEQ_CST);
        int seen = __atomic_load_n(&log->max_inside, __ATOMIC_SEQ_CST);
        while (inside > seen && !__atomic_compare_exchange_n(&log->max_inside, &seen, inside, 0,
                                                             __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        }
        usleep(1000);
        __atomic_sub_fetch(&log->inside, 1, __ATOMIC_SEQ_CST);
        double leave = now();
        int at = __atomic_fetch_add(&log->spans, 1, __ATOMIC_SEQ_CST);
        if (at < EXCL_WRITERS * EXCL_TURNS) {
            log->span[at].enter = enter;
            log->span[at].leave = leave;
            log->span[at].writer = id;
        }
        if (wl_queue_release(q, NULL) != WL_OK) failures++;
    }
    wl_queue_free(q);
    return failures ? 1 : 0;
}

static int by_enter(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Writer processes take the turn alone and record when they enter and leave it: no two turns
 * may overlap. */
static void test_turns_alone_never_overlap(void) {
    char path[PATH_MAX];
    scratch_path(path, "alone.db");
    make_database(path);
    struct turn_log *log = mmap(NULL, sizeof *log, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (log == MAP_FAILED) {
        CHECK(0, "mmap: %s", strerror(errno));
        return;
    }
    memset(log, 0, sizeof *log);
    int start[2];
    if (pipe(start) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        munmap(log, sizeof *log);
        return;
    }
    fflush(NULL);
    pid_t kids[EXCL_WRITERS];
    for (int k = 0; k < EXCL_WRITERS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            close(start[1]);
            _exit(turns_alone_child(path, start[0], k + 1, log));
        }
    }
    close(start[0]);
    close(start[1]); /* go */
    for (int k = 0; k < EXCL_WRITERS; k++) {
        int status = wait_child(kids[k]);
        CHECK(status == 0, "writer %d exited with %d", k + 1, status);
    }
    int n = log->spans;
    CHECK(n == EXCL_WRITERS * EXCL_TURNS, "%d turns recorded, expected %d", n,
          EXCL_WRITERS * EXCL_TURNS);
    CHECK(log->max_inside == 1, "%d writers held the turn at the same time", log->max_inside);
    if (n > EXCL_WRITERS * EXCL_TURNS) n = EXCL_WRITERS * EXCL_TURNS;
    /* Sorted by entry, each turn starts after the one before it ended. */
    double spans[EXCL_WRITERS * EXCL_TURNS][3];
    for (int i = 0; i < n; i++) {
        spans[i][0] = log->span[i].enter;
        spans[i][1] = log->span[i].leave;
        spans[i][2] = log->span[i].writer;
    }
    qsort(spans, (size_t)n, sizeof spans[0], by_enter);
    int overlaps = 0;
    for (int i = 1; i < n; i++) {
        if (spans[i][0] < spans[i - 1][1]) {
            if (overlaps++ == 0)
                CHECK(0, "writer %.0f entered %.3f ms before writer %.0f left",
                      spans[i][2], (spans[i - 1][1] - spans[i][0]) * 1e3, spans[i - 1][2]);
        }
    }
    CHECK(overlaps == 0, "%d of %d turns overlapped the turn before them", overlaps, n);
    if (n > 1)
        printf("    %d turns by %d processes in %.0f ms, none overlapping\n", n, EXCL_WRITERS,
               (spans[n - 1][1] - spans[0][0]) * 1e3);
    munmap(log, sizeof *log);
}

/* From another process, flock(LOCK_EX | LOCK_NB) on `lock` (its own open file description):
 * 1 when someone holds it, 0 when that process could take it, -1 when the probe failed. The
 * process is util-linux's flock(1), spawned: a forked copy of this one would exit under
 * valgrind with the SQLite connections it inherited counted as leaks. */
static int lock_file_is_held(const char *lock) {
    char *argv[] = {"flock", "--nonblock", "--exclusive", "--conflict-exit-code", "75",
                    (char *)lock, "true", NULL};
    fflush(NULL);
    pid_t child = 0;
    if (posix_spawnp(&child, "flock", NULL, NULL, argv, environ) != 0) return -1;
    note_exec_pid(child);
    int status = wait_child(child);
    return status == 0 ? 0 : status == 75 ? 1 : -1;
}

/* While a turn is held, another process cannot flock() the lock file; after release it can. */
static void test_held_turn_locks_the_lock_file(void) {
    char path[PATH_MAX], lock[PATH_MAX + 16];
    scratch_path(path, "probe.db");
    make_database(path);
    lock_file_of(lock, sizeof lock, path);
    CHECK(lock_file_is_held(lock) == 0, "the lock file is held before any turn");
    for (uint32_t strategy = WL_STRATEGY_HANDOFF; strategy <= WL_STRATEGY_POLL; strategy++) {
        wl_queue *q = NULL;
        EXPECT_RC(WL_OK, wl_queue_new_with_strategy(path, strategy, &q));
        EXPECT_RC(WL_OK, wl_queue_take(q, WL_BUSY_STATEMENT, 2.0, NULL, NULL));
        int held = lock_file_is_held(lock);
        CHECK(held == 1, "strategy %u: while the turn is held, another process %s", strategy,
              held == 0 ? "took LOCK_EX on the lock file" : "could not probe the lock file");
        EXPECT_RC(WL_OK, wl_queue_release(q, NULL));
        held = lock_file_is_held(lock);
        CHECK(held == 0, "strategy %u: after release, another process %s", strategy,
              held == 1 ? "still finds the lock file held" : "could not probe the lock file");
        wl_queue_free(q);
    }
}

/* A child that holds the turn alone (wl_queue_take, no SQLite transaction) or, with `raw`,
 * a plain flock(LOCK_EX) on the lock file as a program that does not use this library
 * would, until told to end. */
static int turn_holder_child(const char *path, int raw, int ready_fd, int go_fd) {
    alarm(120);
    char b = 'r';
    wl_queue *q = NULL;
    int fd = -1;
    if (raw) {
        char lock[PATH_MAX + 16];
        lock_file_of(lock, sizeof lock, path);
        fd = open(lock, O_RDWR | O_CLOEXEC);
        if (fd < 0 || flock(fd, LOCK_EX) != 0) return 40;
    } else {
        if (wl_queue_new(path, &q) != WL_OK) return 41;
        if (wl_queue_take(q, WL_BUSY_STATEMENT, 10.0, NULL, NULL) != WL_OK) return 42;
    }
    if (write(ready_fd, &b, 1) != 1) return 43;
    if (read(go_fd, &b, 1) < 0) return 44; /* EOF or a byte: the parent is done */
    if (raw) {
        close(fd);
    } else {
        if (wl_queue_release(q, NULL) != WL_OK) return 45;
        wl_queue_free(q);
    }
    return 0;
}

/* Starts a turn_holder_child; fills `h` once it holds the lock. 0 (after a failed CHECK)
 * when it could not be started. */
static int start_turn_holder(const char *path, int raw, struct holder *h) {
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        return 0;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        close(ready[0]);
        close(go[1]);
        _exit(turn_holder_child(path, raw, ready[1], go[0]));
    }
    close(ready[1]);
    close(go[0]);
    h->pid = child;
    h->ready = ready[0];
    h->go = go[1];
    char b;
    if (read(h->ready, &b, 1) != 1) {
        CHECK(0, "the holder (exit %d) never held the lock", stop_holder(h));
        return 0;
    }
    return 1;
}

/* SQLite itself is free: another connection's BEGIN IMMEDIATE succeeds at once. */
static void check_sqlite_is_free(const char *path, const char *when) {
    sqlite3 *other = open_db(path);
    char *errmsg = NULL;
    int rc = sqlite3_exec(other, "BEGIN IMMEDIATE; ROLLBACK", NULL, NULL, &errmsg);
    CHECK(rc == SQLITE_OK, "%s: SQLite's write lock is not free (%s), so this test would not "
          "show the queue's own exclusion", when, errmsg ? errmsg : "?");
    sqlite3_free(errmsg);
    sqlite3_close(other);
}

/* A queued writer waits for a holder that is in no SQLite transaction: one that took the turn
 * alone, and a program that only flock()s the lock file. With short limits it gets WL_BUSY
 * naming the holder, while SQLite's own write lock is free all along. */
static void test_queued_writer_waits_for_a_holder_outside_sqlite(void) {
    for (int raw = 0; raw <= 1; raw++) {
        const char *who = raw ? "a plain flock() holder" : "a wl_queue_take holder";
        char path[PATH_MAX];
        scratch_path(path, raw ? "outside-raw.db" : "outside-take.db");
        make_database(path);
        struct holder h;
        if (!start_turn_holder(path, raw, &h)) continue;
        check_sqlite_is_free(path, who);

        sqlite3 *db = open_db(path);
        wl_queue *q = NULL, *qp = NULL;
        EXPECT_RC(WL_OK, wl_queue_new(path, &q));
        EXPECT_RC(WL_OK, wl_queue_new_with_strategy(path, WL_STRATEGY_POLL, &qp));
        /* Warm up the busy path (valgrind translates code on its first run). A turn granted
         * here is given back, so that the checks below report the grant, not a held turn. */
        EXPECT_RC(WL_BUSY, wl_queue_take(q, WL_BUSY_STATEMENT, 0.1, NULL, NULL));
        if (wl_queue_holding(q)) wl_queue_release(q, NULL);

        if (!raw) { /* a transaction's wait (1 s at least), once */
            double t0 = now();
            EXPECT_RC(WL_BUSY, wl_queue_begin(q, db, 1.0, NULL));
            double elapsed = now() - t0;
            if (wl_queue_holding(q)) wl_queue_rollback(q, db);
            check_busy_sentence(BUSY_TXN_FMT, 1.0, 3.0);
            CHECK(elapsed >= 1.0, "%s: the busy transaction gave up after %.3f s", who, elapsed);
            CHECK(sqlite3_get_autocommit(db) == 1, "%s: a transaction was begun", who);
        }

        EXPECT_RC(WL_BUSY, wl_queue_exec(q, db, "INSERT INTO t VALUES (1)", 0.3, NULL));
        check_busy_sentence(BUSY_STMT_FMT, 0.3, 2.3);
        wl_error *err = wl_last_error();
        CHECK(wl_error_busy_holder_pid(err) == (uint32_t)h.pid, "%s: holder pid %u, expected %d",
              who, wl_error_busy_holder_pid(err), (int)h.pid);
        wl_error_free(err);
        EXPECT_RC(WL_BUSY, wl_queue_take(qp, WL_BUSY_STATEMENT, 0.3, NULL, NULL));
        check_busy_sentence(BUSY_TAKE_FMT, 0.3, 2.3);
        if (wl_queue_holding(qp)) wl_queue_release(qp, NULL);
        CHECK(!wl_queue_holding(q) && !wl_queue_holding(qp), "%s: a busy call holds a turn", who);
        check_sqlite_is_free(path, who);
        CHECK(count_rows(db, "SELECT count(*) FROM t") == 0, "%s: the busy statement ran", who);

        CHECK(stop_holder(&h) == 0, "%s: the holder failed", who);
        double t0 = now();
        EXPECT_RC(WL_OK, wl_queue_take(qp, WL_BUSY_STATEMENT, 5.0, NULL, NULL));
        CHECK(now() - t0 < 1.0, "%s: the freed turn took %.3f s", who, now() - t0);
        EXPECT_RC(WL_OK, wl_queue_release(qp, NULL));
        wl_queue_free(qp);
        wl_queue_free(q);
        sqlite3_close(db);
    }
}

/* The queue of spawning_holder_child, reachable until it exits (it dies holding the turn). */
static wl_queue *spawning_holder_queue;

/* Takes the turn, starts `sleep 30` with posix_spawn (no fork handler runs there: only
 * O_CLOEXEC keeps the lock files out of the program), reports its pid and exits without
 * giving the turn back, as a crashed holder would (the kernel closes its descriptors). */
static int spawning_holder_child(const char *path, int report_fd) {
    alarm(60);
    if (wl_queue_new(path, &spawning_holder_queue) != WL_OK) return 50;
    if (wl_queue_take(spawning_holder_queue, WL_BUSY_STATEMENT, 10.0, NULL, NULL) != WL_OK)
        return 51;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"sleep", "30", NULL};
    pid_t sleeper = 0;
    int rc = posix_spawnp(&sleeper, "sleep", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return 52;
    if (write(report_fd, &sleeper, sizeof sleeper) != (ssize_t)sizeof sleeper) return 53;
    return 0; /* still holding the turn */
}

/* A holder that started a program outliving it and died: the next writer gets the turn at
 * once (the program inherited none of the lock files). */
static void test_spawned_program_does_not_keep_a_dead_holders_turn(void) {
    char path[PATH_MAX];
    scratch_path(path, "spawn.db");
    make_database(path);
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        close(report[0]);
        _exit(spawning_holder_child(path, report[1]));
    }
    close(report[1]);
    pid_t sleeper = 0;
    ssize_t got = read(report[0], &sleeper, sizeof sleeper);
    close(report[0]);
    int status = wait_child(child);
    CHECK(status == 0 && got == (ssize_t)sizeof sleeper && sleeper > 0,
          "the holder exited with %d before starting its program", status);
    if (got != (ssize_t)sizeof sleeper || sleeper <= 0) return;
    CHECK(kill(sleeper, 0) == 0, "the spawned program %d is not running", (int)sleeper);
    note_exec_pid(sleeper);

    wl_queue *q = NULL;
    EXPECT_RC(WL_OK, wl_queue_new(path, &q));
    double t0 = now();
    EXPECT_RC(WL_OK, wl_queue_take(q, WL_BUSY_STATEMENT, 2.0, NULL, NULL));
    double took = now() - t0;
    CHECK(took < 0.5, "the dead holder's turn took %.3f s to come free while its spawned program "
          "(pid %d) lives", took, (int)sleeper);
    printf("    the dead holder's turn was taken in %.1f ms, its spawned program still running\n",
           took * 1e3);
    EXPECT_RC(WL_OK, wl_queue_release(q, NULL));
    wl_queue_free(q);
    kill(sleeper, SIGKILL);
}

/* ------------------------------------------------------------------------ */
/* The writer protocol on a connection of the program's own, scripted        */
/* ------------------------------------------------------------------------ */

/* Rows of text cells (NULL cells are SQL NULL), `nrows` x `ncols` row by row. */
static wl_pg_text_rows *text_rows(size_t nrows, size_t ncols, const char *const *cells) {
    wl_pg_text_rows *rows = NULL;
    EXPECT_RC(WL_OK, wl_pg_text_rows_new(&rows));
    for (size_t r = 0; r < nrows; r++) {
        EXPECT_RC(WL_OK, wl_pg_text_rows_add_row(rows));
        for (size_t c = 0; c < ncols; c++) EXPECT_RC(WL_OK, wl_pg_text_rows_add_cell(rows, cells[r * ncols + c]));
    }
    return rows;
}

/* Feeds rows to `p`; returns the step (the code in *rc). */
static wl_pg_step feed_cells(wl_pg_protocol *p, size_t nrows, size_t ncols, const char *const *cells,
                             wl_result *rc) {
    wl_pg_text_rows *rows = nrows ? text_rows(nrows, ncols, cells) : NULL;
    wl_pg_step step = 99;
    *rc = wl_pg_protocol_feed_rows(p, rows, &step);
    wl_pg_text_rows_free(rows);
    return step;
}

/* Feeds "ran, no rows"; checks WL_OK and returns the step. */
static wl_pg_step feed_ok(wl_pg_protocol *p) {
    wl_pg_step step = 99;
    EXPECT_RC(WL_OK, wl_pg_protocol_feed_rows(p, NULL, &step));
    return step;
}

/* Checks that `p` asks to run a statement of `kind` whose SQL starts with `sql`. */
#define EXPECT_RUN(p, step, kind, name, sql)                                                    \
    do {                                                                                       \
        CHECK((step) == WL_PG_STEP_RUN, "step %u, expected WL_PG_STEP_RUN", (unsigned)(step));  \
        CHECK(wl_pg_protocol_kind(p) == (kind), "kind %u (%s), expected %s", (unsigned)wl_pg_protocol_kind(p), \
              wl_pg_protocol_kind_name(p) ? wl_pg_protocol_kind_name(p) : "NULL", name);        \
        CHECK_STR(wl_pg_protocol_kind_name(p), name);                                          \
        CHECK(wl_pg_protocol_sql(p) && strncmp(wl_pg_protocol_sql(p), sql, strlen(sql)) == 0,  \
              "SQL \"%s\" does not start with \"%s\"",                                         \
              wl_pg_protocol_sql(p) ? wl_pg_protocol_sql(p) : "(NULL)", sql);                   \
    } while (0)

static const char LOCK_SQL[] = "SELECT pg_advisory_xact_lock(1279607879)";
static const char CANCELLED[] = "canceling statement due to lock timeout";

static void test_pg_protocol_granted_at_once_then_commit(void) {
    wl_pg_protocol *p = NULL;
    wl_pg_step step = 99;
    wl_result rc;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_IDLE, &p));
    CHECK(!wl_pg_protocol_finished(p), "a new protocol says it finished");
    CHECK(wl_pg_protocol_sql(p) == NULL && wl_pg_protocol_kind(p) == WL_PG_KIND_NONE,
          "a statement before the start");
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_BEGIN, "begin", "BEGIN");
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_WRITER_LOCK, "writer_lock", LOCK_SQL);
    CHECK_STR(wl_pg_protocol_sql(p), LOCK_SQL);
    const char *lock_row[] = {""}; /* pg_advisory_xact_lock returns void: libpq shows "" */
    step = feed_cells(p, 1, 1, lock_row, &rc);
    CHECK(rc == WL_OK, "%s", last_message());
    EXPECT_RUN(p, step, WL_PG_KIND_FLOOR_CHECK, "floor_check", "SELECT ");
    const char *check[] = {"1", "1", "f"}; /* floor 1, session version 1, no refused writer */
    step = feed_cells(p, 1, 3, check, &rc);
    CHECK(rc == WL_OK, "%s", last_message());
    CHECK(step == WL_PG_STEP_GRANTED, "step %u, expected GRANTED", (unsigned)step);
    CHECK(wl_pg_protocol_finished(p), "granted but not finished");
    CHECK(wl_pg_protocol_sql(p) == NULL && wl_pg_protocol_kind_name(p) == NULL,
          "a statement is still offered after the grant");
    CHECK(wl_pg_protocol_error(p) == NULL, "an error after a grant");
    wl_pg_write *w = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_granted(p, &w));
    CHECK(wl_pg_write_waits(w) == 1, "waits %u", wl_pg_write_waits(w));
    CHECK(wl_pg_write_floor(w) == 1, "floor %lld", (long long)wl_pg_write_floor(w));
    CHECK(wl_pg_write_refused_count(w) == 0, "refused %zu", wl_pg_write_refused_count(w));
    wl_strings *alerts = NULL;
    EXPECT_RC(WL_OK, wl_pg_write_alerts(w, NULL, 0, &alerts));
    CHECK(wl_strings_count(alerts) == 0, "%zu alerts", wl_strings_count(alerts));
    wl_strings_free(alerts);
    wl_pg_write_free(w);
    wl_pg_protocol_free(p);

    /* The end: COMMIT, then done. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_end(true, false, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_COMMIT, "commit", "COMMIT");
    step = feed_ok(p);
    CHECK(step == WL_PG_STEP_DONE, "step %u, expected DONE", (unsigned)step);
    wl_pg_protocol_free(p);

    /* A transaction the program opened, unused: the writer lock is its first statement. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_WRITER_LOCK, "writer_lock", LOCK_SQL);
    wl_pg_protocol_free(p);
}

static void test_pg_protocol_cancelled_waits_then_not_granted(void) {
    wl_pg_protocol *p = NULL;
    wl_pg_step step = 99;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_IDLE, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    for (int wait = 1; wait <= 3; wait++) {
        EXPECT_RUN(p, step, WL_PG_KIND_BEGIN, "begin", "BEGIN");
        step = feed_ok(p);
        EXPECT_RUN(p, step, WL_PG_KIND_WRITER_LOCK, "writer_lock", LOCK_SQL);
        EXPECT_RC(WL_OK, wl_pg_protocol_feed_error(p, "55P03", CANCELLED, NULL, NULL, false, &step));
        EXPECT_RUN(p, step, WL_PG_KIND_ROLLBACK, "rollback", "ROLLBACK");
        if (wait < 3) step = feed_ok(p);
    }
    wl_result rc = wl_pg_protocol_feed_rows(p, NULL, &step);
    CHECK(rc == WL_PG_NOT_GRANTED, "rc %s", wl_result_name((uint32_t)rc));
    CHECK(step == WL_PG_STEP_FAILED, "step %u, expected FAILED", (unsigned)step);
    CHECK_STR(last_message(), "the ledger writer lock was not granted in 3 waits of 10 seconds");
    wl_error *err = wl_pg_protocol_error(p);
    CHECK(wl_error_code(err) == WL_PG_NOT_GRANTED, "kept code %s",
          wl_result_name((uint32_t)wl_error_code(err)));
    char buf[256];
    wl_error_message(err, buf, sizeof buf);
    CHECK_STR(buf, "the ledger writer lock was not granted in 3 waits of 10 seconds");
    wl_error_sqlstate(err, buf, sizeof buf);
    CHECK_STR(buf, "55P03");
    wl_error_free(err);
    CHECK(wl_pg_protocol_finished(p), "failed but not finished");
    wl_pg_protocol_free(p);

    /* Configured waits shape the message; one message per attempt, granted on the second. */
    wl_pg_settings *s = NULL;
    EXPECT_RC(WL_OK, wl_pg_settings_new(&s));
    EXPECT_RC(WL_OK, wl_pg_settings_set_lock_wait(s, 1.5));
    EXPECT_RC(WL_OK, wl_pg_settings_set_lock_tries(s, 2));
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write_in_one_message(s, WL_PG_TX_IDLE, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_START_WRITE, "start_write",
               "BEGIN; SELECT pg_advisory_xact_lock(1279607879); SELECT ");
    EXPECT_RC(WL_OK, wl_pg_protocol_feed_error(p, "55P03", CANCELLED, NULL, NULL, false, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_ROLLBACK, "rollback", "ROLLBACK");
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_START_WRITE, "start_write", "BEGIN; ");
    const char *check[] = {NULL, "1", "false"}; /* no stored floor */
    wl_result rc2;
    step = feed_cells(p, 1, 3, check, &rc2);
    CHECK(rc2 == WL_OK && step == WL_PG_STEP_GRANTED, "rc %s step %u: %s",
          wl_result_name((uint32_t)rc2), (unsigned)step, last_message());
    wl_pg_write *w = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_granted(p, &w));
    CHECK(wl_pg_write_waits(w) == 2 && wl_pg_write_floor(w) == -1, "waits %u floor %lld",
          wl_pg_write_waits(w), (long long)wl_pg_write_floor(w));
    wl_pg_write_free(w);
    wl_pg_protocol_free(p);

    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write_in_one_message(s, WL_PG_TX_IDLE, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    for (int wait = 1; wait <= 2; wait++) {
        EXPECT_RC(WL_OK, wl_pg_protocol_feed_error(p, "55P03", CANCELLED, NULL, NULL, false, &step));
        if (wait < 2) {
            step = feed_ok(p);
        }
    }
    EXPECT_RC(WL_PG_NOT_GRANTED, wl_pg_protocol_feed_rows(p, NULL, &step));
    CHECK_STR(last_message(), "the ledger writer lock was not granted in 2 waits of 1.5 seconds");
    wl_pg_protocol_free(p);
    wl_pg_settings_free(s);

    /* Another error of the lock statement is reported as it is, after the rollback. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RC(WL_OK, wl_pg_protocol_feed_error(p, "57014", "canceling statement due to statement timeout",
                                               "a detail", "a hint", false, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_ROLLBACK, "rollback", "ROLLBACK");
    EXPECT_RC(WL_PG_DATABASE, wl_pg_protocol_feed_rows(p, NULL, &step));
    CHECK_STR(last_message(), "canceling statement due to statement timeout");
    err = wl_last_error();
    wl_error_sqlstate(err, buf, sizeof buf);
    CHECK_STR(buf, "57014");
    wl_error_free(err);
    wl_pg_protocol_free(p);

    /* A fatal error ends the session: no rollback is asked for. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RC(WL_PG_SESSION_ENDED,
              wl_pg_protocol_feed_error(p, "25P03", "terminating connection due to idle-in-transaction timeout",
                                        NULL, NULL, true, &step));
    CHECK(step == WL_PG_STEP_FAILED, "step %u", (unsigned)step);
    wl_pg_protocol_free(p);
}

static void test_pg_protocol_below_the_floor_is_refused(void) {
    wl_pg_protocol *p = NULL;
    wl_pg_step step = 99;
    wl_result rc;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_dialled_port(p, 5432));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    const char *check[] = {"2", "1", "f"}; /* floor 2 above this writer's version 1 */
    step = feed_cells(p, 1, 3, check, &rc);
    CHECK(rc == WL_OK, "%s", last_message());
    EXPECT_RUN(p, step, WL_PG_KIND_REFUSAL_LOCK, "refusal_lock", "SELECT ");
    CHECK_CONTAINS(wl_pg_protocol_sql(p), "pg_try_advisory_lock_shared(1280788050, 65538)");
    const char *locked[] = {"t", "1"};
    step = feed_cells(p, 1, 2, locked, &rc);
    EXPECT_RUN(p, step, WL_PG_KIND_ROLLBACK, "rollback", "ROLLBACK");
    EXPECT_RC(WL_PG_REFUSED, wl_pg_protocol_feed_rows(p, NULL, &step));
    CHECK(step == WL_PG_STEP_FAILED, "step %u", (unsigned)step);
    CHECK_STR(last_message(), "ledger writer version 1 is below version 2, the oldest the shared "
                              "database allows; update its code and restart it");
    wl_error *err = wl_pg_protocol_error(p);
    char state[16];
    wl_error_sqlstate(err, state, sizeof state);
    CHECK_STR(state, WL_PG_REFUSED_SQLSTATE);
    CHECK(wl_error_refused_version(err) == 1 && wl_error_refused_floor(err) == 2, "refused %lld/%lld",
          (long long)wl_error_refused_version(err), (long long)wl_error_refused_floor(err));
    wl_error_free(err);
    wl_pg_protocol_free(p);

    /* A session that does not carry this writer's version is not granted. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_dialled_unix(p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    const char *unset[] = {"1", NULL, "f"};
    step = feed_cells(p, 1, 3, unset, &rc);
    EXPECT_RUN(p, step, WL_PG_KIND_ROLLBACK, "rollback", "ROLLBACK");
    EXPECT_RC(WL_PG_SETTING, wl_pg_protocol_feed_rows(p, NULL, &step));
    CHECK_CONTAINS(last_message(), "agentihooks.ledger_writer_version");
    wl_pg_protocol_free(p);
}

static void test_pg_protocol_names_refused_writers(void) {
    wl_pg_protocol *p = NULL;
    wl_pg_step step = 99;
    wl_result rc;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    const char *check[] = {"1", "1", "t"}; /* a refused writer's lock is held */
    step = feed_cells(p, 1, 3, check, &rc);
    EXPECT_RUN(p, step, WL_PG_KIND_REFUSED_WRITERS, "refused_writers", "SELECT ");
    const char *refused[] = {"10.0.0.5", "4242", "0", "1", NULL, "17", "0", "1"};
    step = feed_cells(p, 2, 4, refused, &rc);
    CHECK(rc == WL_OK && step == WL_PG_STEP_GRANTED, "rc %s step %u: %s", wl_result_name((uint32_t)rc),
          (unsigned)step, last_message());
    wl_pg_write *w = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_granted(p, &w));
    CHECK(wl_pg_write_refused_count(w) == 2, "refused %zu", wl_pg_write_refused_count(w));
    wl_pg_refused_writer rw;
    memset(&rw, 0, sizeof rw);
    EXPECT_RC(WL_OK, wl_pg_write_refused(w, 0, &rw));
    CHECK_STR(rw.writer, "10.0.0.5");
    CHECK(rw.pid == 4242 && rw.version == 0 && rw.floor == 1, "pid %d version %lld floor %lld", rw.pid,
          (long long)rw.version, (long long)rw.floor);
    EXPECT_RC(WL_OK, wl_pg_write_refused(w, 1, &rw));
    CHECK_STR(rw.writer, WL_PG_UNSEEN_CLIENT);
    wl_strings *alerts = NULL;
    EXPECT_RC(WL_OK, wl_pg_write_alerts(w, NULL, 0, &alerts));
    CHECK(wl_strings_count(alerts) == 2, "%zu alerts", wl_strings_count(alerts));
    CHECK_STR(wl_strings_get(alerts, 0),
              "The ledger writer at 10.0.0.5 was refused: ledger writer version 0 is below version 1, "
              "the oldest the shared database allows; update its code and restart it");
    wl_strings_free(alerts);
    wl_pg_write_free(w);
    wl_pg_protocol_free(p);
}

/* A refusal count the program kept from its last write: while the floor check reads the same
 * count the scan of pg_locks is skipped; when it moved, the scan runs on its own. */
static void test_pg_protocol_known_clean_count_skips_the_scan(void) {
    wl_pg_protocol *p = NULL;
    wl_pg_step step = 99;
    wl_result rc;
    /* The first write knows no count: its floor check scans and reports the count. */
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_FLOOR_CHECK, "floor_check", "SELECT ");
    CHECK(strstr(wl_pg_protocol_sql(p), "pg_locks") != NULL, "no scan without a known count: %s",
          wl_pg_protocol_sql(p));
    const char *first[] = {"1", "1", "f", "5"};
    step = feed_cells(p, 1, 4, first, &rc);
    CHECK(rc == WL_OK && step == WL_PG_STEP_GRANTED, "step %u: %s", (unsigned)step, last_message());
    wl_pg_write *w = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_granted(p, &w));
    int64_t clean = wl_pg_write_refusals_clean(w);
    CHECK(clean == 5, "refusals_clean %lld, expected 5", (long long)clean);
    wl_pg_write_free(w);
    wl_pg_protocol_free(p);

    /* The same count: no scan, granted at once. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_known_clean(p, clean));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_FLOOR_CHECK, "floor_check", "SELECT ");
    CHECK(strstr(wl_pg_protocol_sql(p), "pg_locks") == NULL, "a scan at a known count: %s",
          wl_pg_protocol_sql(p));
    const char *same[] = {"1", "1", NULL, "5"};
    step = feed_cells(p, 1, 4, same, &rc);
    CHECK(rc == WL_OK && step == WL_PG_STEP_GRANTED, "step %u: %s", (unsigned)step, last_message());
    wl_pg_protocol_free(p);

    /* The count moved: the scan runs as a statement of its own. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_known_clean(p, clean));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    const char *moved[] = {"1", "1", NULL, "6"};
    step = feed_cells(p, 1, 4, moved, &rc);
    EXPECT_RUN(p, step, WL_PG_KIND_ANY_REFUSED, "any_refused", "SELECT ");
    const char *none[] = {"f"};
    step = feed_cells(p, 1, 1, none, &rc);
    CHECK(rc == WL_OK && step == WL_PG_STEP_GRANTED, "step %u: %s", (unsigned)step, last_message());
    w = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_granted(p, &w));
    CHECK(wl_pg_write_refusals_clean(w) == 6, "refusals_clean %lld, expected 6",
          (long long)wl_pg_write_refusals_clean(w));
    wl_pg_write_free(w);
    wl_pg_protocol_free(p);
    /* -1, a write's "nothing to keep", is no count: the check scans in the same statement. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_known_clean(p, -1));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_FLOOR_CHECK, "floor_check", "SELECT ");
    CHECK(strstr(wl_pg_protocol_sql(p), "pg_locks") != NULL, "no scan with a count of -1: %s",
          wl_pg_protocol_sql(p));
    wl_pg_protocol_free(p);
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_known_clean(NULL, 1));
    CHECK(wl_pg_write_refusals_clean(NULL) == -1, "refusals_clean of NULL");
}

static void test_pg_protocol_setup_ensure_and_end(void) {
    wl_pg_protocol *p = NULL;
    wl_pg_step step = 99;
    wl_result rc;
    EXPECT_RC(WL_OK, wl_pg_protocol_ensure(NULL, WL_PG_TX_IDLE, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_BEGIN, "begin", "BEGIN");
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_WRITER_LOCK, "writer_lock", LOCK_SQL);
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_SETUP_LIMIT, "setup_limit", "SET LOCAL statement_timeout = 0");
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_SCHEMA_CHECK, "schema_check", "");
    const char *current[] = {"t", "f"}; /* current, writable */
    step = feed_cells(p, 1, 2, current, &rc);
    EXPECT_RUN(p, step, WL_PG_KIND_STORE_FLOOR, "store_floor", "");
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_COMMIT, "commit", "COMMIT");
    CHECK(!wl_pg_protocol_set_up(p), "set up before the commit");
    step = feed_ok(p);
    CHECK(step == WL_PG_STEP_DONE && wl_pg_protocol_set_up(p), "step %u set_up %d", (unsigned)step,
          (int)wl_pg_protocol_set_up(p));
    wl_pg_protocol_free(p);

    /* The owner's set-up runs the program's schema first. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_setup(NULL, "CREATE TABLE notes (body text)", WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_WRITER_LOCK, "writer_lock", LOCK_SQL);
    step = feed_ok(p);
    step = feed_ok(p);
    EXPECT_RUN(p, step, WL_PG_KIND_HOST_SCHEMA, "host_schema", "CREATE TABLE notes (body text)");
    EXPECT_RC(WL_OK, wl_pg_protocol_feed_error(p, "42501", "permission denied for schema public", NULL,
                                               NULL, false, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_ROLLBACK, "rollback", "ROLLBACK");
    EXPECT_RC(WL_PG_DATABASE, wl_pg_protocol_feed_rows(p, NULL, &step));
    CHECK_STR(last_message(), "permission denied for schema public");
    wl_pg_protocol_free(p);

    /* A commit after a failed statement can only roll back, and says so. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_end(true, true, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RUN(p, step, WL_PG_KIND_ROLLBACK, "rollback", "ROLLBACK");
    EXPECT_RC(WL_PG_ROLLED_BACK, wl_pg_protocol_feed_rows(p, NULL, &step));
    wl_pg_protocol_free(p);

    /* A connection lost during COMMIT leaves the outcome unknown. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_end(true, false, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RC(WL_PG_OUTCOME_UNKNOWN,
              wl_pg_protocol_feed_lost(p, "server closed the connection unexpectedly\n", &step));
    CHECK(step == WL_PG_STEP_FAILED, "step %u", (unsigned)step);
    CHECK_NOT_CONTAINS(last_message(), "rolled back");
    wl_pg_protocol_free(p);

    /* Lost before the lock: closed. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_UNUSED, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RC(WL_PG_CLOSED, wl_pg_protocol_feed_lost(p, "no connection to the server", &step));
    wl_pg_protocol_free(p);
}

static void test_pg_protocol_misuse_is_refused_clearly(void) {
    wl_pg_protocol *p = (wl_pg_protocol *)0x1;
    wl_pg_step step = 99;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_write(NULL, 7, &p));
    CHECK(p == NULL, "*out not reset on failure");
    CHECK_CONTAINS(last_message(), "7 is not WL_PG_TX_IDLE (0)");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_write(NULL, WL_PG_TX_IDLE, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_ensure(NULL, WL_PG_TX_IDLE, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_end(true, false, NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_setup(NULL, "\xff", WL_PG_TX_IDLE, &p));
    /* Settings that would refuse their own writes. */
    wl_pg_settings *s = NULL;
    EXPECT_RC(WL_OK, wl_pg_settings_new(&s));
    EXPECT_RC(WL_OK, wl_pg_settings_set_required(s, 2));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_write(s, WL_PG_TX_IDLE, &p));
    wl_pg_settings_free(s);

    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_start(NULL, &step));
    CHECK(step == WL_PG_STEP_NONE, "step %u after a NULL protocol", (unsigned)step);
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_dialled_port(NULL, 5432));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_dialled_unix(NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_feed_rows(NULL, NULL, &step));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_feed_lost(NULL, "x", &step));
    CHECK(wl_pg_protocol_sql(NULL) == NULL && wl_pg_protocol_kind(NULL) == WL_PG_KIND_NONE &&
              wl_pg_protocol_kind_name(NULL) == NULL && !wl_pg_protocol_finished(NULL) &&
              !wl_pg_protocol_set_up(NULL) && wl_pg_protocol_error(NULL) == NULL,
          "accessors on NULL");
    wl_pg_write *w = (wl_pg_write *)0x1;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_granted(NULL, &w));
    CHECK(w == NULL, "*out not reset on failure");
    wl_pg_protocol_free(NULL);

    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_IDLE, &p));
    EXPECT_RC(WL_STATE, wl_pg_protocol_feed_rows(p, NULL, &step));
    CHECK(step == WL_PG_STEP_NONE, "step %u", (unsigned)step);
    CHECK_CONTAINS(last_message(), "call wl_pg_protocol_start first");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_start(p, NULL));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    EXPECT_RC(WL_STATE, wl_pg_protocol_start(p, &step));
    CHECK(step == WL_PG_STEP_NONE, "step %u", (unsigned)step);
    /* Bad replies leave the protocol where it was. */
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_feed_error(p, NULL, "m", NULL, NULL, false, &step));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_feed_error(p, "55P03", NULL, NULL, NULL, false, &step));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_feed_error(p, "55P03", "m", "\xfe", NULL, false, &step));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_feed_lost(p, NULL, &step));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_protocol_feed_rows(p, NULL, NULL));
    CHECK(step == WL_PG_STEP_NONE, "step %u", (unsigned)step);
    CHECK_STR(wl_pg_protocol_sql(p), "BEGIN");
    EXPECT_RC(WL_STATE, wl_pg_protocol_granted(p, &w));
    CHECK(wl_pg_protocol_error(p) == NULL, "an error while running");
    wl_pg_protocol_free(p);

    /* Fed after it finished: refused, not a crash, and nothing moves. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_end(false, false, &p));
    EXPECT_RC(WL_OK, wl_pg_protocol_start(p, &step));
    step = feed_ok(p);
    CHECK(step == WL_PG_STEP_DONE, "step %u", (unsigned)step);
    EXPECT_RC(WL_STATE, wl_pg_protocol_feed_rows(p, NULL, &step));
    CHECK(step == WL_PG_STEP_NONE, "step %u", (unsigned)step);
    CHECK_CONTAINS(last_message(), "the writer protocol has finished");
    EXPECT_RC(WL_STATE, wl_pg_protocol_feed_error(p, "55P03", "m", NULL, NULL, false, &step));
    EXPECT_RC(WL_STATE, wl_pg_protocol_feed_lost(p, "gone", &step));
    wl_pg_protocol_free(p);

    /* A transaction that already ran a statement: failed at the start. */
    p = NULL;
    EXPECT_RC(WL_OK, wl_pg_protocol_write(NULL, WL_PG_TX_OPEN_USED, &p));
    EXPECT_RC(WL_STATE, wl_pg_protocol_start(p, &step));
    CHECK(step == WL_PG_STEP_FAILED, "step %u", (unsigned)step);
    CHECK_STR(last_message(), "cannot start a transaction within a transaction");
    wl_pg_protocol_free(p);

    /* Text rows. */
    wl_pg_text_rows *rows = NULL;
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_text_rows_new(NULL));
    EXPECT_RC(WL_OK, wl_pg_text_rows_new(&rows));
    EXPECT_RC(WL_STATE, wl_pg_text_rows_add_cell(rows, "x"));
    CHECK_CONTAINS(last_message(), "wl_pg_text_rows_add_row");
    EXPECT_RC(WL_OK, wl_pg_text_rows_add_row(rows));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_text_rows_add_cell(rows, "\xc3("));
    EXPECT_RC(WL_OK, wl_pg_text_rows_add_cell(rows, NULL));
    CHECK(wl_pg_text_rows_count(rows) == 1, "count %zu", wl_pg_text_rows_count(rows));
    EXPECT_RC(WL_OK, wl_pg_text_rows_clear(rows));
    CHECK(wl_pg_text_rows_count(rows) == 0 && wl_pg_text_rows_count(NULL) == 0, "clear");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_text_rows_add_row(NULL));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_text_rows_add_cell(NULL, "x"));
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_text_rows_clear(NULL));
    wl_pg_text_rows_free(rows);
    wl_pg_text_rows_free(NULL);
}

static void test_pg_settings_check_of_a_foreign_connection(void) {
    char sql[2048];
    size_t n = wl_pg_settings_check_sql(NULL, sql, sizeof sql);
    CHECK(n == 0, "check_sql of NULL settings is %zu bytes", n);
    wl_pg_settings *s = NULL;
    EXPECT_RC(WL_OK, wl_pg_settings_new(&s));
    n = wl_pg_settings_check_sql(s, sql, sizeof sql);
    CHECK(n > 0 && n < sizeof sql, "check_sql is %zu bytes", n);
    CHECK_CONTAINS(sql, "'lock_timeout'");
    CHECK_CONTAINS(sql, "'agentihooks.ledger_writer_version'");
    /* What the server answers when every startup setting took effect (base units). */
    const char *in_effect[] = {
        "lock_timeout", "10000", "10s", "f",
        "idle_in_transaction_session_timeout", "15000", "15s", "f",
        "statement_timeout", "60000", "1min", "f",
        "agentihooks.ledger_writer_version", NULL, "1", "f",
        "tcp_keepalives_idle", "30", "30", "f",
        "tcp_keepalives_interval", "10", "10", "f",
        "tcp_keepalives_count", "3", "3", "f",
        "tcp_user_timeout", "60000", "1min", "f",
    };
    wl_pg_text_rows *rows = text_rows(8, 4, in_effect);
    EXPECT_RC(WL_OK, wl_pg_settings_verify(s, rows));
    wl_pg_text_rows_free(rows);
    /* A pooler that dropped the options: the server's default lock_timeout of 0. */
    in_effect[1] = "0";
    rows = text_rows(8, 4, in_effect);
    EXPECT_RC(WL_PG_SETTING, wl_pg_settings_verify(s, rows));
    CHECK_CONTAINS(last_message(), "lock_timeout");
    wl_pg_text_rows_free(rows);
    rows = text_rows(0, 0, NULL);
    EXPECT_RC(WL_PG_SETTING, wl_pg_settings_verify(NULL, rows));
    wl_pg_text_rows_free(rows);
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_settings_verify(s, NULL));
    wl_pg_settings_free(s);
}

/* ------------------------------------------------------------------------ */
/* Postgres                                                                  */
/* ------------------------------------------------------------------------ */

static const char *admin_url;
static wl_pg_conn *admin;
static char created[8][64];
static int ncreated;

/* A fresh database (the floor can never be lowered); returns its URL (malloc'd). */
static char *fresh_database(const char *tag) {
    if (!admin) {
        if (wl_pg_connect(admin_url, NULL, &admin) != WL_OK) {
            CHECK(0, "cannot connect to TEST_DATABASE_URL: %s", last_message());
            return NULL;
        }
    }
    char name[64], sql[128], drop[128];
    snprintf(name, sizeof name, "wl_c_abi_%d_%s", (int)getpid(), tag);
    /* One statement per call: CREATE DATABASE cannot run inside a transaction block. */
    snprintf(drop, sizeof drop, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    if (wl_pg_exec_batch(admin, drop) != WL_OK) {
        CHECK(0, "%s: %s", drop, last_message());
        return NULL;
    }
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    if (wl_pg_exec_batch(admin, sql) != WL_OK) {
        CHECK(0, "%s: %s", sql, last_message());
        return NULL;
    }
    if (ncreated < 8) snprintf(created[ncreated++], sizeof created[0], "%s", name);
    return url_with_database(admin_url, name);
}

static wl_pg_conn *connect_or_fail(const char *url, const wl_pg_settings *s) {
    wl_pg_conn *conn = NULL;
    if (wl_pg_connect(url, s, &conn) != WL_OK) {
        CHECK(0, "wl_pg_connect: %s", last_message());
        return NULL;
    }
    return conn;
}

static void show_is(wl_pg_conn *conn, const char *name, const char *want) {
    char buf[64];
    size_t len = 0;
    EXPECT_RC(WL_OK, wl_pg_show(conn, name, buf, sizeof buf, &len));
    CHECK(len == strlen(want), "SHOW %s length %zu", name, len);
    CHECK(strcmp(buf, want) == 0, "SHOW %s is '%s', expected '%s'", name, buf, want);
}

static void test_pg_connect_show_and_write(void) {
    char *url = fresh_database("write");
    if (!url) return;
    wl_pg_conn *conn = connect_or_fail(url, NULL);
    if (!conn) {
        free(url);
        return;
    }
    CHECK(wl_pg_pid(conn) > 0, "pid %d", wl_pg_pid(conn));
    CHECK(!wl_pg_is_closed(conn), "closed right after connecting");
    show_is(conn, "lock_timeout", "10s");
    show_is(conn, "idle_in_transaction_session_timeout", "15s");
    show_is(conn, "statement_timeout", "1min");
    show_is(conn, WL_PG_VERSION_SETTING, "1");

    int64_t floor_v = 0;
    EXPECT_RC(WL_OK, wl_pg_stored_floor(conn, &floor_v));
    CHECK(floor_v == -1, "a fresh database stores floor %lld", (long long)floor_v);
    EXPECT_RC(WL_OK, wl_pg_setup_schema(conn, "CREATE TABLE IF NOT EXISTS notes(id serial PRIMARY "
                                              "KEY, body text NOT NULL)"));
    EXPECT_RC(WL_OK, wl_pg_stored_floor(conn, &floor_v));
    CHECK(floor_v == 1, "stored floor %lld, expected 1", (long long)floor_v);

    const char *ins[] = {"main", "0"};
    uint64_t affected = 0;
    EXPECT_RC(WL_OK, wl_pg_exec(conn, "INSERT INTO ledgers(slug, generation) VALUES ($1, $2)", 2,
                                ins, &affected));
    CHECK(affected == 1, "insert affected %llu", (unsigned long long)affected);

    /* The write: lock + floor check, a row change, the generation bump, commit. */
    wl_pg_write *w = NULL;
    EXPECT_RC(WL_OK, wl_pg_write_begin(conn, &w));
    CHECK(wl_pg_in_transaction(conn), "no transaction after write_begin");
    CHECK(wl_pg_write_waits(w) == 1, "waits %u", wl_pg_write_waits(w));
    CHECK(wl_pg_write_floor(w) == 1, "floor %lld", (long long)wl_pg_write_floor(w));
    CHECK(wl_pg_write_refused_count(w) == 0, "refused writers in a fresh database");
    wl_strings *alerts = NULL;
    EXPECT_RC(WL_OK, wl_pg_write_alerts(w, NULL, 0, &alerts));
    CHECK(wl_strings_count(alerts) == 0, "alerts without refused writers");
    wl_strings_free(alerts);
    wl_pg_rows *rows = NULL;
    EXPECT_RC(WL_OK, wl_pg_query(conn,
                                 "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' "
                                 "AND objid = 1279607879 AND pid = pg_backend_pid() AND granted",
                                 0, NULL, &rows));
    CHECK(wl_pg_rows_count(rows) == 1 && wl_pg_rows_text(rows, 0, 0) &&
              strcmp(wl_pg_rows_text(rows, 0, 0), "1") == 0,
          "the writer lock is not held inside the write");
    CHECK(wl_pg_rows_column_name(rows, 0) && strcmp(wl_pg_rows_column_name(rows, 0), "n") == 0,
          "column name");
    wl_pg_rows_free(rows);
    const char *change[] = {"main", "1", "row-1"};
    EXPECT_RC(WL_OK, wl_pg_exec(conn,
                                "INSERT INTO row_changes(slug, generation, row_key) VALUES (?, ?, ?)",
                                3, change, &affected));
    const char *bump[] = {"1", "main"};
    EXPECT_RC(WL_OK, wl_pg_exec(conn, "UPDATE ledgers SET generation = ? WHERE slug = ?", 2, bump,
                                &affected));
    CHECK(affected == 1, "update affected %llu", (unsigned long long)affected);
    EXPECT_RC(WL_OK, wl_pg_commit(conn));
    CHECK(!wl_pg_in_transaction(conn), "in a transaction after commit");
    wl_pg_write_free(w);

    const char *slug[] = {"main"};
    EXPECT_RC(WL_OK, wl_pg_query(conn, "SELECT generation, NULL::text AS nothing, true AS yes "
                                       "FROM ledgers WHERE slug = $1",
                                 1, slug, &rows));
    CHECK(wl_pg_rows_count(rows) == 1 && wl_pg_rows_columns(rows) == 3, "rows %zu x %zu",
          wl_pg_rows_count(rows), wl_pg_rows_columns(rows));
    CHECK(wl_pg_rows_text(rows, 0, 0) && strcmp(wl_pg_rows_text(rows, 0, 0), "1") == 0,
          "generation did not move to 1");
    CHECK(wl_pg_rows_is_null(rows, 0, 1) && wl_pg_rows_text(rows, 0, 1) == NULL, "NULL column");
    CHECK(wl_pg_rows_text(rows, 0, 2) && strcmp(wl_pg_rows_text(rows, 0, 2), "t") == 0, "bool");
    CHECK(wl_pg_rows_text(rows, 5, 0) == NULL, "out of range row");
    wl_pg_rows_free(rows);
    EXPECT_RC(WL_OK, wl_pg_query(conn, "SELECT count(*) FROM notes", 0, NULL, &rows));
    CHECK(wl_pg_rows_count(rows) == 1, "the host's extra DDL did not run");
    wl_pg_rows_free(rows);

    /* Error paths keep their SQLSTATE. */
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_exec(conn, "SELECT $1::int", 0, NULL, NULL));
    CHECK_CONTAINS(last_message(), "the statement has 1 placeholders but 0 parameters were given");
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_exec(conn, "SELECT $1::int", 1, NULL, NULL));
    const char *bad_utf8[] = {"\xff"};
    EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_exec(conn, "SELECT $1::text", 1, bad_utf8, NULL));
    EXPECT_RC(WL_PG_DATABASE, wl_pg_exec(conn, "SELECT * FROM no_such_table", 0, NULL, NULL));
    wl_error *err = wl_last_error();
    char state[16];
    wl_error_sqlstate(err, state, sizeof state);
    CHECK_STR(state, "42P01");
    wl_error_free(err);

    EXPECT_RC(WL_OK, wl_pg_begin(conn));
    EXPECT_RC(WL_OK, wl_pg_exec(conn, "SELECT 1", 0, NULL, NULL));
    EXPECT_RC(WL_STATE, wl_pg_write_begin(conn, NULL));
    CHECK_STR(last_message(), "cannot start a transaction within a transaction");
    err = wl_last_error();
    wl_error_sqlstate(err, state, sizeof state);
    CHECK_STR(state, "25001");
    wl_error_free(err);
    EXPECT_RC(WL_OK, wl_pg_rollback(conn));

    /* A failed statement makes COMMIT roll back. */
    EXPECT_RC(WL_OK, wl_pg_write_begin(conn, NULL));
    EXPECT_RC(WL_PG_DATABASE, wl_pg_exec(conn, "SELECT 1/0", 0, NULL, NULL));
    EXPECT_RC(WL_PG_ROLLED_BACK, wl_pg_commit(conn));
    CHECK(!wl_pg_in_transaction(conn), "still in a transaction after a rolled-back commit");

    wl_pg_conn_free(conn);
    free(url);
}

static void test_pg_bad_url(void) {
    wl_pg_settings *s = NULL;
    EXPECT_RC(WL_OK, wl_pg_settings_new(&s));
    EXPECT_RC(WL_OK, wl_pg_settings_set_connect_timeout(s, 3.0));
    wl_pg_conn *conn = (wl_pg_conn *)0x1;
    EXPECT_RC(WL_PG_CONNECT,
              wl_pg_connect("postgresql://writer:s3cr3t-pa55@127.0.0.1:1/ledger", s, &conn));
    CHECK(conn == NULL, "*out set after a failed connect");
    CHECK_CONTAINS(last_message(), "could not connect to the database at");
    CHECK_CONTAINS(last_message(), "127.0.0.1");
    CHECK_NOT_CONTAINS(last_message(), "s3cr3t-pa55");
    EXPECT_RC(WL_PG_CONNECT,
              wl_pg_connect("host=127.0.0.1 port=1 user=writer password=hunter2-secret dbname=x",
                            s, &conn));
    CHECK_NOT_CONTAINS(last_message(), "hunter2-secret");
    EXPECT_RC(WL_PG_CONNECT, wl_pg_connect("postgresql://writer:zz-pw-zz@[not a host", s, &conn));
    CHECK_NOT_CONTAINS(last_message(), "zz-pw-zz");
    CHECK_CONTAINS(last_message(), "the database address is not valid");
    wl_pg_settings_free(s);
}

static void test_pg_floor_refusal_and_alerts(void) {
    char *url = fresh_database("floor");
    if (!url) return;
    wl_pg_conn *old = connect_or_fail(url, NULL); /* version 1 */
    if (!old) {
        free(url);
        return;
    }
    EXPECT_RC(WL_OK, wl_pg_setup_schema(old, NULL));
    EXPECT_RC(WL_OK, wl_pg_exec_batch(old, "INSERT INTO ledgers(slug, generation) VALUES ('main', 0)"));
    /* Raise the floor by hand, as newer code would. */
    EXPECT_RC(WL_OK, wl_pg_exec_batch(old, "UPDATE writer_floor SET version = 2 WHERE name = 'ledger'"));

    wl_pg_write *w = (wl_pg_write *)0x1;
    EXPECT_RC(WL_PG_REFUSED, wl_pg_write_begin(old, &w));
    CHECK(w == NULL, "*out set after a refusal");
    CHECK_STR(last_message(),
              "ledger writer version 1 is below version 2, the oldest the shared database allows; "
              "update its code and restart it");
    wl_error *err = wl_last_error();
    char state[16];
    wl_error_sqlstate(err, state, sizeof state);
    CHECK_STR(state, "LW001");
    CHECK_STR(state, WL_PG_REFUSED_SQLSTATE);
    CHECK(wl_error_refused_version(err) == 1 && wl_error_refused_floor(err) == 2,
          "refused version %lld floor %lld", (long long)wl_error_refused_version(err),
          (long long)wl_error_refused_floor(err));
    wl_error_free(err);
    CHECK(!wl_pg_in_transaction(old), "a refused write left a transaction open");

    /* The trigger refuses an old writer's bump without recorded rows, with the same code. */
    EXPECT_RC(WL_PG_REFUSED,
              wl_pg_exec(old, "UPDATE ledgers SET generation = 5 WHERE slug = 'main'", 0, NULL, NULL));
    CHECK_CONTAINS(last_message(), "ledger writer version 1 is below version 2");

    /* A current writer (version 2) writes, and is offered one alert naming the refused one. */
    wl_pg_settings *s = NULL;
    EXPECT_RC(WL_OK, wl_pg_settings_new(&s));
    EXPECT_RC(WL_OK, wl_pg_settings_set_version(s, 2));
    EXPECT_RC(WL_OK, wl_pg_settings_set_required(s, 2));
    wl_pg_conn *cur = connect_or_fail(url, s);
    wl_pg_settings_free(s);
    if (cur) {
        EXPECT_RC(WL_OK, wl_pg_write_begin(cur, &w));
        CHECK(wl_pg_write_floor(w) == 2, "floor %lld", (long long)wl_pg_write_floor(w));
        size_t n = wl_pg_write_refused_count(w);
        CHECK(n == 1, "%zu refused writers, expected 1", n);
        wl_pg_refused_writer rw = {0};
        if (n >= 1) {
            EXPECT_RC(WL_OK, wl_pg_write_refused(w, 0, &rw));
            CHECK(rw.pid == wl_pg_pid(old), "refused pid %d, expected %d", rw.pid, wl_pg_pid(old));
            CHECK(rw.version == 1 && rw.floor == 2, "refused %lld/%lld", (long long)rw.version,
                  (long long)rw.floor);
            CHECK(rw.writer && rw.writer[0], "no writer address");
        }
        EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_write_refused(w, 99, &rw));
        wl_strings *alerts = NULL;
        EXPECT_RC(WL_OK, wl_pg_write_alerts(w, NULL, 0, &alerts));
        CHECK(wl_strings_count(alerts) == 1, "%zu alerts, expected 1", wl_strings_count(alerts));
        char want[512];
        snprintf(want, sizeof want,
                 "The ledger writer at %s was refused: ledger writer version 1 is below version 2, "
                 "the oldest the shared database allows; update its code and restart it",
                 rw.writer ? rw.writer : "?");
        if (wl_strings_count(alerts) >= 1) CHECK_STR(wl_strings_get(alerts, 0), want);
        CHECK(wl_strings_get(alerts, 1) == NULL, "strings_get out of range");
        /* An open alert with the same text is not raised twice; a closed one neither. */
        wl_pg_alert existing[2] = {{"another alert", true}, {want, true}};
        wl_strings *again = NULL;
        EXPECT_RC(WL_OK, wl_pg_write_alerts(w, existing, 2, &again));
        CHECK(wl_strings_count(again) == 0, "an open alert was raised twice");
        wl_strings_free(again);
        existing[1].open = false;
        EXPECT_RC(WL_OK, wl_pg_write_alerts(w, existing, 2, &again));
        CHECK(wl_strings_count(again) == 0, "a closed alert in the list was raised again");
        wl_strings_free(again);
        EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_write_alerts(w, NULL, 2, &again));
        wl_strings_free(alerts);

        const char *change[] = {"main", "1"};
        EXPECT_RC(WL_OK, wl_pg_exec(cur, "INSERT INTO row_changes(slug, generation) VALUES (?, ?)", 2,
                                    change, NULL));
        EXPECT_RC(WL_OK, wl_pg_exec(cur, "UPDATE ledgers SET generation = 1 WHERE slug = 'main'", 0,
                                    NULL, NULL));
        EXPECT_RC(WL_OK, wl_pg_commit(cur));
        wl_pg_write_free(w);
        w = NULL;

        wl_pg_rows *rows = NULL;
        EXPECT_RC(WL_OK, wl_pg_query(cur, "SELECT generation FROM ledgers WHERE slug = 'main'", 0,
                                     NULL, &rows));
        CHECK(wl_pg_rows_text(rows, 0, 0) && strcmp(wl_pg_rows_text(rows, 0, 0), "1") == 0,
              "generation is %s, expected 1 (the refused writes must not have moved it)",
              wl_pg_rows_text(rows, 0, 0) ? wl_pg_rows_text(rows, 0, 0) : "NULL");
        wl_pg_rows_free(rows);
        wl_pg_conn_free(cur);
    }

    /* Setup from code with a lower required version never lowers the stored floor. */
    wl_pg_conn *low = connect_or_fail(url, NULL);
    if (low) {
        EXPECT_RC(WL_OK, wl_pg_setup_schema(low, NULL));
        int64_t floor_v = 0;
        EXPECT_RC(WL_OK, wl_pg_stored_floor(low, &floor_v));
        CHECK(floor_v == 2, "the floor went from 2 to %lld", (long long)floor_v);
        wl_pg_conn_free(low);
    }
    wl_pg_conn_free(old);
    free(url);
}

static void test_pg_lock_not_granted_and_pool(void) {
    char *url = fresh_database("lock");
    if (!url) return;
    wl_pg_conn *holder = connect_or_fail(url, NULL);
    if (!holder) {
        free(url);
        return;
    }
    EXPECT_RC(WL_OK, wl_pg_setup_schema(holder, NULL));
    EXPECT_RC(WL_OK, wl_pg_write_begin(holder, NULL));

    wl_pg_settings *s = NULL;
    EXPECT_RC(WL_OK, wl_pg_settings_new(&s));
    EXPECT_RC(WL_OK, wl_pg_settings_set_lock_wait(s, 0.2));
    EXPECT_RC(WL_OK, wl_pg_settings_set_lock_tries(s, 2));
    wl_pg_pool *pool = NULL;
    EXPECT_RC(WL_OK, wl_pg_pool_new(url, s, 2, &pool));
    wl_pg_settings_free(s);
    if (pool) {
        wl_pg_conn *c = NULL;
        EXPECT_RC(WL_OK, wl_pg_pool_take(pool, &c));
        show_is(c, "lock_timeout", "200ms");
        EXPECT_RC(WL_PG_NOT_GRANTED, wl_pg_write_begin(c, NULL));
        CHECK_STR(last_message(), "the ledger writer lock was not granted in 2 waits of 0.2 seconds");
        wl_error *err = wl_last_error();
        char state[16];
        wl_error_sqlstate(err, state, sizeof state);
        CHECK_STR(state, "55P03");
        wl_error_free(err);
        CHECK(!wl_pg_in_transaction(c), "a transaction was left open after WL_PG_NOT_GRANTED");
        int32_t pid = wl_pg_pid(c);
        EXPECT_RC(WL_OK, wl_pg_pool_give(pool, c));
        CHECK(wl_pg_pool_idle_count(pool) == 1, "idle %zu", wl_pg_pool_idle_count(pool));

        EXPECT_RC(WL_OK, wl_pg_rollback(holder)); /* the lock is free again */
        EXPECT_RC(WL_OK, wl_pg_pool_take(pool, &c));
        CHECK(wl_pg_pid(c) == pid, "the pool did not reuse its idle connection");
        EXPECT_RC(WL_OK, wl_pg_write_begin(c, NULL));
        /* Given back inside a transaction: the pool rolls it back. */
        EXPECT_RC(WL_OK, wl_pg_pool_give(pool, c));
        EXPECT_RC(WL_OK, wl_pg_pool_take(pool, &c));
        CHECK(!wl_pg_in_transaction(c), "the pool handed out a connection inside a transaction");
        EXPECT_RC(WL_OK, wl_pg_write_begin(holder, NULL)); /* the lock was released */
        EXPECT_RC(WL_OK, wl_pg_rollback(holder));
        /* A connection with other settings is not the pool's: refused (and closed). */
        size_t idle = wl_pg_pool_idle_count(pool);
        EXPECT_RC(WL_INVALID_ARGUMENT, wl_pg_pool_give(pool, holder));
        CHECK_CONTAINS(last_message(), "this connection cannot go back to this pool");
        CHECK(wl_pg_pool_idle_count(pool) == idle, "the pool kept a stranger");
        holder = NULL;
        wl_pg_conn_free(c);
        wl_pg_pool_free(pool);
    }
    wl_pg_conn_free(holder);
    free(url);
}

static void drop_databases(void) {
    if (!admin) return;
    for (int i = 0; i < ncreated; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", created[i]);
        if (wl_pg_exec_batch(admin, sql) != WL_OK)
            fprintf(stderr, "warning: %s: %s\n", sql, last_message());
    }
    wl_pg_conn_free(admin);
    admin = NULL;
}

static void test_pg_needs_a_server(void) {
    CHECK(0,
          "TEST_DATABASE_URL is not set, so the Postgres half of the C ABI cannot be tested. "
          "Run the tests with `make test` (which starts a throwaway cluster), or "
          "`tests/with-postgres.sh bindings/tests/run.sh`");
}

/* The TLS-only server run.sh starts (tests/pg-tls-cluster.sh): WL_TLS_PG_URL names it with
 * sslmode=verify-full and the run's CA, WL_TLS_PG_WRONG_HOST the same server under a host
 * name its certificate does not carry. */
static void test_pg_tls_verify_full(void) {
    const char *url = getenv("WL_TLS_PG_URL");
    const char *wrong = getenv("WL_TLS_PG_WRONG_HOST");
    CHECK(url && *url && wrong && *wrong,
          "WL_TLS_PG_URL and WL_TLS_PG_WRONG_HOST are not set: run.sh starts the TLS-only "
          "server and sets them");
    if (!url || !*url || !wrong || !*wrong) return;
    wl_pg_conn *conn = connect_or_fail(url, NULL);
    if (!conn) return;
    wl_pg_rows *rows = NULL;
    EXPECT_RC(WL_OK, wl_pg_query(conn,
                                 "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                                 0, NULL, &rows));
    CHECK(wl_pg_rows_count(rows) == 1 && wl_pg_rows_text(rows, 0, 0) &&
              strcmp(wl_pg_rows_text(rows, 0, 0), "true") == 0,
          "the session is not encrypted");
    wl_pg_rows_free(rows);
    show_is(conn, "lock_timeout", "10s");
    wl_pg_conn_free(conn);

    wl_pg_conn *refused = NULL;
    EXPECT_RC(WL_PG_CONNECT, wl_pg_connect(wrong, NULL, &refused));
    CHECK(refused == NULL, "a refused connect handed out a connection");
    const char *msg = last_message();
    CHECK(strstr(msg, "host name mismatch") != NULL, "message: %s", msg);
    CHECK(strstr(msg, "sslmode=verify-ca") != NULL, "no hint in: %s", msg);
}

/* A restart costs no write through a pool, over TLS: three pooled sessions used just before
 * `pg_ctl restart -m fast` (run.sh's TLS-only server, restarted by tests/pg-tls-cluster.sh,
 * spawned) are recognised as ended, and the three writes right after it commit. */
static void test_pg_tls_pool_restart(void) {
    const char *url = getenv("WL_TLS_PG_URL");
    const char *script = getenv("WL_TLS_PG_SCRIPT");
    const char *dir = getenv("WL_TLS_PG_DIR");
    CHECK(url && *url && script && *script && dir && *dir,
          "WL_TLS_PG_URL, WL_TLS_PG_SCRIPT and WL_TLS_PG_DIR are not set: run.sh starts the "
          "TLS-only server and sets them");
    if (!url || !*url || !script || !*script || !dir || !*dir) return;
    wl_pg_pool *pool = NULL;
    EXPECT_RC(WL_OK, wl_pg_pool_new(url, NULL, 3, &pool));
    if (!pool) return;
    wl_pg_conn *c[3] = {NULL, NULL, NULL};
    EXPECT_RC(WL_OK, wl_pg_pool_take(pool, &c[0]));
    if (c[0]) {
        EXPECT_RC(WL_OK, wl_pg_exec_batch(c[0], "CREATE TABLE IF NOT EXISTS tls_restart_c (tag text)"));
        EXPECT_RC(WL_OK, wl_pg_pool_give(pool, c[0]));
    }
    for (int round = 0; round < 2; round++) {
        const char *tag[] = {round == 0 ? "before" : "after"};
        for (int i = 0; i < 3; i++) {
            c[i] = NULL;
            EXPECT_RC(WL_OK, wl_pg_pool_take(pool, &c[i]));
        }
        for (int i = 0; i < 3; i++) {
            if (!c[i]) continue;
            wl_pg_write *w = NULL;
            enum wl_result rc = wl_pg_write_begin(c[i], &w);
            if (rc == WL_OK) rc = wl_pg_exec(c[i], "INSERT INTO tls_restart_c VALUES ($1)", 1, tag, NULL);
            if (rc == WL_OK) rc = wl_pg_commit(c[i]);
            CHECK(rc == WL_OK, "pooled write %d %s the restart: %s", i, tag[0], last_message());
            wl_pg_write_free(w);
            EXPECT_RC(WL_OK, wl_pg_pool_give(pool, c[i]));
        }
        if (round == 0) {
            char *argv[] = {(char *)script, "restart", (char *)dir, "fast", NULL};
            fflush(NULL);
            pid_t child = 0;
            CHECK(posix_spawn(&child, script, NULL, NULL, argv, environ) == 0, "spawn %s", script);
            if (child > 0) {
                note_exec_pid(child);
                CHECK(wait_child(child) == 0, "%s restart failed", script);
            }
        }
    }
    wl_pg_conn *check = NULL;
    EXPECT_RC(WL_OK, wl_pg_pool_take(pool, &check));
    if (check) {
        wl_pg_rows *rows = NULL;
        EXPECT_RC(WL_OK, wl_pg_query(check, "SELECT count(*) FROM tls_restart_c WHERE tag = 'after'",
                                     0, NULL, &rows));
        CHECK(wl_pg_rows_count(rows) == 1 && wl_pg_rows_text(rows, 0, 0) &&
                  strcmp(wl_pg_rows_text(rows, 0, 0), "3") == 0,
              "not 3 writes after the restart");
        wl_pg_rows_free(rows);
        wl_pg_conn_free(check);
    }
    wl_pg_pool_free(pool);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    make_scratch_dir();

    RUN(test_header_constants, filter);
    RUN(test_null_pointers, filter);
    RUN(test_invalid_utf8_and_numbers, filter);
    RUN(test_missing_directory, filter);
    RUN(test_begin_commit_and_exec, filter);
    RUN(test_state_errors, filter);
    RUN(test_not_a_database, filter);
    RUN(test_busy_holder_and_waiter, filter);
    RUN(test_interrupt, filter);
    RUN(test_for_connection, filter);
    RUN(test_two_processes_contend, filter);
    RUN(test_turns_alone_never_overlap, filter);
    RUN(test_held_turn_locks_the_lock_file, filter);
    RUN(test_queued_writer_waits_for_a_holder_outside_sqlite, filter);
    RUN(test_spawned_program_does_not_keep_a_dead_holders_turn, filter);
    RUN(test_pg_protocol_granted_at_once_then_commit, filter);
    RUN(test_pg_protocol_cancelled_waits_then_not_granted, filter);
    RUN(test_pg_protocol_below_the_floor_is_refused, filter);
    RUN(test_pg_protocol_names_refused_writers, filter);
    RUN(test_pg_protocol_known_clean_count_skips_the_scan, filter);
    RUN(test_pg_protocol_setup_ensure_and_end, filter);
    RUN(test_pg_protocol_misuse_is_refused_clearly, filter);
    RUN(test_pg_settings_check_of_a_foreign_connection, filter);

    admin_url = getenv("TEST_DATABASE_URL");
    if (admin_url && *admin_url) {
        RUN(test_pg_connect_show_and_write, filter);
        RUN(test_pg_bad_url, filter);
        RUN(test_pg_floor_refusal_and_alerts, filter);
        RUN(test_pg_lock_not_granted_and_pool, filter);
        RUN(test_pg_tls_verify_full, filter);
        RUN(test_pg_tls_pool_restart, filter);
        drop_databases();
    } else {
        RUN(test_pg_needs_a_server, filter);
    }

    remove_scratch_dir();
    return finish();
}
