/* nws.c — readers of netweave schedule files, both forms (see nws.h). */
#include "nws.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nws_fail(char *err, size_t errlen, const char *fmt, ...) {
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
        return nws_fail(err, errlen, "not a netweave binary schedule (no NWSCHED header)");
    uint32_t version = u32_at(b + 8), form = u32_at(b + 12);
    if (version != 1 && version != 2) return nws_fail(err, errlen, "schedule version %u is not supported (want 1 or 2)", version);
    if (form == 0)
        return nws_fail(err, errlen, "this is a phases schedule (form 0); `netweave run` converts it to a task DAG");
    if (form != 1) return nws_fail(err, errlen, "schedule form %u is unknown (1 is a task DAG)", form);
    uint64_t record = version == 2 ? 32 : 16;
    uint32_t ranks = u32_at(b + 16), ntasks = u32_at(b + 20), name_len = u32_at(b + 48);
    uint64_t ndeps = u64_at(b + 24);
    if (ranks == 0) return nws_fail(err, errlen, "the schedule has no ranks");
    /* Check the total size (in 128-bit-safe steps) before allocating anything. */
    uint64_t name_at = 64, place_at = name_at + pad8(name_len), tasks_at = place_at + pad8(4 * (uint64_t)ranks);
    uint64_t index_at = tasks_at + record * (uint64_t)ntasks, deps_at = index_at + 8 * ((uint64_t)ntasks + 1);
    if (ndeps > ((uint64_t)1 << 40) || deps_at + 8 * ndeps != len)
        return nws_fail(err, errlen, "file is %zu bytes but its header (%u ranks, %u tasks, %llu dependencies) implies %llu",
                    len, ranks, ntasks, (unsigned long long)ndeps, (unsigned long long)(deps_at + 8 * ndeps));
    size_t copy = name_len < sizeof out->name - 1 ? name_len : sizeof out->name - 1;
    memcpy(out->name, b + name_at, copy);
    out->ranks = ranks;
    out->ntasks = ntasks;
    out->ndeps = ndeps;
    out->collective = u32_at(b + 32);
    out->root = u32_at(b + 36);
    out->block_bytes = version == 2 ? u64_at(b + 56) : 0;
    if (out->collective > NWS_CUSTOM || (out->collective == NWS_GATHER && out->root >= ranks))
        return nws_fail(err, errlen, "collective code %u / root %u is not valid", out->collective, out->root);
    out->placement = malloc(4 * (size_t)ranks);
    out->tasks = malloc(sizeof(nws_task) * ((size_t)ntasks + 1));
    out->dep_index = malloc(8 * ((size_t)ntasks + 1));
    out->deps = malloc(sizeof(nws_dep) * ((size_t)ndeps + 1));
    out->relays = malloc(4 * ((size_t)ntasks + 1));
    if (!out->placement || !out->tasks || !out->dep_index || !out->deps || !out->relays) {
        nws_dag_free(out);
        return nws_fail(err, errlen, "out of memory reading a schedule of %u tasks", ntasks);
    }
    for (uint32_t r = 0; r < ranks; r++) out->placement[r] = u32_at(b + place_at + 4 * (uint64_t)r);
    for (uint32_t t = 0; t < ntasks; t++) {
        const unsigned char *p = b + tasks_at + record * (uint64_t)t;
        out->tasks[t] = (nws_task){u32_at(p), u32_at(p + 4), u64_at(p + 8), NWS_NONE, 0};
        if (version == 2) {
            out->tasks[t].block = u32_at(p + 16);
            out->tasks[t].offset = u64_at(p + 24);
            uint64_t space = out->collective == NWS_ALLTOALL ? (uint64_t)ranks * ranks : ranks;
            int placed = out->block_bytes && out->collective != NWS_CUSTOM;
            if (placed && (out->tasks[t].block >= space || out->tasks[t].offset > out->block_bytes ||
                           out->tasks[t].bytes > out->block_bytes - out->tasks[t].offset)) {
                nws_dag_free(out);
                return nws_fail(err, errlen, "task %u names block %u at offset %llu, outside the collective's blocks", t,
                            out->tasks[t].block, (unsigned long long)out->tasks[t].offset);
            }
        }
        if (out->tasks[t].src >= ranks || out->tasks[t].dst >= ranks) {
            nws_dag_free(out);
            return nws_fail(err, errlen, "task %u (%u -> %u) names a rank outside 0..%u", t, u32_at(p), u32_at(p + 4), ranks - 1);
        }
    }
    for (uint64_t t = 0; t <= ntasks; t++) out->dep_index[t] = u64_at(b + index_at + 8 * t);
    for (uint64_t e = 0; e < ndeps; e++)
        out->deps[e] = (nws_dep){u32_at(b + deps_at + 8 * e), u32_at(b + deps_at + 8 * e + 4)};
    if (out->dep_index[0] != 0 || out->dep_index[ntasks] != ndeps) {
        nws_dag_free(out);
        return nws_fail(err, errlen, "the predecessor index does not run from 0 to %llu", (unsigned long long)ndeps);
    }
    for (uint32_t t = 0; t < ntasks; t++) {
        out->relays[t] = NWS_NONE;
        if (out->dep_index[t] > out->dep_index[t + 1]) {
            nws_dag_free(out);
            return nws_fail(err, errlen, "the predecessor index of task %u runs backwards", t);
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
                return nws_fail(err, errlen, "task %u depends on task %u, which %s", t, d.task, why);
            }
            if (d.kind == NWS_DEP_RELAY) out->relays[t] = d.task;
        }
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    out->checksum = h;
    return 0;
}

