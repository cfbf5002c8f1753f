/* nws.h — one rank's share of a netweave schedule file (.nws), as the executors run it.
 *
 * The reader (nws.c) turns a schedule file — phases or a task DAG, version 1 or 2 — into the
 * per-rank form below. Executors (exec.h) run that form over any transport (transport.h).
 *
 * Data a message carries is named either by a byte count (byte-sized schedules: version 1,
 * paper 004's DAGs) or by *blocks* (version 2), so one file serves every call size:
 *   - alltoall:  block id = origin * N + final destination (N² blocks);
 *   - allgather, gather: block id = origin rank (N blocks).
 * A message's size is then (number of blocks) × (block size of the call).
 */
#ifndef NWS_H
#define NWS_H

#include <stddef.h>
#include <stdint.h>

enum nws_form { NWS_FORM_PHASES = 0, NWS_FORM_DAG = 1 };
enum nws_collective {
    NWS_ALLTOALL = 0, NWS_ALLGATHER = 1, NWS_GATHER = 2, NWS_BARRIER = 3, NWS_CUSTOM = 4
};
/* How a schedule is executed (as the flow simulator names them). */
enum nws_executor {
    NWS_EXEC_SYNC = 0, NWS_EXEC_LOCAL_SYNC = 1, NWS_EXEC_ASYNC = 2, NWS_EXEC_DAG = 3
};

/* One send or receive of this rank. */
typedef struct {
    uint32_t step;        /* phase index (phases form) or task id (DAG form) */
    uint32_t peer;        /* destination of a send, source of a receive */
    uint64_t bytes;       /* byte-sized schedules: the size; block schedules: 0 */
    uint64_t block_first; /* block schedules: blocks[block_first .. block_first + block_count] */
    uint32_t block_count;
    uint32_t relays;      /* DAG sends: index (into recvs) of the receive it forwards, or NWS_NONE */
} nws_op;

#define NWS_NONE UINT32_MAX

/* DAG form: how one of this rank's sends waits for one predecessor task. */
enum nws_wait_kind {
    NWS_WAIT_LOCAL = 0, /* the predecessor is my own earlier send: wait until its data has left */
    NWS_WAIT_RECV = 1,  /* I receive the predecessor: wait until it has fully arrived */
    NWS_WAIT_SYNC = 2   /* someone else receives it: wait for its 1-byte sync message from `peer` */
};
typedef struct {
    uint32_t task; /* predecessor task id */
    uint32_t kind; /* enum nws_wait_kind */
    uint32_t peer; /* NWS_WAIT_SYNC: the rank that sends the sync; else NWS_NONE */
    uint32_t index;/* NWS_WAIT_LOCAL: index into sends; NWS_WAIT_RECV: index into recvs */
} nws_wait;

/* DAG form: after one of my receives completes, send a 1-byte sync for `task` to `peer`. */
typedef struct {
    uint32_t task; /* the successor task waiting for it */
    uint32_t peer; /* the successor's sender */
} nws_notify;

typedef struct {
    uint32_t rank, ranks;   /* this rank, communicator size N */
    uint32_t version, form, collective, root;
    uint32_t flags;         /* bit 0: every phase a permutation; bit 1: forwarded delivery */
    uint32_t executor;      /* the schedule's suggested executor (enum nws_executor) */
    uint32_t concurrent_sends; /* sends in flight for async/local-sync/dag (>= 1) */
    uint32_t phases;        /* phases form: number of phases; DAG: number of tasks */
    uint32_t has_blocks;    /* 1: ops name blocks; 0: ops carry bytes */
    char name[256];         /* schedule name, NUL-terminated (truncated) */
    uint32_t *placement;    /* ranks entries: host index of every rank */

    uint64_t nsend, nrecv;
    nws_op *sends;          /* in this rank's send order (phase order, then listed order) */
    nws_op *recvs;          /* phase order, by source within a phase (DAG: task order) */
    uint32_t *blocks;       /* block ids referenced by ops */
    uint64_t nblocks;

    /* DAG only (else NULL): waits of sends[i] are waits[wait_index[i] .. wait_index[i+1]];
     * syncs to send after recvs[j] completes are notifies[notify_index[j] .. notify_index[j+1]];
     * syncs this rank will receive, one per (task, sender), in task order. */
    uint64_t *wait_index;  nws_wait *waits;
    uint64_t *notify_index; nws_notify *notifies;
    uint64_t nsync_in;     nws_notify *syncs_in; /* .task = successor task, .peer = sync sender */
} nws_rank;

/* Read `rank`'s share of the schedule at `path`. Returns 0, or -1 with a one-line reason in
 * err (never exits, never crashes on a corrupt file). */
int nws_read_rank(const char *path, uint32_t rank, nws_rank *out, char *err, size_t errlen);
/* Same, from a file already in memory. */
int nws_parse_rank(const void *data, size_t len, uint32_t rank, nws_rank *out, char *err,
                   size_t errlen);
void nws_free(nws_rank *r);

#endif
