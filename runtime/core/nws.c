/* nws.c — reader of the task-DAG form of netweave schedule files (see nws.h). */
#include "nws.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t u64_at(const unsigned char *p) { return u32_at(p) | (uint64_t)u32_at(p + 4) << 32; }
static uint64_t pad8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

int nws_dag_parse(const void *data, size_t len, nws_dag *out, char *err, size_t errlen) {
    const unsigned char *b = data;
    memset(out, 0, sizeof *out);
    if (len < 64 || memcmp(b, "NWSCHED", 8) != 0)
        return fail(err, errlen, "not a netweave binary schedule (no NWSCHED header)");
    uint32_t version = u32_at(b + 8), form = u32_at(b + 12);
    if (version != 1) return fail(err, errlen, "schedule version %u is not supported (want 1)", version);
    if (form == 0)
        return fail(err, errlen, "this is a phases schedule (form 0); `netweave run` converts it to a task DAG");
    if (form != 1) return fail(err, errlen, "schedule form %u is unknown (1 is a task DAG)", form);
    uint32_t ranks = u32_at(b + 16), ntasks = u32_at(b + 20), name_len = u32_at(b + 48);
    uint64_t ndeps = u64_at(b + 24);
    if (ranks == 0) return fail(err, errlen, "the schedule has no ranks");
    /* Check the total size (in 128-bit-safe steps) before allocating anything. */
    uint64_t name_at = 64, place_at = name_at + pad8(name_len), tasks_at = place_at + pad8(4 * (uint64_t)ranks);
    uint64_t index_at = tasks_at + 16 * (uint64_t)ntasks, deps_at = index_at + 8 * ((uint64_t)ntasks + 1);
    if (ndeps > ((uint64_t)1 << 40) || deps_at + 8 * ndeps != len)
        return fail(err, errlen, "file is %zu bytes but its header (%u ranks, %u tasks, %llu dependencies) implies %llu",
                    len, ranks, ntasks, (unsigned long long)ndeps, (unsigned long long)(deps_at + 8 * ndeps));
    size_t copy = name_len < sizeof out->name - 1 ? name_len : sizeof out->name - 1;
    memcpy(out->name, b + name_at, copy);
    out->ranks = ranks;
    out->ntasks = ntasks;
    out->ndeps = ndeps;
    out->placement = malloc(4 * (size_t)ranks);
    out->tasks = malloc(sizeof(nws_task) * ((size_t)ntasks + 1));
    out->dep_index = malloc(8 * ((size_t)ntasks + 1));
    out->deps = malloc(sizeof(nws_dep) * ((size_t)ndeps + 1));
    out->relays = malloc(4 * ((size_t)ntasks + 1));
    if (!out->placement || !out->tasks || !out->dep_index || !out->deps || !out->relays) {
        nws_dag_free(out);
        return fail(err, errlen, "out of memory reading a schedule of %u tasks", ntasks);
    }
    for (uint32_t r = 0; r < ranks; r++) out->placement[r] = u32_at(b + place_at + 4 * (uint64_t)r);
    for (uint32_t t = 0; t < ntasks; t++) {
        const unsigned char *p = b + tasks_at + 16 * (uint64_t)t;
        out->tasks[t] = (nws_task){u32_at(p), u32_at(p + 4), u64_at(p + 8)};
        if (out->tasks[t].src >= ranks || out->tasks[t].dst >= ranks) {
            nws_dag_free(out);
            return fail(err, errlen, "task %u (%u -> %u) names a rank outside 0..%u", t, u32_at(p), u32_at(p + 4), ranks - 1);
        }
    }
    for (uint64_t t = 0; t <= ntasks; t++) out->dep_index[t] = u64_at(b + index_at + 8 * t);
    for (uint64_t e = 0; e < ndeps; e++)
        out->deps[e] = (nws_dep){u32_at(b + deps_at + 8 * e), u32_at(b + deps_at + 8 * e + 4)};
    if (out->dep_index[0] != 0 || out->dep_index[ntasks] != ndeps) {
        nws_dag_free(out);
        return fail(err, errlen, "the predecessor index does not run from 0 to %llu", (unsigned long long)ndeps);
    }
    for (uint32_t t = 0; t < ntasks; t++) {
        out->relays[t] = NWS_NONE;
        if (out->dep_index[t] > out->dep_index[t + 1]) {
            nws_dag_free(out);
            return fail(err, errlen, "the predecessor index of task %u runs backwards", t);
        }
        for (uint64_t e = out->dep_index[t]; e < out->dep_index[t + 1]; e++) {
            nws_dep d = out->deps[e];
            const char *why = NULL;
            if (d.task >= t) why = "is not an earlier task (dependencies must point backwards)";
            else if (d.kind > NWS_DEP_RELAY) why = "has an unknown kind";
            else if (d.kind == NWS_DEP_RELAY && out->relays[t] != NWS_NONE) why = "is a second relayed task";
            else if (d.kind == NWS_DEP_RELAY && out->tasks[d.task].dst != out->tasks[t].src)
                why = "is relayed, but its receiver is not this task's sender";
            else if (d.kind == NWS_DEP_RELAY && out->tasks[d.task].bytes != out->tasks[t].bytes)
                why = "is relayed, but carries a different number of bytes";
            if (why) {
                nws_dag_free(out);
                return fail(err, errlen, "task %u depends on task %u, which %s", t, d.task, why);
            }
            if (d.kind == NWS_DEP_RELAY) out->relays[t] = d.task;
        }
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    out->checksum = h;
    return 0;
}

int nws_dag_read(const char *path, nws_dag *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "cannot open schedule %s", path);
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *grown = realloc(data, cap);
            if (!grown) {
                free(data);
                fclose(f);
                return fail(err, errlen, "out of memory reading %s", path);
            }
            data = grown;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    int rc = bad ? fail(err, errlen, "cannot read schedule %s", path) : nws_dag_parse(data, len, out, err, errlen);
    free(data);
    if (rc && !bad) {
        /* Prefix the file name so the reason stands on its own. */
        char reason[512];
        snprintf(reason, sizeof reason, "%s", err);
        snprintf(err, errlen, "%s: %s", path, reason);
    }
    return rc;
}

void nws_dag_free(nws_dag *dag) {
    free(dag->placement);
    free(dag->tasks);
    free(dag->dep_index);
    free(dag->deps);
    free(dag->relays);
    memset(dag, 0, sizeof *dag);
}