unsigned char *nws_load(const char *path, size_t *lenp, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        nws_fail(err, errlen, "cannot open schedule %s", path);
        return NULL;
    }
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *grown = realloc(data, cap);
            if (!grown) {
                free(data);
                fclose(f);
                nws_fail(err, errlen, "out of memory reading %s", path);
                return NULL;
            }
            data = grown;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(data);
        nws_fail(err, errlen, "cannot read schedule %s", path);
        return NULL;
    }
    *lenp = len;
    return data;
}

int nws_dag_read(const char *path, nws_dag *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t len = 0;
    unsigned char *data = nws_load(path, &len, err, errlen);
    if (!data) return -1;
    int rc = nws_dag_parse(data, len, out, err, errlen);
    free(data);
    if (rc) {
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

int nws_form(const void *data, size_t len, char *err, size_t errlen) {
    const unsigned char *b = data;
    if (len < 64 || memcmp(b, "NWSCHED", 8) != 0)
        return nws_fail(err, errlen, "not a netweave binary schedule (no NWSCHED header)");
    uint32_t version = u32_at(b + 8), form = u32_at(b + 12);
    if (version != 1 && version != 2) return nws_fail(err, errlen, "schedule version %u is not supported (want 1 or 2)", version);
    if (form > 1) return nws_fail(err, errlen, "schedule form %u is unknown (0 phases, 1 task DAG)", form);
    return (int)form;
}

/* Read the records of one rank from a table; `is_send` names the peer's role in messages. */
static int read_ops(const unsigned char *b, uint64_t index_at, uint64_t table_at, uint64_t record, uint32_t rank,
                    uint64_t nmessages, nws_phases *s, int is_send, char *err, size_t errlen) {
    uint64_t lo = u64_at(b + index_at + 8 * (uint64_t)rank), hi = u64_at(b + index_at + 8 * ((uint64_t)rank + 1));
    const char *table = is_send ? "send" : "receive";
    if (lo > hi || hi > nmessages || hi - lo > UINT32_MAX)
        return nws_fail(err, errlen, "the %s index of rank %u is out of order", table, rank);
    nws_op *ops = calloc(hi - lo + 1, sizeof *ops);
    if (!ops) return nws_fail(err, errlen, "out of memory for %llu %ss", (unsigned long long)(hi - lo), table);
    if (is_send) s->sends = ops, s->nsends = (uint32_t)(hi - lo);
    else s->recvs = ops, s->nrecvs = (uint32_t)(hi - lo);
    uint32_t last_phase = 0;
    for (uint64_t k = 0; k < hi - lo; k++) {
        const unsigned char *p = b + table_at + record * (lo + k);
        nws_op op = {u32_at(p), u32_at(p + 4), 0, u64_at(p + 8), 0};
        if (record == 32) op.nblocks = u32_at(p + 16), op.first = u64_at(p + 24);
        if (op.phase >= s->phases || op.peer >= s->ranks)
            return nws_fail(err, errlen, "%s record %llu of rank %u names phase %u / rank %u, outside %u phases / %u ranks",
                        table, (unsigned long long)k, rank, op.phase, op.peer, s->phases, s->ranks);
        if (op.phase < last_phase)
            return nws_fail(err, errlen, "%ss of rank %u are not in phase order (record %llu)", table, rank, (unsigned long long)k);
        last_phase = op.phase;
        ops[k] = op;
    }
    return 0;
}

int nws_phases_parse(const void *data, size_t len, uint32_t rank, nws_phases *s, char *err, size_t errlen) {
    const unsigned char *b = data;
    memset(s, 0, sizeof *s);
    int form = nws_form(data, len, err, errlen);
    if (form < 0) return -1;
    if (form != 0) return nws_fail(err, errlen, "this is a task DAG (form 1), not a phases schedule");
    s->version = u32_at(b + 8);
    s->ranks = u32_at(b + 16);
    s->phases = u32_at(b + 20);
    uint64_t messages = u64_at(b + 24);
    s->collective = u32_at(b + 32);
    s->root = u32_at(b + 36);
    s->flags = u32_at(b + 40);
    s->concurrent_sends = u32_at(b + 44);
    uint32_t name_len = u32_at(b + 48);
    s->executor = u32_at(b + 52);
    s->block_bytes = u64_at(b + 56);
    s->rank = rank;
    if (s->ranks == 0) return nws_fail(err, errlen, "the schedule has no ranks");
    if (rank >= s->ranks) return nws_fail(err, errlen, "rank %u is outside the schedule's %u ranks", rank, s->ranks);
    if (s->collective > NWS_CUSTOM || (s->collective == NWS_GATHER && s->root >= s->ranks))
        return nws_fail(err, errlen, "collective code %u / root %u is not valid", s->collective, s->root);
    if (s->concurrent_sends == 0) return nws_fail(err, errlen, "concurrent sends is 0");
    if (s->executor > NWS_EXEC_LOCAL_SYNC) return nws_fail(err, errlen, "unknown executor code %u", s->executor);
    if (messages > ((uint64_t)1 << 40)) return nws_fail(err, errlen, "%llu messages: the header is corrupt", (unsigned long long)messages);
    uint64_t record = s->version == 2 ? 32 : 16;
    uint64_t place_at = 64 + pad8(name_len), index_at = place_at + pad8(4 * (uint64_t)s->ranks);
    uint64_t recv_index_at = index_at + 8 * ((uint64_t)s->ranks + 1), sends_at = recv_index_at + 8 * ((uint64_t)s->ranks + 1);
    uint64_t recvs_at = sends_at + record * messages, end = recvs_at + record * messages, total_blocks = 0;
    if (s->version == 2) {
        if (end + 8 > len) return nws_fail(err, errlen, "file is %zu bytes, shorter than its header implies", len);
        total_blocks = u64_at(b + end);
        if (total_blocks > ((uint64_t)1 << 40)) return nws_fail(err, errlen, "the block table is corrupt");
        end += 8 + pad8(4 * total_blocks);
    }
    if (end != len)
        return nws_fail(err, errlen, "file is %zu bytes but its header (%u ranks, %llu messages) implies %llu", len, s->ranks,
                    (unsigned long long)messages, (unsigned long long)end);
    size_t copy = name_len < sizeof s->name - 1 ? name_len : sizeof s->name - 1;
    memcpy(s->name, b + 64, copy);
    if (!(s->placement = malloc(4 * (size_t)s->ranks))) return nws_fail(err, errlen, "out of memory");
    for (uint32_t r = 0; r < s->ranks; r++) s->placement[r] = u32_at(b + place_at + 4 * (uint64_t)r);
    if (read_ops(b, index_at, sends_at, record, rank, messages, s, 1, err, errlen) ||
        read_ops(b, recv_index_at, recvs_at, record, rank, messages, s, 0, err, errlen)) {
        nws_phases_free(s);
        return -1;
    }
    /* Copy this rank's block ids, checking each against the collective's block space. */
    uint64_t space = s->collective == NWS_ALLTOALL ? (uint64_t)s->ranks * s->ranks : s->ranks;
    uint64_t mine = 0;
    for (uint32_t k = 0; k < s->nsends + s->nrecvs; k++) {
        nws_op *op = k < s->nsends ? &s->sends[k] : &s->recvs[k - s->nsends];
        if (op->first > total_blocks || op->nblocks > total_blocks - op->first ||
            (s->block_bytes && op->bytes != s->block_bytes * op->nblocks) || (!s->block_bytes && op->nblocks)) {
            nws_phases_free(s);
            return nws_fail(err, errlen, "a message of rank %u lists blocks that do not fit the block table or its bytes", rank);
        }
        mine += op->nblocks;
    }
    if (!(s->blocks = malloc(4 * (size_t)mine + 4))) {
        nws_phases_free(s);
        return nws_fail(err, errlen, "out of memory for %llu block ids", (unsigned long long)mine);
    }
    uint64_t table = end - pad8(4 * total_blocks);
    for (uint32_t k = 0; k < s->nsends + s->nrecvs; k++) {
        nws_op *op = k < s->nsends ? &s->sends[k] : &s->recvs[k - s->nsends];
        uint64_t at = s->nblocks;
        for (uint32_t i = 0; i < op->nblocks; i++) {
            uint32_t id = u32_at(b + table + 4 * (op->first + i));
            if (id >= space) {
                nws_phases_free(s);
                return nws_fail(err, errlen, "block id %u is outside the collective's %llu blocks", id, (unsigned long long)space);
            }
            s->blocks[s->nblocks++] = id;
        }
        op->first = at;
    }
    return 0;
}

void nws_phases_free(nws_phases *s) {
    free(s->placement);
    free(s->sends);
    free(s->recvs);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}
