/* transport.h — what the executor core (exec.h) needs from a transport.
 *
 * Two transports implement it: TCP sockets (runtime/tcp, paper 004's executor) and MPI
 * point-to-point (runtime/mpi, inside the PMPI library). Messages are matched by
 * (peer, tag); between one ordered pair with one tag they are delivered in posting order.
 * The core pre-posts receives where it can; a transport may buffer unexpected data.
 */
#ifndef NW_TRANSPORT_H
#define NW_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct nw_transport {
    void *ctx;
    uint32_t rank, ranks;
    /* Start sending `len` bytes at `buf` to `peer` with `tag`; *req identifies it until done. */
    int (*isend)(void *ctx, uint32_t peer, uint32_t tag, const void *buf, size_t len,
                 uint64_t *req);
    /* Start receiving exactly `len` bytes from `peer` with `tag` into `buf`. */
    int (*irecv)(void *ctx, uint32_t peer, uint32_t tag, void *buf, size_t len, uint64_t *req);
    /* Block until at least one posted request has completed and return it in *done.
     * Returns -1 (never hangs) when a peer died or nothing moved for the transport's timeout;
     * error() then says why, naming the peer. */
    int (*wait_any)(void *ctx, uint64_t *done);
    /* Optional (may be NULL): a barrier across all ranks, for the phase-synchronous executor. */
    int (*barrier)(void *ctx);
    const char *(*error)(void *ctx);
} nw_transport;

#endif
