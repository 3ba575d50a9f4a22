/*
 * A stand-in NVTX tool for tests/nvtx_sink.rs: an NVTX injection library that records the
 * NVTX calls of the process to a log file instead of a profiler timeline.
 *
 * How NVTX finds it (nvtx-sys 2.0 compiles NVTX v3's nvtxInit.h into the Rust binary): the first
 * NVTX call of the process reads the environment variable NVTX_INJECTION64_PATH, dlopen()s that
 * path, looks up "InitializeInjectionNvtx2" and calls it with NVTX's nvtxGetExportTable. The
 * tool asks that for the callbacks export table (NVTX_ETID_CALLBACKS), gets each module's
 * function table (an array of pointers to NVTX's function-pointer slots) and writes its own
 * functions into the slots it implements; every slot it leaves alone becomes a no-op.
 *
 * Log (path in NVTX_STANDIN_LOG), one line per call, in call order; <seq> is a global sequence
 * number, <tid> the OS thread id, names come last because they may contain spaces:
 *   domain <seq> <tid> <domain-handle> <name>
 *   string <seq> <tid> <domain-handle> <string-handle> <string>
 *   start  <seq> <tid> <range-id> <domain name> <message>     (nvtxDomainRangeStartEx)
 *   end    <seq> <tid> <range-id>                             (nvtxDomainRangeEnd)
 *   push   <seq> <tid> <domain name> <message>                (nvtxDomainRangePushEx)
 *   pop    <seq> <tid> <domain name>                          (nvtxDomainRangePop)
 *   gstart <seq> <tid> <range-id> <message>                   (global nvtxRangeStart*)
 *   gend   <seq> <tid> <range-id>                             (global nvtxRangeEnd)
 *
 * The NVTX types below are copied from nvToolsExt.h / nvtxDetail/nvtxTypes.h (NVTX v3 ABI), so
 * this file builds with a plain `cc -shared -fPIC` and no NVTX headers.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- NVTX ABI (nvToolsExt.h, nvtxTypes.h) ---- */
typedef uint64_t nvtxRangeId_t;
typedef void *nvtxDomainHandle_t;
typedef void *nvtxStringHandle_t;

typedef union {
    const char *ascii;
    const void *unicode;
    nvtxStringHandle_t registered;
} nvtxMessageValue_t;

enum { MSG_ASCII = 1, MSG_UNICODE = 2, MSG_REGISTERED = 3 };

typedef struct {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType;
    int32_t reserved0;
    union { uint64_t ullValue; int64_t llValue; double dValue; } payload;
    int32_t messageType;
    nvtxMessageValue_t message;
} nvtxEventAttributes_t;

typedef void (*NvtxFunctionPointer)(void);
typedef NvtxFunctionPointer **NvtxFunctionTable;
typedef const void *(*NvtxGetExportTableFunc_t)(uint32_t exportTableId);

typedef struct {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int module, NvtxFunctionTable *out_table, unsigned int *out_size);
} NvtxExportTableCallbacks;

typedef struct {
    size_t struct_size;
    uint32_t version;
    uint32_t reserved0;
    void (*SetInjectionNvtxVersion)(uint32_t version);
} NvtxExportTableVersionInfo;

enum { ETID_CALLBACKS = 1, ETID_VERSIONINFO = 3 };
enum { MODULE_CORE = 1, MODULE_CORE2 = 5 };
enum { /* NvtxCallbackIdCore */
    CORE_RangeStartEx = 4, CORE_RangeStartA = 5, CORE_RangeEnd = 7
};
enum { /* NvtxCallbackIdCore2 */
    CORE2_DomainRangeStartEx = 2, CORE2_DomainRangeEnd = 3, CORE2_DomainRangePushEx = 4,
    CORE2_DomainRangePop = 5, CORE2_DomainRegisterStringA = 10, CORE2_DomainCreateA = 12,
    CORE2_DomainDestroy = 14
};

/* ---- the recorder ---- */
typedef struct {
    char *name;
} Domain;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static uint64_t seq;
static uint64_t next_range = 1;

static long tid(void) { return (long)syscall(SYS_gettid); }

/* Writes one line (without the trailing newline in fmt); the lock orders seq and the file. */
static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    if (write(log_fd, buf, (size_t)n) < 0) { /* nothing to do in a test tool */ }
}

static const char *domain_name(nvtxDomainHandle_t d) {
    return d ? ((Domain *)d)->name : "(default)";
}

static const char *message(const nvtxEventAttributes_t *a) {
    if (!a) return "(null)";
    switch (a->messageType) {
    case MSG_ASCII: return a->message.ascii ? a->message.ascii : "(null)";
    case MSG_REGISTERED: return a->message.registered ? (const char *)a->message.registered : "(null)";
    case MSG_UNICODE: return "(unicode)";
    default: return "(none)";
    }
}

