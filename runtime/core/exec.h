/* exec.h — the executor core: runs one rank's share of a task DAG over any transport.
 *
 * Semantics are those of traffic/dag.rs and paper 004's runtime:
 *   - a rank sends one task at a time, in task-id order (ids are topological, so this never
 *     deadlocks), each once its dependencies are met;
 *   - a `complete` dependency is met locally when the predecessor was this rank's own send (its
 *     data has left) or its own receive (fully arrived); otherwise the predecessor's receiver
 *     sends this rank a 1-byte sync message when it has the data;
 *   - a `relay` task forwards its predecessor's data fragment by fragment as it arrives;
 *   - data is a seeded payload keyed by the task that first sent it, and every receiver checks
 *     every byte it got once its share is done (off the call's clock) — unless the caller says where each task's data lives (nw_exec_data:
 *     the MPI library points tasks into the user's buffers);
 *   - finally a rank swaps an empty "done" message with every rank it talked to, so it fails
 *     (instead of exiting content) when a partner died or failed.
 *
 *     nw_exec_options opt = nw_exec_defaults();
 *     nw_exec_result res; char err[512];
 *     if (nw_exec_dag(&dag, &transport, &opt, &res, err, sizeof err)) fail(err);
 */
#ifndef NW_EXEC_H
#define NW_EXEC_H

#include "nws.h"
#include "transport.h"

/* Where tasks' data lives on this rank, for callers with real buffers. Either may return NULL:
 * the executor then uses a buffer of its own (a relay's pass-through data, say). */
typedef struct {
    void *arg;
    const uint8_t *(*send_data)(void *arg, uint32_t task); /* a task this rank sends, relaying nothing */
    uint8_t *(*recv_data)(void *arg, uint32_t task);       /* a task this rank receives */
} nw_exec_data;

typedef struct {
    uint64_t fragment_bytes; /* tasks move as fragments of this size (multiple of 8, >= 4096) */
    const nw_exec_data *data; /* NULL: seeded payload, every byte verified */
    int handshake;            /* swap "done" messages at the end (a dead partner fails this rank) */
    uint64_t seed;           /* payload seed: every rank must use the same */
    /* Called before this rank starts sending `task` (fault injection in tests); may be NULL. */
    void (*before_send)(void *arg, uint32_t task);
    void *before_send_arg;
    /* Called once this rank is prepared — its buffers allocated and touched, its payload written,
     * as a caller's buffers are before it calls a collective — just before its clock starts
     * (a launcher's start line or a barrier goes here); nonzero stops the run. May be NULL. */
    int (*ready)(void *arg);
    void *ready_arg;
} nw_exec_options;

/* One task as this rank saw it: a send (start = first fragment posted, last = last fragment
 * handed to the transport's peer) or a receive (first / last fragment arrived). ns on now_ns. */
typedef struct {
    uint32_t task;
    uint32_t is_receive;
    uint64_t start_ns, first_ns, last_ns;
} nw_trace_event;

typedef struct {
    nw_trace_event *events; /* sends then receives, each in task order */
    size_t nevents;
    uint64_t bytes_sent, bytes_received, bytes_verified, syncs_sent, syncs_received, fragments_sent;
    uint64_t start_ns, end_ns;
} nw_exec_result;

nw_exec_options nw_exec_defaults(void);
/* Mark need[q] = 1 for every rank q that `rank` exchanges data or sync messages with. */
void nw_exec_peers(const nws_dag *dag, uint32_t rank, uint8_t *need);
/* Run this rank's part of `dag`. Returns 0, or -1 with one line in `err` (a dead peer, a
 * timeout, a wrong byte). The result is filled in either way; free it with nw_exec_free. */
int nw_exec_dag(const nws_dag *dag, nw_transport *tp, const nw_exec_options *opt, nw_exec_result *res,
                char *err, size_t errlen);
void nw_exec_free(nw_exec_result *res);

/* The seeded payload: byte `offset` of the data first sent by task `origin`. */
void nw_payload_fill(uint64_t seed, uint32_t origin, uint64_t offset, uint8_t *buf, size_t len);
/* Offset (within buf) of the first byte differing from the payload, or -1. */
int64_t nw_payload_check(uint64_t seed, uint32_t origin, uint64_t offset, const uint8_t *buf, size_t len);

#endif
