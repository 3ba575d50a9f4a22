/*
 * A stand-in for LIKWID's liblikwid, for scope-profiler's tests: it implements the six marker
 * functions the LIKWID sink binds (same C signatures as LIKWID 5's likwid.h), records every
 * call, and at likwid_markerClose writes a results file in the format of LIKWID's marker file.
 *
 * Build: cc -shared -fPIC -o liblikwid_standin.so likwid_standin.c -lpthread
 *
 * Log: one line per call, "<function>\t<region tag or ->\t<thread id>", appended to the file
 * named by standin_configure() or else by $LIKWID_STANDIN_LOG (no log when neither is set).
 * Functions are logged as init, thread_init, register, start, stop, close. A start of a region
 * that is already running on the thread is logged as "start_nested" and returns -1, as LIKWID
 * refuses it too; a stop of a region that is not running is logged as "stop_unmatched".
 *
 * Results: at close, per (region, thread) the number of starts and the seconds between starts
 * and stops, written to the file named by standin_configure() or else by $LIKWID_FILEPATH:
 *     <nthreads> <nregions> 1
 *     <region id>:<tag>-0                                    (per region)
 *     <region id> 0 <thread index> <count> <time> 1 <count>  (per region and thread)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_TAGS 256
#define MAX_THREADS 64
#define MAX_CELLS 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char log_path[4096];
static char results_path[4096];

static char tags[MAX_TAGS][256];
static int ntags;
static long threads[MAX_THREADS];
static int nthreads;

struct cell {
    int tag, thread, running, count;
    double seconds, started;
};
static struct cell cells[MAX_CELLS];
static int ncells;

static long tid(void) { return (long)syscall(SYS_gettid); }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sets the log and results files (either may be NULL to keep the environment's). */
void standin_configure(const char *log, const char *results) {
    pthread_mutex_lock(&mu);
    if (log) snprintf(log_path, sizeof log_path, "%s", log);
    if (results) snprintf(results_path, sizeof results_path, "%s", results);
    pthread_mutex_unlock(&mu);
}

/* Appends one log line; call with mu held. */
static void record(const char *fn, const char *tag) {
    const char *path = log_path[0] ? log_path : getenv("LIKWID_STANDIN_LOG");
    if (!path || !path[0]) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\t%s\t%ld\n", fn, tag ? tag : "-", tid());
    fclose(f);
}

/* The cell of (tag, calling thread), created on first use; call with mu held. */
static struct cell *cell_of(const char *tag) {
    int t = -1, th = -1;
    for (int i = 0; i < ntags; i++)
        if (strcmp(tags[i], tag) == 0) t = i;
    if (t < 0 && ntags < MAX_TAGS) {
        snprintf(tags[ntags], sizeof tags[0], "%s", tag);
        t = ntags++;
    }
    long me = tid();
    for (int i = 0; i < nthreads; i++)
        if (threads[i] == me) th = i;
    if (th < 0 && nthreads < MAX_THREADS) {
        threads[nthreads] = me;
        th = nthreads++;
    }
    if (t < 0 || th < 0) return NULL;
    for (int i = 0; i < ncells; i++)
        if (cells[i].tag == t && cells[i].thread == th) return &cells[i];
    if (ncells == MAX_CELLS) return NULL;
    cells[ncells] = (struct cell){.tag = t, .thread = th};
    return &cells[ncells++];
}

void likwid_markerInit(void) {
    pthread_mutex_lock(&mu);
    record("init", NULL);
    pthread_mutex_unlock(&mu);
}

void likwid_markerThreadInit(void) {
    pthread_mutex_lock(&mu);
    record("thread_init", NULL);
    pthread_mutex_unlock(&mu);
}

int likwid_markerRegisterRegion(const char *tag) {
    pthread_mutex_lock(&mu);
    record("register", tag);
    cell_of(tag);
    pthread_mutex_unlock(&mu);
    return 0;
}

int likwid_markerStartRegion(const char *tag) {
    int rc = 0;
    pthread_mutex_lock(&mu);
    struct cell *c = cell_of(tag);
    if (c && c->running) {
        record("start_nested", tag);
        rc = -1;
    } else {
        record("start", tag);
        if (c) {
            c->running = 1;
            c->count++;
            c->started = now();
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int likwid_markerStopRegion(const char *tag) {
    int rc = 0;
    pthread_mutex_lock(&mu);
    struct cell *c = cell_of(tag);
    if (!c || !c->running) {
        record("stop_unmatched", tag);
        rc = -1;
    } else {
        record("stop", tag);
        c->running = 0;
        c->seconds += now() - c->started;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void likwid_markerClose(void) {
    pthread_mutex_lock(&mu);
    record("close", NULL);
    const char *path = results_path[0] ? results_path : getenv("LIKWID_FILEPATH");
    FILE *f = (path && path[0]) ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "%d %d 1\n", nthreads, ntags);
        for (int t = 0; t < ntags; t++) fprintf(f, "%d:%s-0\n", t, tags[t]);
        for (int t = 0; t < ntags; t++)
            for (int i = 0; i < ncells; i++)
                if (cells[i].tag == t && cells[i].count > 0)
                    fprintf(f, "%d 0 %d %d %e 1 %e\n", t, cells[i].thread, cells[i].count,
                            cells[i].seconds, (double)cells[i].count);
        fclose(f);
    }
    pthread_mutex_unlock(&mu);
}
