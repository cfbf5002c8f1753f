/* tcp.c — the TCP transport (see tcp.h). Non-blocking sockets driven by epoll (a rank holds two
 * connections per peer, and a wait must not cost a scan of all of them); every wait is bounded by
 * the timeout, and a peer that closes while it still owes data is reported by rank. */
#define _GNU_SOURCE
#include "tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define FRAME_MAGIC 0x4e574652u /* "NWFR" */
#define HELLO_MAGIC 0x4e574843u /* "NWHC" */
#define MAX_UNEXPECTED ((uint64_t)1 << 34)

typedef struct msg {
    struct msg *next;
    uint32_t tag;
    int unexpected;
    uint8_t *buf;
    size_t len, done; /* sends count the 16-byte header in `done` */
    uint64_t cookie;
    uint8_t hdr[16];
} msg;

/* Two connections per pair of ranks: data, and control messages (NW_CONTROL_TAG: syncs, the
 * end-of-run swap), so a sync never waits in a TCP stream behind data bound the same way. */
enum { LANE_DATA = 0, LANE_CONTROL = 1, LANES = 2 };
/* Control connections carry DSCP EF: a fabric may queue them ahead of data (the emulated one does). */
#define CONTROL_TOS 0xb8

typedef struct {
    int fd, closed;
    int watching_out; /* registered for EPOLLOUT: it has sends queued */
    uint32_t peer, lane;
    msg *sq_head, *sq_tail;         /* sends, in posting order */
    msg *posted_head, *posted_tail; /* receives not yet matched */
    msg *unexp_head, *unexp_tail;   /* arrived before their receive was posted */
    uint8_t rhdr[16];
    size_t rhdr_got;
    msg *rcur; /* the message being read */
} conn;

struct nw_tcp {
    uint32_t rank, ranks;
    int timeout_ms;
    conn *conns;
    size_t nconn;
    int32_t *conn_of; /* connection index of each lane × peer (lane·ranks + peer), or -1 */
    int epoll_fd;
    struct epoll_event *events;
    size_t open_conns;
    uint64_t *done;
    size_t done_head, ndone, done_cap;
    uint64_t messages_sent;
    char err[512];
};

