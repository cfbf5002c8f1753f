/* transport_mpi.h — core/transport.h over MPI point-to-point (PMPI_ calls on a private
 * communicator), the transport of the PMPI library (nwmpi.c).
 *
 *     nw_mpi_transport state = {0};
 *     nw_transport tp = nw_mpi_transport_start(&state, private_comm, rank, size);
 *     ... nw_collective_run(resolved, &tp, ...) ...
 *     nw_mpi_transport_free(&state);
 */
#ifndef NW_TRANSPORT_MPI_H
#define NW_TRANSPORT_MPI_H

#include <mpi.h>
#include <stdio.h>

#include "../core/transport.h"

typedef struct {
    MPI_Comm comm;
    MPI_Request *req; /* slots 0 .. used-1 of this call */
    uint64_t *cookie;
    int *ready;       /* indices PMPI_Waitsome returned, handed out from `next` */
    int cap, used, active, nready, next;
    char err[MPI_MAX_ERROR_STRING + 64];
} nw_mpi_transport;

/* Reset `t` for one collective call on `comm` (kept buffers are reused). */
nw_transport nw_mpi_transport_start(nw_mpi_transport *t, MPI_Comm comm, uint32_t rank, uint32_t ranks);
/* Cancel and free whatever is still posted (after a failed call). */
void nw_mpi_transport_cancel(nw_mpi_transport *t);
void nw_mpi_transport_free(nw_mpi_transport *t);

#endif
