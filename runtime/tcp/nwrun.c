/* nw-tcp-run — one host's process of paper 004's executor: runs its share of a task-DAG
 * schedule over TCP and writes a per-task trace. `netweave run` starts one per rank.
 *
 *   nw-tcp-run --schedule s.nws --rank 3 --peers peers.txt [--listen-fd 3] [--seed 0]
 *              [--fragment 65536] [--timeout 30] [--trace trace-3.json]
 *              [--start-gate [--warmup W] [--reps N]]
 *
 * peers.txt has one line per rank, "IPv4 PORT". With --start-gate, the process prints "ready"
 * on stdout once connected and prepared (buffers allocated, payload written) and starts only
 * when a byte arrives on stdin (the launcher's common start line, so a run's clock starts when
 * every process is ready). --warmup W --reps N run the schedule W + N times over the same
 * connections, each call behind its own start line (the launcher's barrier), as a benchmark
 * times an MPI collective; the trace's "calls" holds [start_ns, end_ns] of each of the N timed
 * calls and its events are the last call's. Exit status: 0 done, 1 the run failed (a peer
 * died or stalled, a byte was wrong; the reason is the last line on stderr), 2 bad arguments or
 * schedule. Fault injection for tests: --crash-before-send K (SIGKILL itself just before its K-th
 * send, counting from 0) and --hang-before-send K (fall silent there).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "../core/exec.h"
#include "../core/nws.h"
#include "tcp.h"

static uint64_t crash_at = UINT64_MAX, hang_at = UINT64_MAX, sends_started;

static void fault(void *arg, uint32_t task) {
    (void)arg;
    (void)task;
    uint64_t k = sends_started++;
    if (k == crash_at) raise(SIGKILL);
    if (k == hang_at)
        for (;;) pause(); /* a silent peer: its partners must time out; the launcher kills it */
}

/* The launcher's start line: say "ready", wait for its byte on stdin. */
static int gate_failed;
static int wait_for_start(void *arg) {
    (void)arg;
    char go;
    printf("ready\n");
    fflush(stdout);
    gate_failed = read(STDIN_FILENO, &go, 1) != 1;
    return gate_failed;
}

static int usage(const char *why) {
    fprintf(stderr, "nw-tcp-run: %s\n(usage: nw-tcp-run --schedule FILE.nws --rank R --peers FILE [--listen-fd FD] "
                    "[--seed S] [--fragment BYTES] [--timeout SECONDS] [--trace FILE] [--start-gate [--warmup W] [--reps N]])\n", why);
    return 2;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') return -1;
    *out = v;
    return 0;
}

static int read_peers(const char *path, uint32_t ranks, struct sockaddr_in *addrs, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(err, errlen, "cannot open peers file %s", path), -1;
    char line[256];
    uint32_t r = 0;
    while (r < ranks && fgets(line, sizeof line, f)) {
        char ip[64];
        unsigned port;
        if (sscanf(line, "%63s %u", ip, &port) != 2 || port > 65535 ||
            inet_pton(AF_INET, ip, &addrs[r].sin_addr) != 1) {
            fclose(f);
            return snprintf(err, errlen, "%s line %u: want \"IPv4 PORT\", got %.60s", path, r + 1, line), -1;
        }
        addrs[r].sin_family = AF_INET;
        addrs[r].sin_port = htons((uint16_t)port);
        r++;
    }
    fclose(f);
    if (r < ranks) return snprintf(err, errlen, "%s lists %u addresses for %u ranks", path, r, ranks), -1;
    return 0;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void write_trace(const char *path, uint32_t rank, const nws_dag *dag, const nw_exec_result *res,
                        const uint64_t *calls, uint64_t ncalls, uint64_t connections, uint64_t messages,
                        const char *error) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "{\"rank\":%u,\"schedule\":", rank);
    json_string(f, dag->name);
    fprintf(f, ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"bytes_sent\":%" PRIu64 ",\"bytes_received\":%" PRIu64
               ",\"bytes_verified\":%" PRIu64 ",\"syncs_sent\":%" PRIu64 ",\"syncs_received\":%" PRIu64
               ",\"fragments_sent\":%" PRIu64 ",\"connections\":%" PRIu64 ",\"messages_sent\":%" PRIu64 ",\"error\":",
            res->start_ns, res->end_ns, res->bytes_sent, res->bytes_received, res->bytes_verified, res->syncs_sent,
            res->syncs_received, res->fragments_sent, connections, messages);
    if (error) json_string(f, error);
    else fputs("null", f);
    fputs(",\"calls\":[", f);
    for (uint64_t i = 0; i < ncalls; i++)
        fprintf(f, "%s[%" PRIu64 ",%" PRIu64 "]", i ? "," : "", calls[2 * i], calls[2 * i + 1]);
    fputs("],\"events\":[", f);
    for (size_t i = 0; i < res->nevents; i++) {
        const nw_trace_event *e = &res->events[i];
        fprintf(f, "%s[%u,\"%s\",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", i ? "," : "", e->task,
                e->is_receive ? "recv" : "send", e->start_ns, e->first_ns, e->last_ns);
    }
    fputs("]}\n", f);
    if (fclose(f) == 0) rename(tmp, path);
}