static int fail(nw_tcp *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t now_ns(void *ctx) {
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int push_done(nw_tcp *t, uint64_t cookie) {
    if (t->ndone == t->done_cap) {
        size_t cap = t->done_cap ? 2 * t->done_cap : 256;
        uint64_t *grown = realloc(t->done, cap * sizeof *grown);
        if (!grown) return fail(t, "out of memory");
        t->done = grown;
        t->done_cap = cap;
    }
    t->done[t->ndone++] = cookie;
    return 0;
}

static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get_u64(const uint8_t *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

static size_t count(const msg *m) {
    size_t n = 0;
    for (; m; m = m->next) n++;
    return n;
}

static int lost(nw_tcp *t, conn *c, const char *how) {
    size_t owed = count(c->posted_head) + (c->rcur != NULL);
    return fail(t, "rank %u %s while %zu message(s) from it were still expected and %zu to it unsent (it exited or died)",
                c->peer, how, owed, count(c->sq_head));
}

/* Complete the head send: it is fully written (and, normally, gone to the network). */
static int complete_head(nw_tcp *t, conn *c) {
    msg *m = c->sq_head;
    c->sq_head = m->next;
    if (!c->sq_head) c->sq_tail = NULL;
    int rc = push_done(t, m->cookie);
    free(m);
    t->messages_sent++;
    return rc;
}

/* Write as much of the send queue as the socket takes. */
static int progress_send(nw_tcp *t, conn *c) {
    while (c->sq_head) {
        msg *m = c->sq_head;
        struct iovec iov[2];
        int n_iov = 0;
        if (m->done < 16) iov[n_iov++] = (struct iovec){m->hdr + m->done, 16 - m->done};
        size_t data_done = m->done > 16 ? m->done - 16 : 0;
        if (m->len > data_done) iov[n_iov++] = (struct iovec){m->buf + data_done, m->len - data_done};
        if (n_iov) {
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
            ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
                if (errno == EINTR) continue;
                return lost(t, c, "reset its connection");
            }
            m->done += (size_t)n;
        }
        if (m->done < 16 + m->len) continue;
        /* A send has left when the kernel has passed all of it to the network, not when the
         * socket buffer took it: a later send of this rank waits for it (see tune()). */
        int unsent = 0;
        if (ioctl(c->fd, SIOCOUTQNSD, &unsent) == 0 && unsent > 0) return 0;
        if (complete_head(t, c)) return -1;
    }
    return 0;
}

static msg *take_match(msg **head, msg **tail, uint32_t tag) {
    for (msg *prev = NULL, *m = *head; m; prev = m, m = m->next) {
        if (m->tag != tag) continue;
        if (prev) prev->next = m->next;
        else *head = m->next;
        if (*tail == m) *tail = prev;
        m->next = NULL;
        return m;
    }
    return NULL;
}

static void append(msg **head, msg **tail, msg *m) {
    m->next = NULL;
    if (*tail) (*tail)->next = m;
    else *head = m;
    *tail = m;
}

static int finish_receive(nw_tcp *t, conn *c) {
    msg *m = c->rcur;
    c->rcur = NULL;
    if (m->unexpected) {
        append(&c->unexp_head, &c->unexp_tail, m);
        return 0;
    }
    int rc = push_done(t, m->cookie);
    free(m);
    return rc;
}

/* Read everything the socket has, matching frames to posted receives. */
static int progress_recv(nw_tcp *t, conn *c) {
    for (;;) {
        ssize_t n;
        if (!c->rcur) {
            n = recv(c->fd, c->rhdr + c->rhdr_got, 16 - c->rhdr_got, MSG_DONTWAIT);
        } else {
            msg *m = c->rcur;
            n = recv(c->fd, m->buf + m->done, m->len - m->done, MSG_DONTWAIT);
        }
        if (n == 0) {
            /* A peer that read all it expected may close before the kernel reports our last bytes
             * sent: a fully written send is complete. */
            while (c->sq_head && c->sq_head->done == 16 + c->sq_head->len)
                if (complete_head(t, c)) return -1;
            if (c->rcur || c->rhdr_got || c->posted_head || c->sq_head) return lost(t, c, "closed its connection");
            c->closed = 1;
            t->open_conns--;
            epoll_ctl(t->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
            return 0;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) continue;
            return lost(t, c, "reset its connection");
        }
        if (c->rcur) {
            c->rcur->done += (size_t)n;
            if (c->rcur->done < c->rcur->len) continue;
            /* Hand each arrived message to the executor at once, so relays forward as data comes. */
            return finish_receive(t, c);
        }
        c->rhdr_got += (size_t)n;
        if (c->rhdr_got < 16) continue;
        c->rhdr_got = 0;
        uint32_t tag = get_u32(c->rhdr), magic = get_u32(c->rhdr + 4);
        uint64_t len = get_u64(c->rhdr + 8);
        if (magic != FRAME_MAGIC) return fail(t, "rank %u sent a malformed frame (is it a netweave executor?)", c->peer);
        msg *m = take_match(&c->posted_head, &c->posted_tail, tag);
        if (m && m->len != len)
            return fail(t, "rank %u sent %llu bytes with tag %u where %zu were expected (do both run one schedule?)",
                        c->peer, (unsigned long long)len, tag, m->len);
        if (!m) {
            if (len > MAX_UNEXPECTED || !(m = calloc(1, sizeof *m)) || !(m->buf = malloc(len ? len : 1))) {
                free(m);
                return fail(t, "cannot buffer an unexpected %llu-byte message from rank %u", (unsigned long long)len, c->peer);
            }
            m->tag = tag;
            m->len = len;
            m->unexpected = 1;
        }
        c->rcur = m;
        if (len == 0 && finish_receive(t, c)) return -1;
    }
}

/* The connection that carries `tag` to or from `peer`, or NULL. */
static conn *conn_for(nw_tcp *t, uint32_t peer, uint32_t tag) {
    if (peer >= t->ranks) return NULL;
    int32_t i = t->conn_of[(tag & NW_CONTROL_TAG ? LANE_CONTROL : LANE_DATA) * t->ranks + peer];
    return i < 0 ? NULL : &t->conns[i];
}

static int t_isend(void *ctx, uint32_t peer, uint32_t tag, const void *buf, size_t len, uint64_t cookie) {
    nw_tcp *t = ctx;
    conn *c = conn_for(t, peer, tag);
    if (!c) return fail(t, "no connection to rank %u", peer);
    msg *m = calloc(1, sizeof *m);
    if (!m) return fail(t, "out of memory");
    *m = (msg){.tag = tag, .buf = (uint8_t *)buf, .len = len, .cookie = cookie};
    put_u32(m->hdr, tag);
    put_u32(m->hdr + 4, FRAME_MAGIC);
    put_u64(m->hdr + 8, len);
    int was_idle = c->sq_head == NULL;
    append(&c->sq_head, &c->sq_tail, m);
    return was_idle ? progress_send(t, c) : 0;
}

static int t_irecv(void *ctx, uint32_t peer, uint32_t tag, void *buf, size_t len, uint64_t cookie) {
    nw_tcp *t = ctx;
    conn *c = conn_for(t, peer, tag);
    if (!c) return fail(t, "no connection to rank %u", peer);
    msg *early = take_match(&c->unexp_head, &c->unexp_tail, tag);
    if (early) {
        int rc = early->len == len ? 0
                 : fail(t, "rank %u sent %zu bytes with tag %u where %zu were expected", peer, early->len, tag, len);
        if (!rc && len) memcpy(buf, early->buf, len);
        free(early->buf);
        free(early);
        return rc ? rc : push_done(t, cookie);
    }
    msg *m = calloc(1, sizeof *m);
    if (!m) return fail(t, "out of memory");
    *m = (msg){.tag = tag, .buf = buf, .len = len, .cookie = cookie};
    append(&c->posted_head, &c->posted_tail, m);
    return 0;
}

static int timed_out(nw_tcp *t) {
    char list[400] = "";
    size_t used = 0, shown = 0;
    for (uint32_t q = 0; q < t->ranks && shown < 6; q++) {
        size_t owed = 0, unsent = 0; /* both connections to q */
        for (uint32_t lane = 0; lane < LANES; lane++) {
            int32_t i = t->conn_of[lane * t->ranks + q];
            if (i < 0) continue;
            owed += count(t->conns[i].posted_head) + (t->conns[i].rcur != NULL);
            unsent += count(t->conns[i].sq_head);
        }
        if (!owed && !unsent) continue;
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%zu from / %zu to rank %u", shown ? ", " : "",
                                 owed, unsent, q);
        if (used >= sizeof list) break;
        shown++;
    }
    return fail(t, "nothing moved for %.1f s; still waiting on messages (%s) — a peer is stuck or gone",
                t->timeout_ms / 1000.0, shown ? list : "none: the schedule expects a message no rank sends");
}

/* Watch `c` for writability exactly while it has sends queued (a level-triggered EPOLLOUT on an
 * idle socket would wake every wait). */
static int watch_out(nw_tcp *t, conn *c) {
    int want = c->sq_head != NULL && !c->closed;
    if (want == c->watching_out) return 0;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.u64 = (uint64_t)(c - t->conns)};
    if (epoll_ctl(t->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev)) return fail(t, "epoll_ctl failed: %s", strerror(errno));
    c->watching_out = want;
    return 0;
}

