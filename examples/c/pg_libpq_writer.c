/* The Postgres writer session on your own libpq connection: writerlock says which statement
 * to run next, your connection runs it, and you feed back what came of it.
 *
 * Build against the installed library and libpq:
 *   cc pg_libpq_writer.c $(pkg-config --cflags --libs writerlock libpq) -o pg_libpq_writer
 * Run it with the database's URL (or set TEST_DATABASE_URL):
 *   ./pg_libpq_writer postgresql://ledger@db:5432/ledger */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>
#include <writerlock.h>

/* Prints the calling thread's last writerlock failure: code, SQLSTATE and message. */
static int fail(const char *what) {
    char msg[512], state[8];
    wl_error *err = wl_last_error();
    wl_error_message(err, msg, sizeof msg);
    wl_error_sqlstate(err, state, sizeof state);
    fprintf(stderr, "%s: %s %s: %s\n", what, wl_result_name(wl_error_code(err)), state, msg);
    wl_error_free(err);
    return 1;
}

/* The rows of a result as text cells (NULL for SQL NULL). */
static wl_result rows_of(PGresult *res, wl_pg_text_rows **rows) {
    int r, c;
    wl_result rc = wl_pg_text_rows_new(rows);
    for (r = 0; rc == WL_OK && r < PQntuples(res); r++) {
        rc = wl_pg_text_rows_add_row(*rows);
        for (c = 0; rc == WL_OK && c < PQnfields(res); c++)
            rc = wl_pg_text_rows_add_cell(*rows,
                                          PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c));
    }
    return rc;
}

/* Feeds what came of a statement back: its rows, the server's error, or a lost connection. */
static wl_result feed(PGconn *conn, PGresult *res, wl_pg_protocol *p, wl_pg_step *step) {
    ExecStatusType status = PQresultStatus(res);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    wl_pg_text_rows *rows = NULL;
    wl_result rc;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
        rc = rows_of(res, &rows);
        if (rc == WL_OK) rc = wl_pg_protocol_feed_rows(p, rows, step);
        wl_pg_text_rows_free(rows);
        return rc;
    }
    if (state != NULL && message != NULL) /* FATAL and PANIC end the session */
        return wl_pg_protocol_feed_error(
            p, state, message, PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL),
            PQresultErrorField(res, PG_DIAG_MESSAGE_HINT),
            severity != NULL && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0),
            step);
    return wl_pg_protocol_feed_lost(p, PQerrorMessage(conn), step);
}

/* Runs the protocol's statements until it stops asking: WL_OK with *step GRANTED or DONE, or
 * the failure's code. PQexec runs a string of several statements, as some of them are. */
