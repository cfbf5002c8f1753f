/* collective.h — one rank's share of a phases schedule, run on real buffers over any transport.
 *
 * The schedule (nws.h, version 2) says which blocks each message carries; an *nw_collective*
 * resolves, once per schedule and rank, where each block lives on this rank — the caller's send buffer,
 * its receive buffer, or a scratch slot for data only passing through (Bruck, binomial trees) —
 * so a call at any size only multiplies by the block size. A message of one block is sent from
 * or received into its place directly; a message of several is packed and unpacked.
 *
 * Executors, as the flow simulator names them:
 *   NWS_EXEC_SYNC        phase p+1 starts after phase p has finished everywhere (a barrier);
 *   NWS_EXEC_LOCAL_SYNC  a rank starts phase p+1 once its own phase-p sends and receives are done;
 *   NWS_EXEC_ASYNC       a rank keeps `concurrent` sends in flight in its send order; with
 *                        forwarded delivery a send also waits for the receives of earlier phases.
 * Receives are posted at the start in every mode.
 *
 *     char err[256];
 *     nw_collective *p = nw_collective_build(&schedule, err, sizeof err);
 *     nw_buffers b = {.sendbuf = s, .recvbuf = r, .block_bytes = count * type_size};
 *     if (!p || nw_collective_run(p, &transport, &b, NWS_EXEC_ASYNC, 1, err, sizeof err)) fail(err);
 */
#ifndef NW_COLLECTIVE_H
#define NW_COLLECTIVE_H

#include "nws.h"
#include "transport.h"

typedef struct {
    const void *sendbuf; /* all-to-all: N blocks (block t for rank t); allgather, gather: 1 block */
    void *recvbuf;       /* N blocks (block o from rank o); a gather's non-roots: unused */
    size_t block_bytes;
} nw_buffers;

typedef struct nw_collective nw_collective;

/* Resolve where every block of `s` lives on its rank, checking that the rank never sends a
 * block it has not received by then. NULL with a reason in `err` when the schedule cannot run
 * on buffers (no blocks, a custom or barrier schedule, a block sent before it is held). The result
 * points into `s`, which must outlive it. */
nw_collective *nw_collective_build(const nws_phases *s, char *err, size_t errlen);
/* Run the resolved collective on `b`. Returns 0, or -1 with one line in `err`. */
int nw_collective_run(nw_collective *p, nw_transport *tp, const nw_buffers *b, uint32_t executor, uint32_t concurrent,
                      char *err, size_t errlen);
void nw_collective_free(nw_collective *p);

#endif
