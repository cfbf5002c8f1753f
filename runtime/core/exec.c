/* exec.c — the executor core (see exec.h for the semantics it implements). */
#include "exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Cookies say what completed: kind (4 bits) | task (32 bits) | fragment (28 bits). */
enum { C_SEND = 1, C_RECV = 2, C_SYNC_SEND = 3, C_SYNC_RECV = 4, C_DONE = 5 };
#define MAX_FRAGMENTS ((uint64_t)1 << 28)
#define SYNC_TAG NW_CONTROL_TAG
#define DONE_TAG 0xffffffffu
static uint64_t cookie(uint64_t kind, uint32_t task, uint32_t frag) { return kind << 60 | (uint64_t)task << 28 | frag; }

/* What to do when one of this rank's receives completes. */
enum { ON_LOCAL = 0, ON_SYNC = 1, ON_RELAY = 2 };
typedef struct { uint32_t task, what; } action;

nw_exec_options nw_exec_defaults(void) {
    return (nw_exec_options){.fragment_bytes = 64 * 1024, .data = NULL, .handshake = 1, .seed = 0, .before_send = NULL,
                             .before_send_arg = NULL};
}

/* Whether the receiver of `pred` must send a sync to the sender of `succ` for a complete dependency:
 * only when neither the successor's sender sent `pred` (it knows when its data left) nor received
 * it (it knows on arrival). */
static int needs_sync(const nws_task *pred, const nws_task *succ) {
    return succ->src != pred->src && succ->src != pred->dst;
}

void nw_exec_peers(const nws_dag *dag, uint32_t rank, uint8_t *need) {
    for (uint32_t t = 0; t < dag->ntasks; t++) {
        const nws_task *task = &dag->tasks[t];
        if (task->src == rank) need[task->dst] = 1;
        if (task->dst == rank) need[task->src] = 1;
        for (uint64_t e = dag->dep_index[t]; e < dag->dep_index[t + 1]; e++) {
            const nws_task *pred = &dag->tasks[dag->deps[e].task];
            if (dag->deps[e].kind != NWS_DEP_COMPLETE || !needs_sync(pred, task)) continue;
            if (pred->dst == rank) need[task->src] = 1;
            if (task->src == rank) need[pred->dst] = 1;
        }
    }
    need[rank] = 0;
}

static inline uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Word i of origin's payload; bytes are taken little-endian from each word. */
static inline uint64_t payload_word(uint64_t key, uint64_t i) { return mix(key + i); }
static uint64_t payload_key(uint64_t seed, uint32_t origin) { return mix(seed ^ mix((uint64_t)origin + 1)); }

void nw_payload_fill(uint64_t seed, uint32_t origin, uint64_t offset, uint8_t *buf, size_t len) {
    uint64_t key = payload_key(seed, origin);
    for (size_t i = 0; i < len;) {
        uint64_t pos = offset + i, w = payload_word(key, pos >> 3);
        for (unsigned b = pos & 7; b < 8 && i < len; b++, i++) buf[i] = (uint8_t)(w >> (8 * b));
    }
}

int64_t nw_payload_check(uint64_t seed, uint32_t origin, uint64_t offset, const uint8_t *buf, size_t len) {
    uint64_t key = payload_key(seed, origin);
    for (size_t i = 0; i < len;) {
        uint64_t pos = offset + i, w = payload_word(key, pos >> 3);
        if ((pos & 7) == 0 && len - i >= 8) {
            uint64_t got;
            memcpy(&got, buf + i, 8);
            if (got == w) { /* the common case, a whole word at once (little-endian hosts) */
                i += 8;
                continue;
            }
        }
        for (unsigned b = pos & 7; b < 8 && i < len; b++, i++)
            if (buf[i] != (uint8_t)(w >> (8 * b))) return (int64_t)i;
    }
    return -1;
}

typedef struct {
    const nws_dag *dag;
    nw_transport *tp;
    const nw_exec_options *opt;
    nw_exec_result *res;
    uint32_t me;
    uint64_t frag_bytes;
    /* per task (only this rank's tasks are touched) */
    uint8_t **buf;         /* receive buffer, or the send buffer of a non-relay send */
    uint8_t *owned;        /* buf[t] is the executor's (free it), not the caller's */
    uint32_t *frags, *arrived, *posted, *sent, *waiting, *origin;
    uint8_t *started;
    uint64_t *t_start, *t_first, *t_last_send, *t_last_recv;
    uint64_t *action_index; /* actions of receive p: actions[action_index[p] .. action_index[p+1]] */
    action *actions;
    uint32_t *sends, *recvs; /* this rank's tasks, in id order */
    size_t nsend, nrecv, cur, recvs_done, syncs_expected, sync_sends_pending;
    char *err;
    size_t errlen;
} run;

