/* One writer from C, by hand against the queue (make bench's host scenario).
 *
 *   c_host DATABASE TRANSACTIONS ROUNDS
 *
 * One process, one connection (synchronous=NORMAL) on a WAL database that already has the
 * bench's table t. Each round runs TRANSACTIONS one-row INSERT transactions per variant (the
 * INSERT prepared once), the variants' order reversed every other round, and prints one JSON
 * line at the end: every variant's rate in every round (transactions per second), by the clock
 * and by the process's CPU time (which other work on a shared machine disturbs less). Variants:
 *
 *   hand          sqlite3_exec(db, "BEGIN IMMEDIATE"), the INSERT, sqlite3_exec(db, "COMMIT")
 *   begin_commit  wl_queue_begin(queue, db, WL_TRANSACTION_WAIT, NULL), the INSERT,
 *                 wl_queue_commit(queue, db)
 *
 * Built by bench/run.sh against the release libwriterlock.so and include/writerlock.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sqlite3.h>
#include <writerlock.h>

static sqlite3 *db;
static wl_queue *queue;
static sqlite3_stmt *insert;

static double clock_of(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what) {
    char msg[512];
    wl_last_error_message(msg, sizeof msg);
    fprintf(stderr, "c_host: %s: %s (SQLite: %s)\n", what, msg, sqlite3_errmsg(db));
    exit(1);
}

static void row(int writer, long seq) {
    static const char payload[] =
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    sqlite3_bind_int(insert, 1, writer);
    sqlite3_bind_int64(insert, 2, seq);
    sqlite3_bind_text(insert, 3, payload, 64, SQLITE_STATIC);
    if (sqlite3_step(insert) != SQLITE_DONE) fail("INSERT");
    sqlite3_reset(insert);
}

static void hand(long n, long seq) {
    for (long i = 0; i < n; i++) {
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) fail("BEGIN IMMEDIATE");
        row(0, seq + i);
        if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) fail("COMMIT");
    }
}

static void begin_commit(long n, long seq) {
    for (long i = 0; i < n; i++) {
        if (wl_queue_begin(queue, db, WL_TRANSACTION_WAIT, NULL) != WL_OK) fail("wl_queue_begin");
        row(1, seq + i);
        if (wl_queue_commit(queue, db) != WL_OK) fail("wl_queue_commit");
    }
}

struct variant {
    const char *name;
    void (*run)(long, long);
};

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: c_host DATABASE TRANSACTIONS ROUNDS\n");
        return 2;
    }
    long txns = atol(argv[2]);
    int rounds = atoi(argv[3]);
    if (sqlite3_open(argv[1], &db) != SQLITE_OK) fail("opening the database");
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_exec(db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK) fail("PRAGMA");
    if (sqlite3_prepare_v2(db, "INSERT INTO t (writer, seq, payload) VALUES (?1, ?2, ?3)", -1,
                           &insert, NULL) != SQLITE_OK)
        fail("preparing the INSERT");
    if (wl_queue_new(argv[1], &queue) != WL_OK) fail("wl_queue_new");
    struct variant variants[] = {{"hand", hand}, {"begin_commit", begin_commit}};
    int nv = (int)(sizeof variants / sizeof variants[0]);
    long seq = 0, warm = txns < 500 ? txns : 500;
    for (int v = 0; v < nv; v++) {
        variants[v].run(warm, seq);
        seq += warm;
    }
    double rate[64][2], cpu[64][2];
    if (rounds > 64) rounds = 64;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < nv; k++) {
            int v = r % 2 == 0 ? k : nv - 1 - k;
            double start = clock_of(CLOCK_MONOTONIC), used = clock_of(CLOCK_PROCESS_CPUTIME_ID);
            variants[v].run(txns, seq);
            rate[r][v] = (double)txns / (clock_of(CLOCK_MONOTONIC) - start);
            cpu[r][v] = (double)txns / (clock_of(CLOCK_PROCESS_CPUTIME_ID) - used);
            seq += txns;
        }
    }
    printf("{\"host\": \"c\", \"sqlite\": \"%s\"", sqlite3_libversion());
    for (int which = 0; which < 2; which++) {
        printf(", \"%s\": [", which ? "cpu_rounds" : "rounds");
        for (int r = 0; r < rounds; r++) {
            printf("%s{", r ? ", " : "");
            for (int v = 0; v < nv; v++)
                printf("%s\"%s\": %.1f", v ? ", " : "", variants[v].name, which ? cpu[r][v] : rate[r][v]);
            printf("}");
        }
        printf("]");
    }
    printf("}\n");
    sqlite3_finalize(insert);
    wl_queue_free(queue);
    sqlite3_close(db);
    return 0;
}
