/* collective.c — phases schedules on real buffers (see collective.h). */
#include "collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a block lives on this rank: which buffer, and which block-sized slot of it. */
enum { AT_SEND = 0, AT_RECV = 1, AT_SCRATCH = 2 };
typedef struct { uint32_t at; uint32_t slot; } place;

/* Cookies: kind (4 bits) | op index. */
enum { C_SEND = 1, C_RECV = 2, C_BARRIER = 3 };
#define TAG_PHASES 4096u /* data tags are phase mod this; barrier rounds use the tags above it */

struct nw_collective {
    uint32_t ranks, me, phases, collective, root, forwarded, concurrent_hint;
    const nws_op *sends, *recvs;
    uint32_t nsends, nrecvs;
    place *places;          /* per block entry of the schedule's rank share (nws_phases.blocks) */
    uint64_t *stage;        /* per op (sends then receives): first staging block, or UINT64_MAX if direct */
    uint64_t stage_blocks;  /* staging blocks all ops need together */
    uint32_t scratch_slots;
    uint32_t *recvs_before; /* per send: receives of earlier phases (a prefix of the receives) */
    uint32_t *sends_before; /* per send: sends of earlier phases */
    uint32_t *recvs_upto;   /* per phase: receives of phases <= p */
    uint32_t *sends_upto;   /* per phase: sends of phases <= p */
    uint8_t *arena;         /* staging and scratch, grown as calls need */
    size_t arena_bytes;
    uint8_t *recv_done;
};

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Index of `id` in the sorted array, or -1. */
static int64_t find(const uint32_t *sorted, uint64_t n, uint32_t id) {
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (sorted[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && sorted[lo] == id ? (int64_t)lo : -1;
}

/* Where block `id` lives on rank `me`, or -1 when it passes through (a scratch slot). */
static int home(const nw_collective *p, uint32_t id, place *out) {
    uint32_t n = p->ranks, me = p->me;
    if (p->collective == NWS_ALLTOALL) {
        uint32_t origin = id / n, target = id % n;
        if (origin == me) *out = (place){AT_SEND, target};
        else if (target == me) *out = (place){AT_RECV, origin};
        else return -1;
    } else if (id == me) {
        *out = (place){AT_SEND, 0};
    } else if (p->collective == NWS_ALLGATHER || me == p->root) {
        *out = (place){AT_RECV, id};
    } else {
        return -1;
    }
    return 0;
}

nw_collective *nw_collective_build(const nws_phases *s, char *err, size_t errlen) {
    if (s->collective != NWS_ALLTOALL && s->collective != NWS_ALLGATHER && s->collective != NWS_GATHER) {
        nws_fail(err, errlen, "'%s' is not an all-to-all, allgather or gather schedule", s->name);
        return NULL;
    }
    if (s->version < 2 || (!s->block_bytes && s->nsends + s->nrecvs)) {
        nws_fail(err, errlen, "'%s' does not say which blocks its messages carry (rewrite it with `netweave schedule … -o x.nws`)",
             s->name);
        return NULL;
    }
    nw_collective *p = calloc(1, sizeof *p);
    if (!p) {
        nws_fail(err, errlen, "out of memory resolving '%s'", s->name);
        return NULL;
    }
    *p = (nw_collective){.ranks = s->ranks, .me = s->rank, .phases = s->phases, .collective = s->collective, .root = s->root,
                   .forwarded = !!(s->flags & NWS_FLAG_FORWARDED), .concurrent_hint = s->concurrent_sends,
                   .sends = s->sends, .recvs = s->recvs, .nsends = s->nsends, .nrecvs = s->nrecvs};
    uint32_t nops = s->nsends + s->nrecvs;
    p->places = calloc(s->nblocks + 1, sizeof *p->places);
    p->stage = calloc((size_t)nops + 1, sizeof *p->stage);
    p->recvs_before = calloc((size_t)s->nsends + 1, 4);
    p->sends_before = calloc((size_t)s->nsends + 1, 4);
    p->recvs_upto = calloc((size_t)s->phases + 1, 4);
    p->sends_upto = calloc((size_t)s->phases + 1, 4);
    p->recv_done = calloc((size_t)s->nrecvs + 1, 1);
    /* Blocks passing through: the received ones with no home here, sorted, one slot each. */
    uint32_t *transit = calloc(s->nblocks + 1, 4);
    if (!p->places || !p->stage || !p->recvs_before || !p->sends_before || !p->recvs_upto || !p->sends_upto ||
        !p->recv_done || !transit) {
        free(transit);
        nw_collective_free(p);
        nws_fail(err, errlen, "out of memory resolving '%s'", s->name);
        return NULL;
    }
    uint64_t ntransit = 0;
    place where;
    for (uint32_t k = 0; k < s->nrecvs; k++)
        for (uint32_t i = 0; i < s->recvs[k].nblocks; i++) {
            uint32_t id = s->blocks[s->recvs[k].first + i];
            if (home(p, id, &where)) transit[ntransit++] = id;
        }
    qsort(transit, ntransit, 4, cmp_u32);
    uint64_t unique = 0;
    for (uint64_t i = 0; i < ntransit; i++)
        if (!unique || transit[unique - 1] != transit[i]) transit[unique++] = transit[i];
    ntransit = unique;
    p->scratch_slots = (uint32_t)ntransit;
    /* Received blocks, sorted, with the phase each first arrives in: a send may carry a block
     * not its own only from the next phase on. */
    uint64_t nrecv_blocks = 0;
    for (uint32_t k = 0; k < s->nrecvs; k++) nrecv_blocks += s->recvs[k].nblocks;
    uint64_t *arrivals = calloc(nrecv_blocks + 1, sizeof *arrivals); /* id << 32 | phase */
    if (!arrivals) {
        free(transit);
        nw_collective_free(p);
        nws_fail(err, errlen, "out of memory resolving '%s'", s->name);
        return NULL;
    }
    uint64_t na = 0;
    for (uint32_t k = 0; k < s->nrecvs; k++)
        for (uint32_t i = 0; i < s->recvs[k].nblocks; i++)
            arrivals[na++] = (uint64_t)s->blocks[s->recvs[k].first + i] << 32 | s->recvs[k].phase;
    qsort(arrivals, na, 8, cmp_u64);
    int rc = 0;
    for (uint32_t k = 0; k < nops && !rc; k++) {
        const nws_op *op = k < s->nsends ? &s->sends[k] : &s->recvs[k - s->nsends];
        int is_send = k < s->nsends;
        for (uint32_t i = 0; i < op->nblocks; i++) {
            uint32_t id = s->blocks[op->first + i];
            if (home(p, id, &where)) where = (place){AT_SCRATCH, (uint32_t)find(transit, ntransit, id)};
            int own = where.at == AT_SEND;
            p->places[op->first + i] = where;
            if (!is_send || own) continue;
            /* the earliest arrival of id: arrivals are sorted by (id, phase) */
            uint64_t lo = 0, hi = na;
            while (lo < hi) {
                uint64_t mid = (lo + hi) / 2;
                if ((arrivals[mid] >> 32) < id) lo = mid + 1;
                else hi = mid;
            }
            if (lo == na || (arrivals[lo] >> 32) != id || (uint32_t)arrivals[lo] >= op->phase)
                rc = nws_fail(err, errlen, "in '%s', rank %u sends block %u in phase %u before it has received it", s->name,
                          s->rank, id, op->phase);
        }
        p->stage[k] = UINT64_MAX;
        if (op->nblocks > 1) {
            p->stage[k] = p->stage_blocks;
            p->stage_blocks += op->nblocks;
        }
    }
    free(arrivals);
    free(transit);
    if (rc) {
        nw_collective_free(p);
        return NULL;
    }
    for (uint32_t k = 0; k < s->nrecvs; k++) p->recvs_upto[s->recvs[k].phase]++;
    for (uint32_t k = 0; k < s->nsends; k++) p->sends_upto[s->sends[k].phase]++;
    for (uint32_t ph = 1; ph < s->phases; ph++) {
        p->recvs_upto[ph] += p->recvs_upto[ph - 1];
        p->sends_upto[ph] += p->sends_upto[ph - 1];
    }
    for (uint32_t k = 0; k < s->nsends; k++) {
        uint32_t ph = s->sends[k].phase;
        p->recvs_before[k] = ph ? p->recvs_upto[ph - 1] : 0;
        p->sends_before[k] = ph ? p->sends_upto[ph - 1] : 0;
    }
    return p;
}

void nw_collective_free(nw_collective *p) {
    if (!p) return;
    void *arrays[] = {p->places, p->stage, p->recvs_before, p->sends_before, p->recvs_upto, p->sends_upto, p->arena,
                      p->recv_done};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) free(arrays[i]);
    free(p);
}

typedef struct {
    nw_collective *p;
    nw_transport *tp;
    uint8_t *base[3];
    size_t B;
    uint8_t *staging;
    uint32_t started, sends_done, recv_prefix, recvs_done, barriers_pending;
    char *err;
    size_t errlen;
} call;

static inline uint8_t *addr(const call *c, place w) { return c->base[w.at] + (size_t)w.slot * c->B; }

static int transport_failed(call *c, const char *what) {
    return nws_fail(c->err, c->errlen, "%s: %s", what, c->tp->error(c->tp->ctx));
}

static int start_send(call *c, uint32_t k) {
    nw_collective *p = c->p;
    const nws_op *op = &p->sends[k];
    const place *w = &p->places[op->first];
    const uint8_t *buf;
    if (p->stage[k] == UINT64_MAX) {
        buf = op->nblocks ? addr(c, w[0]) : NULL;
    } else {
        uint8_t *at = c->staging + p->stage[k] * c->B;
        for (uint32_t i = 0; i < op->nblocks; i++) memcpy(at + (size_t)i * c->B, addr(c, w[i]), c->B);
        buf = at;
    }
    if (c->tp->isend(c->tp->ctx, op->peer, op->phase % TAG_PHASES, buf, (size_t)op->nblocks * c->B,
                     (uint64_t)C_SEND << 60 | k))
        return transport_failed(c, "sending");
    c->started++;
    return 0;
}

static int post_receives(call *c) {
    nw_collective *p = c->p;
    for (uint32_t k = 0; k < p->nrecvs; k++) {
        const nws_op *op = &p->recvs[k];
        uint64_t st = p->stage[p->nsends + k];
        uint8_t *buf = st == UINT64_MAX ? (op->nblocks ? addr(c, p->places[op->first]) : NULL) : c->staging + st * c->B;
        if (c->tp->irecv(c->tp->ctx, op->peer, op->phase % TAG_PHASES, buf, (size_t)op->nblocks * c->B,
                         (uint64_t)C_RECV << 60 | k))
            return transport_failed(c, "posting a receive");
    }
    return 0;
}

static void on_receive(call *c, uint32_t k) {
    nw_collective *p = c->p;
    const nws_op *op = &p->recvs[k];
    uint64_t st = p->stage[p->nsends + k];
    if (st != UINT64_MAX) {
        const place *w = &p->places[op->first];
        for (uint32_t i = 0; i < op->nblocks; i++) memcpy(addr(c, w[i]), c->staging + (st + i) * c->B, c->B);
    }
    p->recv_done[k] = 1;
    c->recvs_done++;
    while (c->recv_prefix < p->nrecvs && p->recv_done[c->recv_prefix]) c->recv_prefix++;
}

/* Handle one completion. */
static int step(call *c) {
    uint64_t cookie;
    if (c->tp->wait_any(c->tp->ctx, &cookie)) return transport_failed(c, "waiting");
    uint32_t kind = (uint32_t)(cookie >> 60), k = (uint32_t)cookie;
    if (kind == C_SEND) c->sends_done++;
    else if (kind == C_RECV) on_receive(c, k);
    else if (kind == C_BARRIER) c->barriers_pending--;
    return 0;
}

/* A dissemination barrier over the transport: ceil(log2 N) rounds of empty messages. */
static int barrier(call *c, uint32_t phase) {
    uint32_t n = c->p->ranks, me = c->p->me;
    for (uint32_t d = 1, round = 0; d < n; d <<= 1, round++) {
        uint32_t tag = TAG_PHASES + (phase % 1024) * 32 + round;
        c->barriers_pending += 2;
        if (c->tp->irecv(c->tp->ctx, (me + n - d) % n, tag, NULL, 0, (uint64_t)C_BARRIER << 60) ||
            c->tp->isend(c->tp->ctx, (me + d) % n, tag, NULL, 0, (uint64_t)C_BARRIER << 60))
            return transport_failed(c, "in a phase barrier");
        while (c->barriers_pending)
            if (step(c)) return -1;
    }
    return 0;
}

int nw_collective_run(nw_collective *p, nw_transport *tp, const nw_buffers *b, uint32_t executor, uint32_t concurrent, char *err,
                size_t errlen) {
    if (tp->ranks != p->ranks || tp->rank != p->me)
        return nws_fail(err, errlen, "the schedule is for %u ranks, the call has %u", p->ranks, tp->ranks);
    if (executor == NWS_EXEC_AUTO) executor = p->forwarded ? NWS_EXEC_LOCAL_SYNC : NWS_EXEC_ASYNC;
    if (concurrent == 0) concurrent = p->concurrent_hint ? p->concurrent_hint : 1;
    size_t B = b->block_bytes;
    size_t need = (size_t)(p->stage_blocks + p->scratch_slots) * B;
    if (need > p->arena_bytes) {
        uint8_t *grown = realloc(p->arena, need);
        if (!grown) return nws_fail(err, errlen, "out of memory for %zu bytes of staging", need);
        p->arena = grown;
        p->arena_bytes = need;
    }
    call c = {.p = p, .tp = tp, .B = B, .staging = p->arena, .err = err, .errlen = errlen};
    c.base[AT_SEND] = (uint8_t *)b->sendbuf;
    c.base[AT_RECV] = b->recvbuf;
    c.base[AT_SCRATCH] = p->arena + (size_t)p->stage_blocks * B;
    memset(p->recv_done, 0, p->nrecvs);
    /* The rank's own block for itself is a local copy. */
    place own = {AT_RECV, p->collective == NWS_ALLTOALL || p->collective == NWS_ALLGATHER || p->me == p->root ? p->me : UINT32_MAX};
    if (own.slot != UINT32_MAX) {
        const uint8_t *from = c.base[AT_SEND] + (p->collective == NWS_ALLTOALL ? (size_t)p->me * B : 0);
        uint8_t *to = addr(&c, own);
        if (B && from != to) memmove(to, from, B);
    }
    if (post_receives(&c)) return -1;
    int sync = executor == NWS_EXEC_SYNC;
    uint32_t phase_done = 0; /* SYNC: the barrier before phase `phase_done` has been passed */
    for (;;) {
        /* SYNC: every rank passes the barrier before phase j once its own phase j-1 is done. */
        while (sync && phase_done + 1 < p->phases && c.recv_prefix >= p->recvs_upto[phase_done] &&
               c.sends_done >= p->sends_upto[phase_done])
            if (barrier(&c, ++phase_done)) return -1;
        while (c.started < p->nsends) {
            uint32_t k = c.started;
            int ready;
            if (sync) ready = p->sends[k].phase <= phase_done;
            else if (executor == NWS_EXEC_ASYNC)
                ready = c.started - c.sends_done < concurrent && (!p->forwarded || c.recv_prefix >= p->recvs_before[k]);
            else
                ready = c.recv_prefix >= p->recvs_before[k] && c.sends_done >= p->sends_before[k];
            if (!ready) break;
            if (start_send(&c, k)) return -1;
        }
        if (c.sends_done == p->nsends && c.recvs_done == p->nrecvs && (!sync || phase_done + 1 >= p->phases)) break;
        if (step(&c)) return -1;
    }
    return 0;
}