static int t_wait_any(void *ctx, uint64_t *cookie) {
    nw_tcp *t = ctx;
    while (t->done_head == t->ndone) {
        t->done_head = t->ndone = 0;
        if (t->open_conns == 0) return timed_out(t);
        for (size_t i = 0; i < t->nconn; i++)
            if (!t->conns[i].closed && watch_out(t, &t->conns[i])) return -1;
        int n = epoll_wait(t->epoll_fd, t->events, (int)t->nconn, t->timeout_ms);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(t, "epoll_wait failed: %s", strerror(errno));
        if (n == 0) return timed_out(t);
        for (int j = 0; j < n; j++) {
            conn *c = &t->conns[t->events[j].data.u64];
            uint32_t ev = t->events[j].events;
            if (c->closed) continue;
            if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && progress_recv(t, c)) return -1;
            if ((ev & (EPOLLOUT | EPOLLERR)) && !c->closed && progress_send(t, c)) return -1;
        }
    }
    *cookie = t->done[t->done_head++];
    return 0;
}

static const char *t_error(void *ctx) { return ((nw_tcp *)ctx)->err; }

void nw_tcp_transport(nw_tcp *tcp, nw_transport *out) {
    *out = (nw_transport){.ctx = tcp, .rank = tcp->rank, .ranks = tcp->ranks, .isend = t_isend, .irecv = t_irecv,
                          .wait_any = t_wait_any, .now_ns = now_ns, .error = t_error};
}

