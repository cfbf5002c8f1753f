#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/* transport_mpi.c — the executor core's transport (core/transport.h) over MPI point-to-point.
 *
 * Every call goes to the PMPI_ entry points on a private duplicate of the user's communicator,
 * so netweave's messages never match the application's. Completions are collected with
 * PMPI_Waitsome and handed out one at a time.
 */
#include "transport_mpi.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int grow(nw_mpi_transport *t) {
    int cap = t->cap ? 2 * t->cap : 64;
    MPI_Request *req = realloc(t->req, sizeof *req * (size_t)cap);
    if (req) t->req = req;
    uint64_t *cookie = realloc(t->cookie, sizeof *cookie * (size_t)cap);
    if (cookie) t->cookie = cookie;
    int *ready = realloc(t->ready, sizeof *ready * (size_t)cap);
    if (ready) t->ready = ready;
    if (!req || !cookie || !ready) return -1;
    for (int i = t->cap; i < cap; i++) t->req[i] = MPI_REQUEST_NULL;
    t->cap = cap;
    return 0;
}

static int failed(nw_mpi_transport *t, int rc, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    PMPI_Error_string(rc, text, &len);
    snprintf(t->err, sizeof t->err, "%s: %s", what, text);
    return -1;
}

/* The executors' tags are 32-bit with a flag in the top bit (exec.c's sync messages); MPI tags
 * are non-negative ints: fold the flag into the lowest bit. */
static int mpi_tag(uint32_t tag) { return (int)((tag & 0x7fffffffu) * 2u + (tag >> 31)); }

/* Post a send (`out`) or a receive in a free request slot (finished requests are MPI_REQUEST_NULL). */
static int post(nw_mpi_transport *t, int out, uint32_t peer, uint32_t tag, void *buf, size_t len, uint64_t cookie) {
    if (len > INT32_MAX) return snprintf(t->err, sizeof t->err, "a message of %zu bytes is too large", len), -1;
    if (t->used == t->cap && grow(t)) return snprintf(t->err, sizeof t->err, "out of memory for requests"), -1;
    int i = t->used++;
    t->cookie[i] = cookie;
    t->active++;
    int rc = out ? PMPI_Isend(buf, (int)len, MPI_BYTE, (int)peer, mpi_tag(tag), t->comm, &t->req[i])
                 : PMPI_Irecv(buf, (int)len, MPI_BYTE, (int)peer, mpi_tag(tag), t->comm, &t->req[i]);
    return rc == MPI_SUCCESS ? 0 : failed(t, rc, out ? "MPI_Isend" : "MPI_Irecv");
}

static int mpi_isend(void *ctx, uint32_t peer, uint32_t tag, const void *buf, size_t len, uint64_t cookie) {
    return post(ctx, 1, peer, tag, (void *)buf, len, cookie);
}

static int mpi_irecv(void *ctx, uint32_t peer, uint32_t tag, void *buf, size_t len, uint64_t cookie) {
    return post(ctx, 0, peer, tag, buf, len, cookie);
}

static int mpi_wait_any(void *ctx, uint64_t *cookie) {
    nw_mpi_transport *t = ctx;
    if (t->next == t->nready) {
        if (!t->active) return snprintf(t->err, sizeof t->err, "waiting with nothing in flight"), -1;
        int count = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow" /* MPICH declares MPI_STATUSES_IGNORE as an array */
        int rc = PMPI_Waitsome(t->used, t->req, &count, t->ready, MPI_STATUSES_IGNORE);
#pragma GCC diagnostic pop
        if (rc != MPI_SUCCESS) return failed(t, rc, "MPI_Waitsome");
        if (count == MPI_UNDEFINED || count <= 0) return snprintf(t->err, sizeof t->err, "no request completed"), -1;
        t->nready = count;
        t->next = 0;
    }
    *cookie = t->cookie[t->ready[t->next++]];
    t->active--;
    if (!t->active) t->used = 0; /* every slot is free again */
    return 0;
}

static uint64_t mpi_now_ns(void *ctx) {
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *mpi_error(void *ctx) { return ((nw_mpi_transport *)ctx)->err; }

nw_transport nw_mpi_transport_start(nw_mpi_transport *t, MPI_Comm comm, uint32_t rank, uint32_t ranks) {
    t->comm = comm;
    t->used = t->active = t->nready = t->next = 0;
    t->err[0] = 0;
    return (nw_transport){.ctx = t, .rank = rank, .ranks = ranks, .isend = mpi_isend, .irecv = mpi_irecv,
                          .wait_any = mpi_wait_any, .now_ns = mpi_now_ns, .error = mpi_error};
}

void nw_mpi_transport_cancel(nw_mpi_transport *t) {
    /* After a failure: cancel what is still posted so the communicator can be reused or freed. */
    for (int i = 0; i < t->used; i++)
        if (t->req[i] != MPI_REQUEST_NULL) {
            PMPI_Cancel(&t->req[i]);
            PMPI_Request_free(&t->req[i]);
        }
    t->used = t->active = t->nready = t->next = 0;
}

void nw_mpi_transport_free(nw_mpi_transport *t) {
    free(t->req);
    free(t->cookie);
    free(t->ready);
    memset(t, 0, sizeof *t);
}
