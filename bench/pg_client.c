/* Client processes for make bench's Postgres scenario, through the C ABI
 * (compiled and run by writerlock-bench against libwriterlock.so).
 *
 *     pg_client URL CLIENTS SECONDS WRITES
 *
 * CLIENTS processes connect, do one warm-up write each, then start together
 * and repeat wl_pg_write_begin, one UPDATE (wl_pg_exec), wl_pg_commit for
 * SECONDS seconds (or, with WRITES > 0, exactly WRITES writes each). Prints
 * one JSON line: {"writes": N, "errors": N, "seconds": S, "first_error": ...}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <writerlock.h>

static const char *UPDATE = "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?";

struct result {
    long writes;
    long errors;
    char first_error[200];
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int one_write(wl_pg_conn *conn, const char *slug) {
    wl_pg_write *w = NULL;
    if (wl_pg_write_begin(conn, &w) != WL_OK)
        return -1;
    wl_pg_write_free(w);
    const char *params[1] = {slug};
    if (wl_pg_exec(conn, UPDATE, 1, params, NULL) != WL_OK) {
        wl_pg_rollback(conn);
        return -1;
    }
    return wl_pg_commit(conn) == WL_OK ? 0 : -1;
}

static void note_error(struct result *r) {
    if (r->first_error[0] == 0)
        wl_last_error_message(r->first_error, sizeof r->first_error);
}

static void child(const char *url, int index, double seconds, long writes, int ready_w, int start_r,
                  int result_w) {
    struct result r;
    memset(&r, 0, sizeof r);
    char slug[32];
    snprintf(slug, sizeof slug, "bench-%d", index);
    wl_pg_conn *conn = NULL;
    char c = 'r';
    if (wl_pg_connect(url, NULL, &conn) != WL_OK || one_write(conn, slug) != 0) {
        r.errors = 1;
        note_error(&r);
        if (write(result_w, &r, sizeof r) < 0 || write(ready_w, &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    if (write(ready_w, &c, 1) < 0)
        _exit(1);
    if (read(start_r, &c, 1) < 0) /* EOF: the parent closed the pipe, everyone starts */
        _exit(1);
    double start = now();
    for (;;) {
        if (writes > 0) {
            if (r.writes + r.errors >= writes)
                break;
        } else if (now() - start >= seconds) {
            break;
        }
        if (one_write(conn, slug) == 0) {
            if (writes > 0 || now() - start <= seconds)
                r.writes++;
        } else {
            r.errors++;
            note_error(&r);
        }
    }
    wl_pg_conn_free(conn);
    if (write(result_w, &r, sizeof r) < 0)
        _exit(1);
    _exit(0);
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: pg_client URL CLIENTS SECONDS WRITES\n");
        return 2;
    }
    const char *url = argv[1];
    int clients = atoi(argv[2]);
    double seconds = atof(argv[3]);
    long writes = atol(argv[4]);
    int ready[2], start[2], result[2];
    if (clients < 1 || pipe(ready) || pipe(start) || pipe(result)) {
        fprintf(stderr, "pg_client: bad client count or no pipes\n");
        return 2;
    }
    pid_t *pids = calloc((size_t)clients, sizeof *pids);
    for (int i = 0; i < clients; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(start[1]);
            close(ready[0]);
            close(result[0]);
            child(url, i, seconds, writes, ready[1], start[0], result[1]);
        }
        pids[i] = pid;
    }
    close(ready[1]);
    close(start[0]);
    close(result[1]);
    char buf[64];
    for (int got = 0; got < clients;) {
        ssize_t n = read(ready[0], buf, sizeof buf);
        if (n <= 0)
            break;
        got += (int)n;
    }
    double t0 = now();
    close(start[1]);
    struct result total, r;
    memset(&total, 0, sizeof total);
    while (read(result[0], &r, sizeof r) == (ssize_t)sizeof r) {
        total.writes += r.writes;
        total.errors += r.errors;
        if (total.first_error[0] == 0 && r.first_error[0] != 0)
            memcpy(total.first_error, r.first_error, sizeof total.first_error);
    }
    double elapsed = now() - t0;
    for (int i = 0; i < clients; i++)
        waitpid(pids[i], NULL, 0);
    free(pids);
    printf("{\"writes\": %ld, \"errors\": %ld, \"seconds\": %.6f, \"first_error\": ", total.writes,
           total.errors, elapsed);
    if (total.first_error[0])
        json_string(total.first_error);
    else
        printf("null");
    printf("}\n");
    return 0;
}