void nw_tcp_counts(const nw_tcp *tcp, uint64_t *connections, uint64_t *messages_sent) {
    *connections = tcp->nconn / LANES;
    *messages_sent = tcp->messages_sent;
}

static void free_list(msg *m, int owns_buf) {
    while (m) {
        msg *next = m->next;
        if (owns_buf) free(m->buf);
        free(m);
        m = next;
    }
}

void nw_tcp_close(nw_tcp *t) {
    if (!t) return;
    for (size_t i = 0; i < t->nconn; i++) {
        conn *c = &t->conns[i];
        if (c->fd >= 0) close(c->fd);
        free_list(c->sq_head, 0);
        free_list(c->posted_head, 0);
        free_list(c->unexp_head, 1);
        if (c->rcur && c->rcur->unexpected) free_list(c->rcur, 1);
        else if (c->rcur) free(c->rcur);
    }
    free(t->conns);
    free(t->conn_of);
    if (t->epoll_fd >= 0) close(t->epoll_fd);
    free(t->events);
    free(t->done);
    free(t);
}

/* ---- set-up ---------------------------------------------------------------------------- */

static int remaining_ms(uint64_t deadline) {
    uint64_t now = now_ns(NULL);
    return now >= deadline ? 0 : (int)((deadline - now) / 1000000 + 1);
}

/* Non-blocking, no Nagle, and writable only once every written byte went to the network
 * (TCP_NOTSENT_LOWAT 1): the socket buffer then holds no queue of this rank's data, so its
 * sends leave one after another as the schedule orders them instead of sharing the link. */
static int tune(int fd, uint32_t lane) {
    int one = 1, tos = CONTROL_TOS;
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
           setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &one, sizeof one) ||
           (lane == LANE_CONTROL && setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos));
}

/* Connect to `addr`, retrying while nobody listens yet, until the deadline. */
static int connect_until(const struct sockaddr_in *addr, uint64_t deadline) {
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fd < 0) return -1;
        int rc = connect(fd, (const struct sockaddr *)addr, sizeof *addr);
        if (rc && errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int soerr = ETIMEDOUT;
            socklen_t sl = sizeof soerr;
            if (poll(&p, 1, remaining_ms(deadline)) == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            rc = soerr ? -1 : 0;
            errno = soerr;
        }
        if (rc == 0) {
            int flags = fcntl(fd, F_GETFL);
            fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
            return fd;
        }
        int why = errno;
        close(fd);
        if (remaining_ms(deadline) == 0) {
            errno = why;
            return -1;
        }
        nanosleep(&(struct timespec){0, 20 * 1000000}, NULL);
    }
}

static int read_full(int fd, uint8_t *buf, size_t len, uint64_t deadline) {
    for (size_t got = 0; got < len;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, remaining_ms(deadline)) != 1) return -1;
        ssize_t n = recv(fd, buf + got, len - got, 0);
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    return 0;
}