static int fail(run *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int transport_failed(run *r, const char *what) {
    return fail(r, "%s: %s", what, r->tp->error(r->tp->ctx));
}

static size_t frag_len(run *r, uint32_t t, uint32_t k) {
    uint64_t bytes = r->dag->tasks[t].bytes, off = (uint64_t)k * r->frag_bytes;
    return (size_t)(bytes - off < r->frag_bytes ? bytes - off : r->frag_bytes);
}

static int post_send_fragment(run *r, uint32_t t, const uint8_t *base) {
    uint32_t k = r->posted[t]++;
    const nws_task *task = &r->dag->tasks[t];
    const uint8_t *at = base ? base + (uint64_t)k * r->frag_bytes : NULL;
    if (r->tp->isend(r->tp->ctx, task->dst, t, at, frag_len(r, t, k), cookie(C_SEND, t, k)))
        return transport_failed(r, "sending");
    r->res->fragments_sent++;
    return 0;
}

static int receive_complete(run *r, uint32_t p, uint64_t now);

/* Start this rank's next send if its dependencies are met; one send is in flight at a time. */
static int try_start(run *r) {
    while (r->cur < r->nsend) {
        uint32_t t = r->sends[r->cur];
        const nws_task *task = &r->dag->tasks[t];
        uint32_t relayed = r->dag->relays[t];
        if (r->started[t] || r->waiting[t] || (relayed != NWS_NONE && r->arrived[relayed] == 0)) return 0;
        if (r->opt->before_send) r->opt->before_send(r->opt->before_send_arg, t);
        r->started[t] = 1;
        r->t_start[t] = r->tp->now_ns(r->tp->ctx);
        if (task->dst == r->me) { /* a self-copy: the data is already here */
            r->t_last_send[t] = r->t_first[t] = r->t_start[t];
            r->arrived[t] = r->frags[t];
            r->cur++;
            if (receive_complete(r, t, r->t_start[t])) return -1;
            continue;
        }
        if (relayed != NWS_NONE) {
            while (r->posted[t] < r->arrived[relayed])
                if (post_send_fragment(r, t, r->buf[relayed])) return -1;
        } else {
            const nw_exec_data *data = r->opt->data;
            /* the caller's bytes, never a stand-in; the seeded payload was written by prepare() */
            if (data && !(r->buf[t] = (uint8_t *)data->send_data(data->arg, t)) && task->bytes)
                return fail(r, "no data to send for task %u", t);
            while (r->posted[t] < r->frags[t])
                if (post_send_fragment(r, t, r->buf[t])) return -1;
        }
        return 0;
    }
    return 0;
}

/* Receive p has fully arrived: meet the local waits, notify remote senders, free what is done. */
static int receive_complete(run *r, uint32_t p, uint64_t now) {
    r->t_last_recv[p] = now;
    r->recvs_done++;
    static const uint8_t one = 1;
    for (uint64_t a = r->action_index[p]; a < r->action_index[p + 1]; a++) {
        action act = r->actions[a];
        if (act.what == ON_LOCAL) {
            r->waiting[act.task]--;
        } else if (act.what == ON_SYNC) {
            if (r->tp->isend(r->tp->ctx, r->dag->tasks[act.task].src, SYNC_TAG | act.task, &one, 1,
                             cookie(C_SYNC_SEND, act.task, 0)))
                return transport_failed(r, "sending a sync");
            r->sync_sends_pending++;
            r->res->syncs_sent++;
        }
    }
    return try_start(r);
}

static int on_fragment(run *r, uint32_t p, uint32_t k) {
    uint64_t now = r->tp->now_ns(r->tp->ctx);
    if (r->arrived[p]++ == 0) r->t_first[p] = now;
    r->res->bytes_received += frag_len(r, p, k); /* its bytes are checked once the call is over (verify()) */
    for (uint64_t a = r->action_index[p]; a < r->action_index[p + 1]; a++) {
        uint32_t t = r->actions[a].task;
        if (r->actions[a].what == ON_RELAY && r->started[t])
            while (r->posted[t] < r->arrived[p])
                if (post_send_fragment(r, t, r->buf[p])) return -1;
    }
    if (r->arrived[p] == r->frags[p]) return receive_complete(r, p, now);
    return try_start(r); /* a relay may start on the first fragment */
}

static int on_send_done(run *r, uint32_t t, uint32_t k) {
    r->res->bytes_sent += frag_len(r, t, k);
    if (++r->sent[t] < r->frags[t]) return 0;
    r->t_last_send[t] = r->tp->now_ns(r->tp->ctx);
    if (r->dag->relays[t] == NWS_NONE) {
        if (r->owned[t]) free(r->buf[t]);
        r->buf[t] = NULL;
        r->owned[t] = 0;
    }
    r->cur++;
    return try_start(r);
}

/* What this rank does towards `task` when its receive `pred` (a predecessor of kind `kind`)
 * completes: ON_LOCAL (my own send waits for it), ON_SYNC (notify the task's sender), ON_RELAY
 * (my send forwards it), or -1 (nothing: `pred` is not mine to receive, or needs no notice). */
static int action_of(const nws_task *pred, const nws_task *task, uint32_t kind, uint32_t me) {
    if (pred->dst != me) return -1;
    if (kind == NWS_DEP_RELAY) return ON_RELAY; /* the reader checked: a relay's sender received it */
    if (task->src == me) return ON_LOCAL;
    return needs_sync(pred, task) ? ON_SYNC : -1;
}

static int setup(run *r) {
    const nws_dag *d = r->dag;
    uint32_t n = d->ntasks, me = r->me;
    if (n >= SYNC_TAG - 1) return fail(r, "%u tasks exceed the executor's 2^31 - 1 task limit", n);
#define ALLOC(field, count) \
    if (!(r->field = calloc((size_t)(count) + 1, sizeof *r->field))) return fail(r, "out of memory for %u tasks", n);
    ALLOC(buf, n) ALLOC(owned, n) ALLOC(frags, n) ALLOC(arrived, n) ALLOC(posted, n) ALLOC(sent, n) ALLOC(waiting, n)
    ALLOC(origin, n) ALLOC(started, n) ALLOC(t_start, n) ALLOC(t_first, n) ALLOC(t_last_send, n)
    ALLOC(t_last_recv, n) ALLOC(action_index, n + 1)
    size_t nactions = 0;
    for (uint32_t t = 0; t < n; t++) {
        const nws_task *task = &d->tasks[t];
        uint64_t frags = task->bytes ? (task->bytes + r->frag_bytes - 1) / r->frag_bytes : 1;
        if (frags >= MAX_FRAGMENTS) return fail(r, "task %u is too large for %llu-byte fragments", t,
                                                (unsigned long long)r->frag_bytes);
        r->frags[t] = (uint32_t)frags;
        r->origin[t] = d->relays[t] == NWS_NONE ? t : r->origin[d->relays[t]];
        if (task->src == me) r->nsend++;
        if (task->dst == me) r->nrecv++;
        for (uint64_t e = d->dep_index[t]; e < d->dep_index[t + 1]; e++)
            if (action_of(&d->tasks[d->deps[e].task], task, d->deps[e].kind, me) >= 0) {
                r->action_index[d->deps[e].task + 1]++;
                nactions++;
            }
    }
    for (uint32_t t = 0; t < n; t++) r->action_index[t + 1] += r->action_index[t];
    if (!(r->actions = calloc(nactions + 1, sizeof *r->actions)) || !(r->sends = calloc(r->nsend + 1, 4)) ||
        !(r->recvs = calloc(r->nrecv + 1, 4)))
        return fail(r, "out of memory for %u tasks", n);
    uint64_t *fill = calloc((size_t)n + 1, sizeof *fill);
    if (!fill) return fail(r, "out of memory for %u tasks", n);
    memcpy(fill, r->action_index, sizeof *fill * n);
    size_t ns = 0, nr = 0;
    for (uint32_t t = 0; t < n; t++) {
        const nws_task *task = &d->tasks[t];
        if (task->src == me) r->sends[ns++] = t;
        if (task->dst == me) r->recvs[nr++] = t;
        for (uint64_t e = d->dep_index[t]; e < d->dep_index[t + 1]; e++) {
            uint32_t p = d->deps[e].task;
            int what = action_of(&d->tasks[p], task, d->deps[e].kind, me);
            if (what >= 0) r->actions[fill[p]++] = (action){t, (uint32_t)what};
            if (what == ON_LOCAL) r->waiting[t]++;
            /* my send waiting for someone else's receive: its sync (my own earlier send has
             * finished before t starts, one send at a time) */
            if (task->src == me && d->deps[e].kind == NWS_DEP_COMPLETE && needs_sync(&d->tasks[p], task)) {
                r->waiting[t]++;
                r->syncs_expected++;
            }
        }
    }
    free(fill);
    return 0;
}

/* Everything a caller has done before it calls a collective, kept off the clock: receive
 * buffers allocated and touched (a first touch costs a page fault per page while data arrives),
 * and — with the seeded payload — each send's bytes written. */
static int prepare(run *r) {
    const nws_dag *d = r->dag;
    const nw_exec_data *data = r->opt->data;
    for (size_t i = 0; i < r->nrecv; i++) {
        uint32_t p = r->recvs[i];
        const nws_task *task = &d->tasks[p];
        if (data && (r->buf[p] = data->recv_data(data->arg, p))) {
            /* lands in the caller's buffer */
        } else if (task->bytes && !(r->buf[p] = malloc(task->bytes))) {
            return fail(r, "out of memory for task %u (%llu bytes)", p, (unsigned long long)task->bytes);
        } else {
            r->owned[p] = 1;
            if (task->bytes) memset(r->buf[p], 0, task->bytes);
        }
        if (task->src == r->me) { /* a self-copy: nothing to receive */
            const uint8_t *from = data && d->relays[p] == NWS_NONE ? data->send_data(data->arg, p) : NULL;
            if (from && task->bytes) memcpy(r->buf[p], from, task->bytes);
            else if (!data) nw_payload_fill(r->opt->seed, r->origin[p], 0, r->buf[p], task->bytes);
        }
    }
    for (size_t i = 0; i < r->nsend && !data; i++) {
        uint32_t t = r->sends[i];
        const nws_task *task = &d->tasks[t];
        if (task->dst == r->me || d->relays[t] != NWS_NONE || !task->bytes) continue;
        if (!(r->buf[t] = malloc(task->bytes)))
            return fail(r, "out of memory for task %u (%llu bytes)", t, (unsigned long long)task->bytes);
        r->owned[t] = 1;
        nw_payload_fill(r->opt->seed, r->origin[t], 0, r->buf[t], task->bytes);
    }
    return 0;
}

static int post_receives(run *r) {
    const nws_dag *d = r->dag;
    static uint8_t sync_byte; /* sync payloads are ignored */
    for (size_t i = 0; i < r->nrecv; i++) {
        uint32_t p = r->recvs[i];
        const nws_task *task = &d->tasks[p];
        if (task->src == r->me) continue; /* a self-copy (prepare() made it): nothing to receive */
        for (uint32_t k = 0; k < r->frags[p]; k++)
            if (r->tp->irecv(r->tp->ctx, task->src, p, task->bytes ? r->buf[p] + (uint64_t)k * r->frag_bytes : NULL,
                             frag_len(r, p, k), cookie(C_RECV, p, k)))
                return transport_failed(r, "posting a receive");
    }
    for (size_t i = 0; i < r->nsend; i++) {
        uint32_t t = r->sends[i];
        for (uint64_t e = d->dep_index[t]; e < d->dep_index[t + 1]; e++) {
            const nws_task *pred = &d->tasks[d->deps[e].task];
            if (d->deps[e].kind == NWS_DEP_COMPLETE && needs_sync(pred, &d->tasks[t]))
                if (r->tp->irecv(r->tp->ctx, pred->dst, SYNC_TAG | t, &sync_byte, 1, cookie(C_SYNC_RECV, t, 0)))
                    return transport_failed(r, "posting a sync receive");
        }
    }
    return 0;
}

/* Every byte this rank received against the seeded payload, once its share is done: off the
 * call's clock, as an MPI caller would look at its data after the collective returns (checking
 * 2 MiB at a gather's root costs milliseconds of a core the whole job shares). */
static int verify(run *r) {
    for (size_t i = 0; i < r->nrecv && !r->opt->data; i++) {
        uint32_t p = r->recvs[i];
        const nws_task *task = &r->dag->tasks[p];
        if (!task->bytes || task->src == r->me) continue; /* a self-copy was written here */
        int64_t bad = nw_payload_check(r->opt->seed, r->origin[p], 0, r->buf[p], task->bytes);
        if (bad >= 0)
            return fail(r, "task %u from rank %u: byte %llu is not what task %u sent", p, task->src,
                        (unsigned long long)bad, r->origin[p]);
        r->res->bytes_verified += task->bytes;
    }
    return 0;
}

/* After its own share, a rank swaps an empty "done" message with every rank it talked to, so a
 * peer that died or failed anywhere near it fails it too instead of letting it exit content. */
static int handshake(run *r) {
    uint8_t *need = calloc(r->dag->ranks, 1);
    if (!need) return fail(r, "out of memory");
    nw_exec_peers(r->dag, r->me, need);
    size_t pending = 0;
    int rc = 0;
    for (uint32_t q = 0; q < r->dag->ranks && !rc; q++) {
        if (!need[q]) continue;
        if (r->tp->irecv(r->tp->ctx, q, DONE_TAG, NULL, 0, cookie(C_DONE, q, 0)) ||
            r->tp->isend(r->tp->ctx, q, DONE_TAG, NULL, 0, cookie(C_DONE, q, 1)))
            rc = transport_failed(r, "finishing");
        pending += 2;
    }
    free(need);
    for (uint64_t c; !rc && pending; pending--)
        if (r->tp->wait_any(r->tp->ctx, &c)) rc = transport_failed(r, "finishing (my share is done)");
    return rc;
}

static void release(run *r) {
    if (r->buf && r->owned)
        for (uint32_t t = 0; t < r->dag->ntasks; t++)
            if (r->owned[t]) free(r->buf[t]);
    void *arrays[] = {r->buf, r->owned, r->frags, r->arrived, r->posted, r->sent, r->waiting, r->origin, r->started,
                      r->t_start, r->t_first, r->t_last_send, r->t_last_recv, r->action_index, r->actions,
                      r->sends, r->recvs};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) free(arrays[i]);
}

