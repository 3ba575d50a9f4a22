/*
 * A stand-in CUDA driver (libcuda.so) for tests/cuda_sink.rs, which runs on machines without a
 * GPU. It implements only the driver functions the cuda sink calls: cudarc (dynamic-loading)
 * resolves each driver symbol lazily at its first call, so a missing one would only matter if
 * it were called.
 *
 * Behaviour, chosen so the test can predict every device time:
 * - a "clock" counts cuEventRecord calls; an event remembers the count at its recording, and
 *   cuEventElapsedTime returns (end - start) * 0.5 ms. A call whose start and end events are
 *   recorded back to back therefore measures 0.5 ms; one with k records in between
 *   (k nested records) measures (k + 1) * 0.5 ms;
 * - contexts are per thread, as in the real driver: event and stream calls on a thread with
 *   no current context fail with CUDA_ERROR_INVALID_CONTEXT;
 * - events may be recorded on the NULL stream or on the stream whose handle is in
 *   CUDA_STANDIN_STREAM (a number); other streams fail with CUDA_ERROR_INVALID_HANDLE;
 * - CUDA_STANDIN_INIT_ERROR=<code> makes cuInit return that code; CUDA_STANDIN_DEVICES=<n>
 *   sets the device count (default 1);
 * - memory functions (cuMemAlloc_v2, cuMemHostAlloc, cuMemcpyHtoD[Async]_v2, ...) work on host
 *   memory, so examples/gpu_check.rs can be smoke-tested against the stand-in;
 * - every event creation, record and stream synchronization is appended to the file named by
 *   CUDA_STANDIN_LOG: "create <event>", "record <event> <stream>", "sync <stream>".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult; /* the cudaError_enum values used below */
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400
};
typedef int CUdevice;
typedef struct Ctx { int device; } *CUcontext;
typedef struct Event { uint64_t id; uint64_t tick; int recorded; } *CUevent;
typedef void *CUstream;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct Ctx primary = {0};
static int initialized;
static uint64_t ticks;
static uint64_t next_event = 1;
static __thread CUcontext current;

static long env_num(const char *name, long dflt) {
    const char *v = getenv(name);
    return (v && *v) ? strtol(v, NULL, 0) : dflt;
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    const char *path = getenv("CUDA_STANDIN_LOG");
    if (!path || !*path) return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (write(fd, buf, (size_t)n) < 0) { /* nothing to do in a test driver */ }
    close(fd);
}

static CUresult check_stream(CUstream s) {
    if (!s) return CUDA_SUCCESS;
    long allowed = env_num("CUDA_STANDIN_STREAM", 0);
    return (allowed && (uintptr_t)s == (uintptr_t)allowed) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

#define NEED_INIT() do { if (!initialized) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define NEED_CTX() do { NEED_INIT(); if (!current) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

CUresult cuInit(unsigned int flags) {
    (void)flags;
    long err = env_num("CUDA_STANDIN_INIT_ERROR", 0);
    if (err) return (CUresult)err;
    initialized = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
    NEED_INIT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = (int)env_num("CUDA_STANDIN_DEVICES", 1);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    NEED_INIT();
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= env_num("CUDA_STANDIN_DEVICES", 1)) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    NEED_INIT();
    if (!ctx || dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &primary;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    NEED_INIT();
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) {
    NEED_INIT();
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    *ctx = current;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    NEED_INIT();
    current = ctx;
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *ev, unsigned int flags) {
    (void)flags;
    NEED_CTX();
    if (!ev) return CUDA_ERROR_INVALID_VALUE;
    CUevent e = calloc(1, sizeof *e);
    pthread_mutex_lock(&lock);
    e->id = next_event++;
    pthread_mutex_unlock(&lock);
    *ev = e;
    log_line("create %llu", (unsigned long long)e->id);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent ev) {
    NEED_CTX();
    free(ev);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent ev, CUstream stream) {
    NEED_CTX();
    if (!ev) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = check_stream(stream);
    if (r) return r;
    pthread_mutex_lock(&lock);
    ev->tick = ++ticks;
    ev->recorded = 1;
    pthread_mutex_unlock(&lock);
    log_line("record %llu %p", (unsigned long long)ev->id, stream);
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent ev) {
    NEED_CTX();
    return (ev && ev->recorded) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    NEED_CTX();
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!start || !end || !start->recorded || !end->recorded) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    *ms = 0.5f * (float)(int64_t)(end->tick - start->tick);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
    NEED_CTX();
    CUresult r = check_stream(stream);
    if (r) return r;
    log_line("sync %p", stream);
    return CUDA_SUCCESS;
}

typedef unsigned long long CUdeviceptr;

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    NEED_INIT();
    if (!name || len < 1 || dev != 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "scope-profiler stand-in device");
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    NEED_CTX();
    void *p = malloc(bytes ? bytes : 1);
    if (!dptr || !p) return CUDA_ERROR_INVALID_VALUE;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    NEED_CTX();
    free((void *)(uintptr_t)dptr);
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned int flags) {
    (void)flags;
    NEED_CTX();
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *p = malloc(bytes ? bytes : 1);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemFreeHost(void *p) {
    NEED_CTX();
    free(p);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    NEED_CTX();
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
    CUresult r = check_stream(s);
    if (r) return r;
    return cuMemcpyHtoD_v2(dst, src, bytes);
}

CUresult cuGetErrorName(CUresult error, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    *str = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_STANDIN";
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    *str = error == CUDA_SUCCESS ? "no error" : "error reported by the stand-in driver";
    return CUDA_SUCCESS;
}