int nw_tcp_open(nw_tcp **out, uint32_t rank, uint32_t ranks, int listen_fd, const struct sockaddr_in *addrs,
                const uint8_t *need, uint64_t token, double timeout_s, char *err, size_t errlen) {
    *out = NULL;
    nw_tcp *t = calloc(1, sizeof *t);
    if (!t) return snprintf(err, errlen, "out of memory"), -1;
    t->epoll_fd = -1;
    t->rank = rank;
    t->ranks = ranks;
    t->timeout_ms = (int)(timeout_s * 1000);
    t->conn_of = malloc(sizeof *t->conn_of * ranks * LANES);
    size_t want = 0;
    for (uint32_t q = 0; q < ranks; q++) want += (need[q] && q != rank) * LANES;
    t->conns = calloc(want + 1, sizeof *t->conns);
    t->events = calloc(want + 1, sizeof *t->events);
    int rc = (!t->conn_of || !t->conns || !t->events) ? fail(t, "out of memory") : 0;
    for (uint32_t i = 0; i < ranks * LANES && !rc; i++) t->conn_of[i] = -1;
    uint64_t deadline = now_ns(NULL) + (uint64_t)(timeout_s * 1e9);
    char where[INET_ADDRSTRLEN + 8];
    inet_ntop(AF_INET, &addrs[rank].sin_addr, where, INET_ADDRSTRLEN);
    if (!rc && listen_fd < 0) {
        int one = 1;
        listen_fd = socket(AF_INET, SOCK_STREAM, 0);
        if (listen_fd < 0 || setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
            bind(listen_fd, (const struct sockaddr *)&addrs[rank], sizeof addrs[rank]) || listen(listen_fd, 4096))
            rc = fail(t, "cannot listen on %s:%u: %s", where, ntohs(addrs[rank].sin_port), strerror(errno));
    }
    /* The lower rank of each pair connects, once per lane; hello = {magic, lane << 31 | rank,
     * schedule checksum}. */
    for (uint32_t k = (rank + 1) * LANES; k < ranks * LANES && !rc; k++) {
        uint32_t q = k / LANES, lane = k % LANES;
        if (!need[q]) continue;
        int fd = connect_until(&addrs[q], deadline);
        char peer[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &addrs[q].sin_addr, peer, sizeof peer);
        if (fd < 0) {
            rc = fail(t, "cannot connect to rank %u at %s:%u within %.0f s: %s", q, peer, ntohs(addrs[q].sin_port),
                      timeout_s, strerror(errno));
            break;
        }
        uint8_t hello[16];
        put_u32(hello, HELLO_MAGIC);
        put_u32(hello + 4, lane << 31 | rank);
        put_u64(hello + 8, token);
        conn *c = &t->conns[t->nconn];
        *c = (conn){.fd = fd, .peer = q, .lane = lane};
        t->conn_of[lane * ranks + q] = (int32_t)t->nconn++;
        if (send(fd, hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello)
            rc = fail(t, "rank %u hung up during the hello", q);
    }
    size_t lower = 0;
    for (uint32_t q = 0; q < rank; q++) lower += (need[q] != 0) * LANES;
    for (size_t accepted = 0; accepted < lower && !rc;) {
        struct pollfd p = {.fd = listen_fd, .events = POLLIN};
        if (poll(&p, 1, remaining_ms(deadline)) != 1) {
            char missing[200] = "";
            size_t used = 0;
            for (uint32_t q = 0; q < rank && used < sizeof missing - 12; q++)
                if (need[q] && (t->conn_of[q] < 0 || t->conn_of[ranks + q] < 0)) used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%u", used ? ", " : "", q);
            rc = fail(t, "rank(s) %s did not connect within %.0f s (not started, or dead)", missing, timeout_s);
            break;
        }
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) continue;
        uint8_t hello[16];
        if (read_full(fd, hello, sizeof hello, deadline)) {
            close(fd);
            continue; /* a stray or dead connection; the deadline still bounds us */
        }
        uint32_t q = get_u32(hello + 4) & ~(1u << 31), lane = get_u32(hello + 4) >> 31;
        if (get_u32(hello) != HELLO_MAGIC || q >= rank || !need[q] || t->conn_of[lane * ranks + q] >= 0) {
            close(fd);
            continue;
        }
        if (get_u64(hello + 8) != token) {
            close(fd);
            rc = fail(t, "rank %u runs a different schedule (checksum %016llx, mine %016llx)", q,
                      (unsigned long long)get_u64(hello + 8), (unsigned long long)token);
            break;
        }
        t->conns[t->nconn] = (conn){.fd = fd, .peer = q, .lane = lane};
        t->conn_of[lane * ranks + q] = (int32_t)t->nconn++;
        accepted++;
    }
    if (listen_fd >= 0) close(listen_fd);
    for (size_t i = 0; i < t->nconn && !rc; i++)
        if (tune(t->conns[i].fd, t->conns[i].lane)) rc = fail(t, "cannot configure the socket to rank %u", t->conns[i].peer);
    if (!rc && (t->epoll_fd = epoll_create1(EPOLL_CLOEXEC)) < 0) rc = fail(t, "epoll_create1 failed: %s", strerror(errno));
    for (size_t i = 0; i < t->nconn && !rc; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = i};
        if (epoll_ctl(t->epoll_fd, EPOLL_CTL_ADD, t->conns[i].fd, &ev)) rc = fail(t, "epoll_ctl failed: %s", strerror(errno));
    }
    t->open_conns = t->nconn;
    if (rc) {
        snprintf(err, errlen, "%s", t->err);
        nw_tcp_close(t);
        return -1;
    }
    *out = t;
    return 0;
}
