/*
 * Helpers of abi_test.c: a small test runner with libtest-style lines and a
 * closing `N passed, N failed` line, checks that report what differed, a
 * scratch directory, and small SQLite / process / URL utilities.
 */
#ifndef WL_ABI_HELPERS_H
#define WL_ABI_HELPERS_H

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <writerlock.h>

static int tests_passed, tests_failed, current_failures;
static char scratch_dir[1024];

static void check_at(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void check_at(int ok, const char *file, int line, const char *expr, const char *fmt, ...) {
    if (ok) return;
    current_failures++;
    fprintf(stdout, "    %s:%d: check failed: %s\n      ", file, line, expr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

#define CHECK(cond, ...) check_at(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

/* The message of the calling thread's last error (a static buffer). */
static const char *last_message(void) {
    static char buf[4096];
    wl_last_error_message(buf, sizeof buf);
    return buf;
}

#define EXPECT_RC(expected, call)                                                              \
    do {                                                                                       \
        wl_result rc_ = (call);                                                                \
        CHECK(rc_ == (expected), "%s returned %s, expected %s (message: %s)", #call,            \
              wl_result_name((uint32_t)rc_), wl_result_name((uint32_t)(expected)),              \
              rc_ == WL_OK ? "-" : last_message());                                            \
    } while (0)

#define CHECK_STR(got, want)                                                                   \
    do {                                                                                       \
        const char *g_ = (got), *w_ = (want);                                                  \
        CHECK(g_ != NULL && strcmp(g_, w_) == 0, "got:      \"%s\"\n      expected: \"%s\"",    \
              g_ ? g_ : "(NULL)", w_);                                                         \
    } while (0)

#define CHECK_CONTAINS(got, part)                                                              \
    do {                                                                                       \
        const char *g_ = (got), *p_ = (part);                                                  \
        CHECK(g_ != NULL && strstr(g_, p_) != NULL, "\"%s\"\n      does not contain \"%s\"",    \
              g_ ? g_ : "(NULL)", p_);                                                         \
    } while (0)

#define CHECK_NOT_CONTAINS(got, part)                                                          \
    do {                                                                                       \
        const char *g_ = (got), *p_ = (part);                                                  \
        CHECK(g_ != NULL && strstr(g_, p_) == NULL, "\"%s\"\n      contains \"%s\"",            \
              g_ ? g_ : "(NULL)", p_);                                                         \
    } while (0)

static void run_test(const char *name, void (*fn)(void), const char *filter) {
    if (filter && !strstr(name, filter)) return;
    current_failures = 0;
    fn(); /* failed checks print their details before the test's line */
    if (current_failures == 0) {
        tests_passed++;
        fprintf(stdout, "test %s ... ok\n", name);
    } else {
        tests_failed++;
        fprintf(stdout, "test %s ... FAILED (%d checks)\n", name, current_failures);
    }
}

#define RUN(fn, filter) run_test(#fn + 5 /* without "test_" */, fn, filter)

static int finish(void) {
    fprintf(stdout, "\n%d passed, %d failed\n", tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}

static void make_scratch_dir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(scratch_dir, sizeof scratch_dir, "%s/wl-abi-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(scratch_dir)) {
        fprintf(stdout, "cannot create a scratch directory: %s\n", strerror(errno));
        exit(2);
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_scratch_dir(void) {
    if (scratch_dir[0]) nftw(scratch_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void scratch_path(char *out, const char *name) {
    snprintf(out, PATH_MAX, "%s/%s", scratch_dir, name);
}

static int file_exists(const char *path, const char *suffix) {
    char full[PATH_MAX + 32];
    snprintf(full, sizeof full, "%s%s", path, suffix);
    struct stat st;
    return stat(full, &st) == 0;
}

static sqlite3 *open_db(const char *path) {
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stdout, "cannot open %s: %s\n", path, db ? sqlite3_errmsg(db) : "out of memory");
        exit(2);
    }
    return db;
}

/* The first column of the first row of `sql` as an integer (-1 on error). */
static long count_rows(sqlite3 *db, const char *sql) {
    sqlite3_stmt *stmt = NULL;
    long n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        n = (long)sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return n;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for a child: its exit code, or 128 + the signal that ended it. */
static int wait_child(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

/* `url` with its database name replaced by `name` (malloc'd). */
static char *url_with_database(const char *url, const char *name) {
    char *out = NULL;
    const char *scheme = strstr(url, "://");
    if (!scheme) {
        /* libpq key=value pairs: a later dbname wins. */
        if (asprintf(&out, "%s dbname=%s", url, name) < 0) return NULL;
        return out;
    }
    const char *rest = scheme + 3;
    const char *query = strchr(rest, '?');
    const char *path = strchr(rest, '/');
    if (path && query && path > query) path = NULL;
    size_t keep = path ? (size_t)(path - url) : query ? (size_t)(query - url) : strlen(url);
    if (asprintf(&out, "%.*s/%s%s", (int)keep, url, name, query ? query : "") < 0) return NULL;
    return out;
}

#endif