static void record_trace(run *r) {
    nw_exec_result *res = r->res;
    res->events = calloc(r->nsend + r->nrecv + 1, sizeof *res->events);
    if (!res->events) return;
    for (size_t i = 0; i < r->nsend; i++) {
        uint32_t t = r->sends[i];
        res->events[res->nevents++] = (nw_trace_event){t, 0, r->t_start[t], r->t_start[t], r->t_last_send[t]};
    }
    for (size_t i = 0; i < r->nrecv; i++) {
        uint32_t p = r->recvs[i];
        res->events[res->nevents++] = (nw_trace_event){p, 1, r->t_first[p], r->t_first[p], r->t_last_recv[p]};
    }
}

int nw_exec_dag(const nws_dag *dag, nw_transport *tp, const nw_exec_options *opt, nw_exec_result *res,
                char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    run r = {.dag = dag, .tp = tp, .opt = opt, .res = res, .me = tp->rank, .frag_bytes = opt->fragment_bytes,
             .err = err, .errlen = errlen};
    int rc = 0;
    if (opt->fragment_bytes < 4096 || opt->fragment_bytes % 8)
        rc = fail(&r, "fragment size %llu must be a multiple of 8, at least 4096", (unsigned long long)opt->fragment_bytes);
    else if (tp->ranks != dag->ranks)
        rc = fail(&r, "the schedule has %u ranks but %u processes run it", dag->ranks, tp->ranks);
    res->start_ns = tp->now_ns(tp->ctx);
    if (!rc) rc = setup(&r);
    if (!rc) rc = prepare(&r);
    if (!rc && opt->ready && opt->ready(opt->ready_arg)) rc = fail(&r, "stopped before the start");
    res->start_ns = tp->now_ns(tp->ctx); /* the call starts here, as the caller's clock would */
    if (!rc) rc = post_receives(&r);
    if (!rc) rc = try_start(&r);
    uint64_t syncs_left = r.syncs_expected;
    while (!rc && (r.cur < r.nsend || r.recvs_done < r.nrecv || syncs_left || r.sync_sends_pending)) {
        uint64_t c;
        if (tp->wait_any(tp->ctx, &c)) {
            rc = transport_failed(&r, "waiting");
            break;
        }
        uint32_t kind = (uint32_t)(c >> 60), task = (uint32_t)(c >> 28), frag = (uint32_t)(c & (MAX_FRAGMENTS - 1));
        switch (kind) {
        case C_SEND: rc = on_send_done(&r, task, frag); break;
        case C_RECV: rc = on_fragment(&r, task, frag); break;
        case C_SYNC_SEND: r.sync_sends_pending--; break;
        case C_SYNC_RECV:
            syncs_left--;
            res->syncs_received++;
            r.waiting[task]--;
            rc = try_start(&r);
            break;
        default: rc = fail(&r, "internal error: unknown completion %llx", (unsigned long long)c);
        }
    }
    res->end_ns = tp->now_ns(tp->ctx);
    if (!rc) rc = verify(&r);
    if (!rc && opt->handshake) rc = handshake(&r);
    if (r.sends) record_trace(&r);
    release(&r);
    return rc;
}

void nw_exec_free(nw_exec_result *res) {
    free(res->events);
    memset(res, 0, sizeof *res);
}
