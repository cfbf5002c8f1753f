/* tcp.h — the TCP transport of the executor core: two connections per pair of ranks that talk,
 * one for data and one for control messages (NW_CONTROL_TAG, marked DSCP EF).
 *
 * Ranks find each other through an address table (rank r listens on addrs[r]). The lower rank of
 * each pair connects; both sides exchange a hello carrying the schedule's checksum, so ranks
 * started on different schedules refuse each other. Messages are framed as
 * {u32 tag, u32 magic, u64 length} + data; unexpected messages are buffered. A send completes
 * once the kernel has passed every byte of it to the network (TCP_NOTSENT_LOWAT), not when the
 * socket buffer took it.
 *
 *     nw_tcp *tcp; nw_transport tp;
 *     if (nw_tcp_open(&tcp, rank, ranks, listen_fd, addrs, need, dag.checksum, 30.0, err, sizeof err)) fail(err);
 *     nw_tcp_transport(tcp, &tp);   ... nw_exec_dag(&dag, &tp, ...) ...   nw_tcp_close(tcp);
 */
#ifndef NW_TCP_H
#define NW_TCP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/transport.h"

typedef struct nw_tcp nw_tcp;

/* Connect to every rank q with need[q] != 0. `listen_fd` is a listening socket for this rank's
 * address (or -1: bind and listen on addrs[rank] here). `timeout_s` bounds the set-up and, later,
 * any wait during which no byte moves. Returns 0, or -1 with one line in err. */
int nw_tcp_open(nw_tcp **out, uint32_t rank, uint32_t ranks, int listen_fd, const struct sockaddr_in *addrs,
                const uint8_t *need, uint64_t token, double timeout_s, char *err, size_t errlen);
void nw_tcp_transport(nw_tcp *tcp, nw_transport *out);
/* Number of connections and messages this rank moved (for reports). */
void nw_tcp_counts(const nw_tcp *tcp, uint64_t *connections, uint64_t *messages_sent);
void nw_tcp_close(nw_tcp *tcp);

#endif
