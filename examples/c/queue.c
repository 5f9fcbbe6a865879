/* The SQLite write queue from C: one transaction in turn, then one queued statement.
 *
 * Build against the installed library:
 *   cc queue.c $(pkg-config --cflags --libs writerlock) -o queue
 * Run it in a directory where it may create site.db (or pass another path). */
#include <stdio.h>
#include <sqlite3.h>
#include <writerlock.h>

/* Prints the calling thread's last writerlock failure: its code's name and message. */
static int fail(const char *what) {
    char msg[512]; /* "database is busy: the transaction could not start within 25 s ..." */
    wl_last_error_message(msg, sizeof msg);
    fprintf(stderr, "%s: %s: %s\n", what, wl_result_name(wl_last_error_code()), msg);
    return 1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "site.db";
    sqlite3 *db = NULL;
    wl_queue *queue = NULL;
    int rc = 1;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return 1;
    }
    if (wl_queue_new(path, &queue) != WL_OK) { /* path is copied */
        sqlite3_close(db);
        return fail("wl_queue_new");
    }
    /* Creating the table is a write too: one queued statement, 5 s at most. */
    if (wl_queue_exec(queue, db, "CREATE TABLE IF NOT EXISTS t (x INTEGER)", WL_BUSY_TIMEOUT, NULL)
        != WL_OK) {
        rc = fail("wl_queue_exec");
        goto done;
    }
    /* Waits for the writer turn (25 s at most), then BEGIN IMMEDIATE on your connection. */
    if (wl_queue_begin(queue, db, WL_TRANSACTION_WAIT, NULL) != WL_OK) {
        rc = fail("wl_queue_begin");
        goto done;
    }
    if (sqlite3_exec(db, "INSERT INTO t VALUES (1)", NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "INSERT failed: %s\n", sqlite3_errmsg(db));
        wl_queue_rollback(queue, db); /* ROLLBACK, and the next writer's turn */
        goto done;
    }
    if (wl_queue_commit(queue, db) != WL_OK) { /* COMMIT, and the next writer's turn */
        rc = fail("wl_queue_commit");
        wl_queue_rollback(queue, db);
        goto done;
    }
    printf("committed one row to %s\n", path);
    rc = 0;
done:
    wl_queue_free(queue);
    sqlite3_close(db);
    return rc;
}