static wl_result drive(PGconn *conn, wl_pg_protocol *p, wl_pg_step *step) {
    const char *host = PQhost(conn); /* a directory for a Unix socket */
    wl_result rc = host != NULL && host[0] == '/'
                       ? wl_pg_protocol_dialled_unix(p)
                       : wl_pg_protocol_dialled_port(p, (uint16_t)atoi(PQport(conn)));
    if (rc == WL_OK) rc = wl_pg_protocol_start(p, step);
    while (rc == WL_OK && *step == WL_PG_STEP_RUN) {
        PGresult *res = PQexec(conn, wl_pg_protocol_sql(p));
        rc = feed(conn, res, p, step);
        PQclear(res);
    }
    return rc;
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : getenv("TEST_DATABASE_URL");
    const char *keywords[] = {"dbname", "options", "application_name", NULL};
    const char *values[4];
    char options[1024], check[2048];
    wl_pg_settings *settings = NULL;
    wl_pg_protocol *p = NULL;
    wl_pg_write *write = NULL;
    wl_pg_text_rows *rows = NULL;
    wl_strings *alerts = NULL;
    wl_pg_step step = WL_PG_STEP_NONE;
    PGconn *conn = NULL;
    PGresult *res = NULL;
    size_t i;
    int rc = 1, failed;
    if (url == NULL) {
        fprintf(stderr, "usage: %s postgresql://user@host:port/dbname\n", argv[0]);
        return 2;
    }
    if (wl_pg_settings_new(&settings) != WL_OK) return fail("wl_pg_settings_new");
    /* lock_timeout=10s, idle_in_transaction_session_timeout=15s, statement_timeout=60s and
     * the writer version travel as startup options, in effect from the first statement. */
    if (wl_pg_settings_startup_options(settings, options, sizeof options) >= sizeof options ||
        wl_pg_settings_check_sql(settings, check, sizeof check) >= sizeof check) {
        fprintf(stderr, "the settings' text does not fit the buffers\n");
        goto done;
    }
    values[0] = url; /* a URL or key=value pairs, expanded by libpq */
    values[1] = options;
    values[2] = "pg_libpq_writer";
    values[3] = NULL;
    conn = PQconnectdbParams(keywords, values, 1);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "cannot connect: %s", PQerrorMessage(conn));
        goto done;
    }
    /* A connection pooler may drop startup options: check that they took effect. */
    res = PQexec(conn, check);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "the settings check failed: %s", PQerrorMessage(conn));
        goto done;
    }
    if (rows_of(res, &rows) != WL_OK || wl_pg_settings_verify(settings, rows) != WL_OK) {
        rc = fail("the session's settings");
        goto done;
    }
    /* Once per database per process, before the first write: the writer floor's schema. */
    if (wl_pg_protocol_ensure(settings, WL_PG_TX_IDLE, &p) != WL_OK ||
        drive(conn, p, &step) != WL_OK) {
        rc = fail("the set-up");
        goto done;
    }
    wl_pg_protocol_free(p);
    p = NULL;
    /* BEGIN, the writer lock with its waits, and the floor check, one message per attempt. */
    if (wl_pg_protocol_write_in_one_message(settings, WL_PG_TX_IDLE, &p) != WL_OK ||
        drive(conn, p, &step) != WL_OK || wl_pg_protocol_granted(p, &write) != WL_OK) {
        rc = fail("the write");
        goto done;
    }
    wl_pg_protocol_free(p);
    p = NULL;
    /* Your statements, in the transaction that holds the writer lock. */
    PQclear(res);
    res = PQexec(conn, "CREATE TABLE IF NOT EXISTS libpq_notes (id serial PRIMARY KEY, body text)");
    failed = PQresultStatus(res) != PGRES_COMMAND_OK;
    if (!failed) {
        PQclear(res);
        res = PQexec(conn, "INSERT INTO libpq_notes (body) VALUES ('by libpq') RETURNING id");
        failed = PQresultStatus(res) != PGRES_TUPLES_OK;
    }
    if (failed) fprintf(stderr, "a statement failed: %s", PQerrorMessage(conn));
    /* COMMIT, or ROLLBACK (WL_PG_ROLLED_BACK) after a failed statement. */
    if (wl_pg_protocol_end(true, failed, &p) != WL_OK || drive(conn, p, &step) != WL_OK) {
        rc = fail("the end of the write");
        goto done;
    }
    printf("stored note %s after %u wait(s) for the writer lock (floor %ld)\n",
           PQgetvalue(res, 0, 0), wl_pg_write_waits(write), (long)wl_pg_write_floor(write));
    /* Refused writers still connected: raise these alerts on the ledger written. */
    if (wl_pg_write_alerts(write, NULL, 0, &alerts) == WL_OK)
        for (i = 0; i < wl_strings_count(alerts); i++)
            printf("alert: %s\n", wl_strings_get(alerts, i));
    rc = 0;
done:
    wl_strings_free(alerts);
    wl_pg_write_free(write);
    wl_pg_protocol_free(p);
    wl_pg_text_rows_free(rows);
    wl_pg_settings_free(settings);
    PQclear(res);
    PQfinish(conn);
    return rc;
}
