/* transport.h — what the executor core (exec.h) needs from a transport.
 *
 * TCP sockets implement it (runtime/tcp, paper 004's executor); MPI point-to-point is meant to
 * be the second one, inside the PMPI library. Messages are matched by (peer, tag); between one
 * ordered pair with one tag they are delivered in posting order, and a receive must name the
 * exact length. Every request carries a caller's `cookie`, handed back when it completes.
 *
 * Tags with NW_CONTROL_TAG set mark small control messages (syncs, the end-of-run swap); a
 * transport may carry them on a path of their own, so they never wait behind data.
 */
#ifndef NW_TRANSPORT_H
#define NW_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#define NW_CONTROL_TAG 0x80000000u

typedef struct nw_transport {
    void *ctx;
    uint32_t rank, ranks;
    /* Start sending `len` bytes at `buf` (untouched until completion) to `peer` with `tag`. */
    int (*isend)(void *ctx, uint32_t peer, uint32_t tag, const void *buf, size_t len, uint64_t cookie);
    /* Start receiving exactly `len` bytes from `peer` with `tag` into `buf`. */
    int (*irecv)(void *ctx, uint32_t peer, uint32_t tag, void *buf, size_t len, uint64_t cookie);
    /* Block until a request has completed and return its cookie. Returns -1 (never hangs) when a
     * peer died or nothing moved for the transport's timeout; error() then says why, naming
     * the peer. */
    int (*wait_any)(void *ctx, uint64_t *cookie);
    /* Nanoseconds on a clock every rank on this machine shares (for traces). */
    uint64_t (*now_ns)(void *ctx);
    const char *(*error)(void *ctx);
} nw_transport;

#endif