static nvtxDomainHandle_t domain_create_a(const char *name) {
    Domain *d = calloc(1, sizeof *d);
    d->name = strdup(name ? name : "");
    pthread_mutex_lock(&lock);
    logf_("domain %llu %ld %p %s", (unsigned long long)++seq, tid(), (void *)d, d->name);
    pthread_mutex_unlock(&lock);
    return d;
}

static void domain_destroy(nvtxDomainHandle_t d) { (void)d; /* keep: names stay valid */ }

static nvtxStringHandle_t register_string_a(nvtxDomainHandle_t d, const char *s) {
    char *copy = strdup(s ? s : "");
    pthread_mutex_lock(&lock);
    logf_("string %llu %ld %p %p %s", (unsigned long long)++seq, tid(), d, (void *)copy, copy);
    pthread_mutex_unlock(&lock);
    return copy;
}

static nvtxRangeId_t domain_range_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&lock);
    nvtxRangeId_t id = next_range++;
    logf_("start %llu %ld %llu %s %s", (unsigned long long)++seq, tid(), (unsigned long long)id,
          domain_name(d), message(a));
    pthread_mutex_unlock(&lock);
    return id;
}

static void domain_range_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
    (void)d;
    pthread_mutex_lock(&lock);
    logf_("end %llu %ld %llu", (unsigned long long)++seq, tid(), (unsigned long long)id);
    pthread_mutex_unlock(&lock);
}

static int domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&lock);
    logf_("push %llu %ld %s %s", (unsigned long long)++seq, tid(), domain_name(d), message(a));
    pthread_mutex_unlock(&lock);
    return 0;
}

static int domain_range_pop(nvtxDomainHandle_t d) {
    pthread_mutex_lock(&lock);
    logf_("pop %llu %ld %s", (unsigned long long)++seq, tid(), domain_name(d));
    pthread_mutex_unlock(&lock);
    return 0;
}

static nvtxRangeId_t range_start_ex(const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&lock);
    nvtxRangeId_t id = next_range++;
    logf_("gstart %llu %ld %llu %s", (unsigned long long)++seq, tid(), (unsigned long long)id,
          message(a));
    pthread_mutex_unlock(&lock);
    return id;
}

static nvtxRangeId_t range_start_a(const char *m) {
    pthread_mutex_lock(&lock);
    nvtxRangeId_t id = next_range++;
    logf_("gstart %llu %ld %llu %s", (unsigned long long)++seq, tid(), (unsigned long long)id,
          m ? m : "(null)");
    pthread_mutex_unlock(&lock);
    return id;
}

static void range_end(nvtxRangeId_t id) {
    pthread_mutex_lock(&lock);
    logf_("gend %llu %ld %llu", (unsigned long long)++seq, tid(), (unsigned long long)id);
    pthread_mutex_unlock(&lock);
}

/* Writes fn into slot id of a module's function table, if the table has that slot. */
static int attach(const NvtxExportTableCallbacks *cb, int module, unsigned int id,
                  NvtxFunctionPointer fn) {
    NvtxFunctionTable table = 0;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table || id > size || !table[id])
        return 0;
    *table[id] = fn;
    return 1;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    const char *path = getenv("NVTX_STANDIN_LOG");
    if (!path || !*path) return 0;
    log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return 0;

    const NvtxExportTableCallbacks *cb = get_export_table(ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb) return 0;
    const NvtxExportTableVersionInfo *vi = get_export_table(ETID_VERSIONINFO);
    if (vi && vi->struct_size >= sizeof *vi && vi->SetInjectionNvtxVersion)
        vi->SetInjectionNvtxVersion(2);

    int ok = 1;
    ok &= attach(cb, MODULE_CORE2, CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create_a);
    ok &= attach(cb, MODULE_CORE2, CORE2_DomainDestroy, (NvtxFunctionPointer)domain_destroy);
    ok &= attach(cb, MODULE_CORE2, CORE2_DomainRegisterStringA, (NvtxFunctionPointer)register_string_a);
    ok &= attach(cb, MODULE_CORE2, CORE2_DomainRangeStartEx, (NvtxFunctionPointer)domain_range_start_ex);
    ok &= attach(cb, MODULE_CORE2, CORE2_DomainRangeEnd, (NvtxFunctionPointer)domain_range_end);
    ok &= attach(cb, MODULE_CORE2, CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_range_push_ex);
    ok &= attach(cb, MODULE_CORE2, CORE2_DomainRangePop, (NvtxFunctionPointer)domain_range_pop);
    ok &= attach(cb, MODULE_CORE, CORE_RangeStartEx, (NvtxFunctionPointer)range_start_ex);
    ok &= attach(cb, MODULE_CORE, CORE_RangeStartA, (NvtxFunctionPointer)range_start_a);
    ok &= attach(cb, MODULE_CORE, CORE_RangeEnd, (NvtxFunctionPointer)range_end);
    if (ok) {
        pthread_mutex_lock(&lock);
        logf_("init %llu %ld", (unsigned long long)++seq, tid());
        pthread_mutex_unlock(&lock);
    }
    return ok;
}