int main(int argc, char **argv) {
    const char *schedule = NULL, *peers = NULL, *trace = NULL;
    uint64_t rank = UINT64_MAX, listen_fd = UINT64_MAX, value = 0;
    double timeout = 30.0;
    nw_exec_options opt = nw_exec_defaults();
    static const struct option longopts[] = {
        {"schedule", 1, 0, 's'}, {"rank", 1, 0, 'r'}, {"peers", 1, 0, 'p'}, {"listen-fd", 1, 0, 'l'},
        {"seed", 1, 0, 'S'}, {"fragment", 1, 0, 'f'}, {"timeout", 1, 0, 't'}, {"trace", 1, 0, 'o'},
        {"crash-before-send", 1, 0, 'C'}, {"hang-before-send", 1, 0, 'H'}, {"start-gate", 0, 0, 'G'},
        {"warmup", 1, 0, 'W'}, {"reps", 1, 0, 'N'}, {0, 0, 0, 0}};
    uint64_t warmup = 0, reps = 1;
    int start_gate = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'G') {
            start_gate = 1;
            continue;
        }
        if (c != 's' && c != 'p' && c != 'o' && c != 't' && (c == '?' || parse_u64(optarg, &value)))
            return usage(c == '?' ? "unknown option" : "option values must be non-negative integers");
        switch (c) {
        case 's': schedule = optarg; break;
        case 'p': peers = optarg; break;
        case 'o': trace = optarg; break;
        case 'r': rank = value; break;
        case 'l': listen_fd = value; break;
        case 'S': opt.seed = value; break;
        case 'f': opt.fragment_bytes = value; break;
        case 'C': crash_at = value; break;
        case 'H': hang_at = value; break;
        case 'W': warmup = value; break;
        case 'N': reps = value; break;
        case 't': {
            char *end;
            timeout = strtod(optarg, &end);
            if (*end || !(timeout > 0 && timeout < 1e6)) return usage("--timeout must be a positive number of seconds");
            break;
        }
        }
    }
    if (!schedule || !peers || rank == UINT64_MAX) return usage("--schedule, --rank and --peers are required");
    if (reps < 1 || reps > 100000 || warmup > 100000) return usage("--reps must be 1 to 100000 and --warmup at most 100000");
    /* Calls after the first need the launcher's barrier: without it a fast rank's next call
     * would overlap a slow rank's current one. */
    if (reps + warmup > 1 && !start_gate) return usage("--warmup and --reps need --start-gate (the barrier between calls)");
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the launcher */
    signal(SIGPIPE, SIG_IGN);
    opt.before_send = fault;

    char err[1024];
    nws_dag dag;
    if (nws_dag_read(schedule, &dag, err, sizeof err)) {
        fprintf(stderr, "nw-tcp-run rank %" PRIu64 ": %s\n", rank, err);
        return 2;
    }
    if (rank >= dag.ranks) {
        fprintf(stderr, "nw-tcp-run: rank %" PRIu64 " is outside the schedule's %u ranks\n", rank, dag.ranks);
        nws_dag_free(&dag);
        return 2;
    }
    struct sockaddr_in *addrs = calloc(dag.ranks, sizeof *addrs);
    uint8_t *need = calloc(dag.ranks, 1);
    if (!addrs || !need || read_peers(peers, dag.ranks, addrs, err, sizeof err)) {
        fprintf(stderr, "nw-tcp-run rank %" PRIu64 ": %s\n", rank, addrs && need ? err : "out of memory");
        return 2;
    }
    nw_exec_peers(&dag, (uint32_t)rank, need);

    nw_tcp *tcp = NULL;
    nw_exec_result res = {0};
    uint64_t connections = 0, messages = 0, timed = 0;
    uint64_t *calls = calloc(2 * reps, sizeof *calls);
    int rc = calls ? nw_tcp_open(&tcp, (uint32_t)rank, dag.ranks, listen_fd == UINT64_MAX ? -1 : (int)listen_fd, addrs,
                                 need, dag.checksum, timeout, err, sizeof err)
                   : (snprintf(err, sizeof err, "out of memory"), -1);
    if (start_gate) opt.ready = wait_for_start;
    for (uint64_t call = 0; rc == 0 && call < warmup + reps; call++) {
        nw_transport tp;
        nw_tcp_transport(tcp, &tp);
        nw_exec_free(&res);
        opt.handshake = call + 1 == warmup + reps; /* the end-of-run swap, once */
        rc = nw_exec_dag(&dag, &tp, &opt, &res, err, sizeof err);
        if (gate_failed) snprintf(err, sizeof err, "the launcher stopped the run before call %" PRIu64 " started", call);
        if (rc == 0 && call >= warmup) {
            calls[2 * timed] = res.start_ns;
            calls[2 * timed++ + 1] = res.end_ns;
        }
        nw_tcp_counts(tcp, &connections, &messages);
    }
    if (trace) write_trace(trace, (uint32_t)rank, &dag, &res, calls, timed, connections, messages, rc ? err : NULL);
    free(calls);
    if (rc) fprintf(stderr, "nw-tcp-run rank %" PRIu64 ": %s\n", rank, err);
    nw_tcp_close(tcp);
    nw_exec_free(&res);
    nws_dag_free(&dag);
    free(addrs);
    free(need);
    return rc ? 1 : 0;
}
