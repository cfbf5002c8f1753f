/* nwmpi.c — netweave's schedules inside MPI_Alltoall, MPI_Allgather and MPI_Gather (PMPI).
 *
 * Load it with LD_PRELOAD (or link it before the MPI library) and name schedules with
 * NETWEAVE_SCHEDULE; every other MPI call goes to the MPI library untouched. See
 * docs/mpi-runtime.md for the environment, the selection rules and the limits:
 *
 *   NETWEAVE_SCHEDULE=a2a.nws            one schedule file (used where its collective and size fit)
 *   NETWEAVE_SCHEDULE=dir/               dir/<collective>-<ranks>.nws, e.g. dir/alltoall-16.nws
 *   NETWEAVE_EXECUTOR=sync|async|local-sync|auto   overrides the schedule's executor
 *   NETWEAVE_CONCURRENT_SENDS=K          sends in flight for the asynchronous executor
 *   NETWEAVE_VERBOSE=1                   one stderr line per communicator and collective saying
 *                                        which schedule runs, or why the native one does
 *
 * Phases schedules run on the executors of core/collective.c; paper 004's task DAGs (all-to-all
 * and gather) on the executor core of core/exec.c, with tasks pointed into the user's buffers.
 *
 * A call uses a schedule when the file is for that collective (and root) on a communicator of
 * its size, the communicator is an intra-communicator and the datatypes are contiguous on the
 * calling rank; otherwise the native collective runs. A corrupt file is one error line and an
 * abort, at MPI_Init (a single file) or at first use (a directory).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/collective.h"
#include "../core/exec.h"
#include "../core/nws.h"
#include "transport_mpi.h"

int netweave_mpi_use(const char *path);

enum { COLL_ALLTOALL, COLL_ALLGATHER, COLL_GATHER, NCOLL };
static const char *const coll_name[NCOLL] = {"alltoall", "allgather", "gather"};
static const char *const call_name[NCOLL] = {"MPI_Alltoall", "MPI_Allgather", "MPI_Gather"};
static const uint32_t coll_code[NCOLL] = {NWS_ALLTOALL, NWS_ALLGATHER, NWS_GATHER};

static struct {
    int on;           /* a schedule path is set */
    int is_dir;
    char path[4096];
    int executor;     /* -1: the schedule's */
    uint32_t concurrent;
    int verbose;
    unsigned generation; /* bumped by netweave_mpi_use: cached choices are stale */
    int keyval;
} g = {.executor = -1, .keyval = MPI_KEYVAL_INVALID};

typedef struct {
    unsigned generation;
    int usable;        /* 1: run the plan or the DAG; 0: native */
    int is_dag;
    int root_warned;   /* the "wrong root" line was printed */
    int type_warned;   /* the "datatype" line was printed */
    nws_phases sched;  /* phases: this rank's share and its plan */
    nw_plan *plan;
    nws_dag dag;       /* task DAG as generated, and scaled to the last call's block size */
    nws_task *scaled;
    size_t scaled_for;
} choice;

typedef struct {
    MPI_Comm comm; /* private duplicate for netweave's messages */
    int rank, size;
    choice c[NCOLL];
    nw_mpi_transport tp;
} comm_state;

static void say(MPI_Comm comm, const char *fmt, const char *a, const char *b) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    if (rank != 0) return;
    fprintf(stderr, "netweave: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

static void die(MPI_Comm comm, const char *what, const char *why) {
    fprintf(stderr, "netweave: %s: %s\n", what, why);
    fflush(stderr);
    /* MPICH's launcher stops forwarding output once an abort reaches it: give it a moment to
       pass this line on first (measured lost under load without the pause). */
    nanosleep(&(struct timespec){0, 200 * 1000000}, NULL);
    PMPI_Abort(comm, 2);
}

static void drop_choice(choice *c) {
    nw_plan_free(c->plan);
    nws_phases_free(&c->sched);
    nws_dag_free(&c->dag);
    free(c->scaled);
    memset(c, 0, sizeof *c);
}

static int delete_state(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)extra;
    comm_state *st = value;
    for (int i = 0; i < NCOLL; i++) drop_choice(&st->c[i]);
    nw_mpi_transport_free(&st->tp);
    PMPI_Comm_free(&st->comm);
    free(st);
    return MPI_SUCCESS;
}

/* Read the settings; check a single schedule file now, so a corrupt one fails at MPI_Init. */
static void setup(void) {
    const char *path = getenv("NETWEAVE_SCHEDULE");
    const char *ex = getenv("NETWEAVE_EXECUTOR"), *k = getenv("NETWEAVE_CONCURRENT_SENDS");
    const char *v = getenv("NETWEAVE_VERBOSE");
    g.verbose = v && *v && strcmp(v, "0");
    if (ex && *ex) {
        if (!strcmp(ex, "auto")) g.executor = NWS_EXEC_AUTO;
        else if (!strcmp(ex, "sync")) g.executor = NWS_EXEC_SYNC;
        else if (!strcmp(ex, "async")) g.executor = NWS_EXEC_ASYNC;
        else if (!strcmp(ex, "local-sync")) g.executor = NWS_EXEC_LOCAL_SYNC;
        else die(MPI_COMM_WORLD, "NETWEAVE_EXECUTOR", "must be auto, sync, async or local-sync");
    }
    if (k && *k) {
        char *end;
        long n = strtol(k, &end, 10);
        if (*end || n < 1 || n > 1 << 20) die(MPI_COMM_WORLD, "NETWEAVE_CONCURRENT_SENDS", "must be a positive integer");
        g.concurrent = (uint32_t)n;
    }
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &g.keyval, NULL);
    if (path && *path) netweave_mpi_use(path);
}

/* Switch every later call to the schedules at `path` (a file or a directory), or to the native
 * collectives with NULL. Collective over MPI_COMM_WORLD in spirit: call it on every rank. A bad
 * single file aborts with its reason. Returns 0. (nwbench uses it to time several schedules in
 * one run.) */
int netweave_mpi_use(const char *path) {
    g.generation++;
    g.on = path && *path;
    if (!g.on) return 0;
    snprintf(g.path, sizeof g.path, "%s", path);
    struct stat sb;
    if (stat(path, &sb)) die(MPI_COMM_WORLD, path, "no such schedule file or directory (NETWEAVE_SCHEDULE)");
    g.is_dir = S_ISDIR(sb.st_mode);
    if (!g.is_dir) {
        char err[512];
        size_t len = 0;
        unsigned char *data = nws_load(path, &len, err, sizeof err);
        int form = data ? nws_form(data, len, err, sizeof err) : -1;
        nws_phases s;
        nws_dag d;
        if (form < 0 || (form == 0 && nws_phases_parse(data, len, 0, &s, err, sizeof err)) ||
            (form == 1 && nws_dag_parse(data, len, &d, err, sizeof err)))
            die(MPI_COMM_WORLD, path, err);
        if (form == 0) nws_phases_free(&s);
        else nws_dag_free(&d);
        free(data);
    }
    return 0;
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) setup();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) setup();
    return rc;
}

int MPI_Finalize(void) {
    if (g.keyval != MPI_KEYVAL_INVALID) {
        void *value;
        int found = 0;
        PMPI_Comm_get_attr(MPI_COMM_WORLD, g.keyval, &value, &found);
        if (found) PMPI_Comm_delete_attr(MPI_COMM_WORLD, g.keyval); /* world's attributes may outlive Finalize */
        PMPI_Comm_free_keyval(&g.keyval);
    }
    return PMPI_Finalize();
}

static comm_state *state_of(MPI_Comm comm) {
    void *value;
    int found = 0;
    PMPI_Comm_get_attr(comm, g.keyval, &value, &found);
    if (found) return value;
    comm_state *st = calloc(1, sizeof *st);
    if (!st) die(comm, "netweave", "out of memory");
    PMPI_Comm_dup(comm, &st->comm); /* collective: every rank is in this call */
    PMPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(comm, &st->rank);
    PMPI_Comm_size(comm, &st->size);
    PMPI_Comm_set_attr(comm, g.keyval, st);
    return st;
}

static uint64_t fnv(const char *text) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *text; text++) h = (h ^ (unsigned char)*text) * 0x100000001b3ull;
    return h;
}

/* Warn (once per communicator and schedule) when the schedule's placement groups ranks on hosts
 * differently from the nodes they run on: it was computed for another allocation. Skipped when
 * the whole job runs on one node (a test or an emulation on one machine). Collective. */
static void check_placement(comm_state *st, MPI_Comm comm, const uint32_t *placement, const char *name) {
    char host[MPI_MAX_PROCESSOR_NAME + 1] = "";
    int len = 0;
    PMPI_Get_processor_name(host, &len);
    uint64_t mine = fnv(host), *all = malloc(sizeof *all * (size_t)st->size);
    if (!all) return;
    PMPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, st->comm);
    int one_node = 1;
    for (int r = 1; r < st->size; r++) one_node &= all[r] == all[0];
    for (int a = 0; a < st->size && !one_node; a++)
        for (int b = a + 1; b < st->size; b++) {
            int together_here = all[a] == all[b], together_there = placement[a] == placement[b];
            if (together_here == together_there) continue;
            char text[300];
            snprintf(text, sizeof text, "ranks %d and %d %s in the schedule but %s (it was made for another allocation)",
                     a, b, together_there ? "share a host" : "are on different hosts",
                     together_here ? "run on one node" : "run on different nodes");
            say(comm, "warning: '%s': %s", name, text);
            a = st->size;
            break;
        }
    free(all);
}

/* A task DAG (paper 004) for `which`: usable when it adds up to that collective on this size
 * and its tags fit the MPI library's; else `why` says why not. */
static void dag_choice(comm_state *st, MPI_Comm comm, int which, choice *c, const char *path, const void *data,
                       size_t len, char *why, size_t whylen) {
    char err[512];
    if (nws_dag_parse(data, len, &c->dag, err, sizeof err)) die(comm, path, err);
    int *tag_ub = NULL, found = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
    if (c->dag.collective != coll_code[which] || !c->dag.block_bytes)
        snprintf(why, whylen, "%s is a task DAG that is not a%s %s", path, which == COLL_GATHER ? "" : "n", coll_name[which]);
    else if (c->dag.ranks != (uint32_t)st->size)
        snprintf(why, whylen, "%s is for %u ranks, the communicator has %d", path, c->dag.ranks, st->size);
    else if (found && (uint64_t)c->dag.ntasks * 2 + 2 > (uint64_t)*tag_ub)
        snprintf(why, whylen, "%s has %u tasks, more than this MPI's tags can name", path, c->dag.ntasks);
    else if (!(c->scaled = malloc(sizeof *c->scaled * ((size_t)c->dag.ntasks + 1))))
        snprintf(why, whylen, "out of memory for %u tasks", c->dag.ntasks);
    else {
        c->usable = c->is_dag = 1;
        if (g.verbose) say(comm, "%s runs '%s'", call_name[which], c->dag.name);
        check_placement(st, comm, c->dag.placement, c->dag.name);
    }
}

/* The schedule for collective `which` on this communicator, loaded once per generation; NULL
 * (native) with a verbose line saying why. Depends only on the file and the communicator's
 * size, so every rank decides alike. */
static choice *schedule_for(comm_state *st, MPI_Comm comm, int which, int root) {
    choice *c = &st->c[which];
    if (c->generation != g.generation) {
        drop_choice(c);
        c->generation = g.generation;
        char path[4200], err[512], why[4400] = "";
        if (g.is_dir) snprintf(path, sizeof path, "%s/%s-%d.nws", g.path, coll_name[which], st->size);
        else snprintf(path, sizeof path, "%s", g.path);
        struct stat sb;
        unsigned char *data = NULL;
        size_t len = 0;
        if (g.is_dir && stat(path, &sb)) {
            snprintf(why, sizeof why, "no %s", path);
        } else if (!(data = nws_load(path, &len, err, sizeof err)) || nws_form(data, len, err, sizeof err) < 0) {
            die(comm, path, err);
        } else if (nws_form(data, len, err, sizeof err) == 1) {
            dag_choice(st, comm, which, c, path, data, len, why, sizeof why);
        } else if (nws_phases_parse(data, len, 0, &c->sched, err, sizeof err)) {
            die(comm, path, err);
        } else if (c->sched.collective != coll_code[which]) {
            snprintf(why, sizeof why, "%s is not a%s %s schedule", path, which == COLL_GATHER ? "" : "n", coll_name[which]);
        } else if (c->sched.ranks != (uint32_t)st->size) {
            snprintf(why, sizeof why, "%s is for %u ranks, the communicator has %d", path, c->sched.ranks, st->size);
        } else {
            nws_phases_free(&c->sched);
            if (nws_phases_parse(data, len, (uint32_t)st->rank, &c->sched, err, sizeof err)) die(comm, path, err);
            if (!(c->plan = nw_plan_build(&c->sched, err, sizeof err))) die(comm, path, err);
            c->usable = 1;
            if (g.verbose) say(comm, "%s runs '%s'", call_name[which], c->sched.name);
            check_placement(st, comm, c->sched.placement, c->sched.name);
        }
        free(data);
        if (!c->usable && g.verbose) say(comm, "%s falls back to the native collective: %s", call_name[which], why);
    }
    if (!c->usable) return NULL;
    uint32_t schedule_root = c->is_dag ? c->dag.root : c->sched.root;
    if (which == COLL_GATHER && schedule_root != (uint32_t)root) {
        if (g.verbose && !c->root_warned) {
            char r[64];
            snprintf(r, sizeof r, "the schedule's root is %u, the call's %d", schedule_root, root);
            say(comm, "%s falls back to the native collective: %s", call_name[which], r);
            c->root_warned = 1;
        }
        return NULL;
    }
    return c;
}

/* Bytes of `count` elements of `type` when they lie contiguously from the buffer start, else -1. */
static long long contiguous_bytes(int count, MPI_Datatype type) {
    int size;
    MPI_Aint lb, extent, true_lb, true_extent;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS)
        return -1;
    if (count < 0 || lb != 0 || true_lb != 0 || extent != size || true_extent != size) return -1;
    return (long long)count * size;
}

/* Whether `comm` is an intra-communicator; when verbose, an inter-communicator is said once. */
static int intra(MPI_Comm comm, int which) {
    int inter = 1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0; /* the native call reports it */
    static int said[NCOLL];
    if (inter && g.verbose && !said[which]++)
        fprintf(stderr, "netweave: %s falls back to the native collective: an inter-communicator\n", call_name[which]);
    return !inter;
}

/* The schedule a call of `which` on `comm` runs, or NULL for the native collective. */
static choice *chosen(MPI_Comm comm, int which, int root, comm_state **st) {
    if (!g.on || !intra(comm, which)) return NULL;
    *st = state_of(comm);
    return schedule_for(*st, comm, which, root);
}

/* Whether the schedule can address the call's buffers (`fits`); if not, the native collective
 * runs, said once per communicator when verbose. */
static int buffers_fit(MPI_Comm comm, choice *c, int which, int fits) {
    if (!fits && g.verbose && !c->type_warned) {
        c->type_warned = 1;
        say(comm, "%s falls back to the native collective: %s", call_name[which],
            "a datatype is not contiguous, or send and receive sizes differ (on this rank)");
    }
    return fits;
}

/* Where tasks' bytes live during one DAG call. */
typedef struct {
    const choice *c;
    uint32_t me, n, alltoall;
    const uint8_t *send;
    uint8_t *recv;
    size_t B;
} dag_buffers;

/* Byte `offset` of a block as generated, at the call's block size (pieces tile every block). */
static size_t scale(const choice *c, uint64_t offset, size_t B) {
    return (size_t)((unsigned __int128)offset * B / c->dag.block_bytes);
}

static const uint8_t *dag_send_data(void *arg, uint32_t t) {
    const dag_buffers *d = arg;
    const nws_task *task = &d->c->dag.tasks[t];
    size_t at = scale(d->c, task->offset, d->B);
    return d->send + (d->alltoall ? (size_t)(task->block % d->n) * d->B : 0) + at;
}

static uint8_t *dag_recv_data(void *arg, uint32_t t) {
    const dag_buffers *d = arg;
    const nws_task *task = &d->c->dag.tasks[t];
    uint32_t origin = d->alltoall ? task->block / d->n : task->block;
    int mine = d->alltoall ? task->block % d->n == d->me : d->me == d->c->dag.root;
    return mine ? d->recv + (size_t)origin * d->B + scale(d->c, task->offset, d->B) : NULL; /* else passing through */
}

static int run_dag(comm_state *st, choice *c, int which, const void *sendbuf, void *recvbuf, size_t B) {
    if (c->scaled_for != B) { /* the DAG's bytes at this block size */
        for (uint32_t t = 0; t < c->dag.ntasks; t++) {
            c->scaled[t] = c->dag.tasks[t];
            c->scaled[t].bytes = scale(c, c->dag.tasks[t].offset + c->dag.tasks[t].bytes, B) - scale(c, c->dag.tasks[t].offset, B);
        }
        c->scaled_for = B;
    }
    nws_dag dag = c->dag;
    dag.tasks = c->scaled;
    dag_buffers d = {c, (uint32_t)st->rank, (uint32_t)st->size, which == COLL_ALLTOALL, sendbuf, recvbuf, B};
    /* The rank's own block for itself is a local copy (a DAG moves only what crosses ranks). */
    uint8_t *own = which == COLL_ALLTOALL ? (uint8_t *)recvbuf + (size_t)st->rank * B
                   : st->rank == (int)c->dag.root ? (uint8_t *)recvbuf + (size_t)st->rank * B : NULL;
    const uint8_t *from = (const uint8_t *)sendbuf + (which == COLL_ALLTOALL ? (size_t)st->rank * B : 0);
    if (own && own != from) memmove(own, from, B);
    nw_exec_data data = {.arg = &d, .send_data = dag_send_data, .recv_data = dag_recv_data};
    nw_exec_options opt = nw_exec_defaults();
    opt.data = &data;
    opt.handshake = 0; /* a dead rank already makes the MPI library fail every peer */
    nw_exec_result res;
    char err[512];
    nw_transport tp = nw_mpi_transport_start(&st->tp, st->comm, (uint32_t)st->rank, (uint32_t)st->size);
    int rc = nw_exec_dag(&dag, &tp, &opt, &res, err, sizeof err);
    nw_exec_free(&res);
    if (rc) {
        nw_mpi_transport_cancel(&st->tp);
        die(st->comm, call_name[which], err);
    }
    return MPI_SUCCESS;
}

/* Run the chosen plan; a failure aborts with its reason (the peers fail fast with it). */
static int run(comm_state *st, choice *c, int which, const void *sendbuf, void *recvbuf, size_t block_bytes) {
    if (c->is_dag) return run_dag(st, c, which, sendbuf, recvbuf, block_bytes);
    char err[512];
    nw_transport tp = nw_mpi_transport_start(&st->tp, st->comm, (uint32_t)st->rank, (uint32_t)st->size);
    nw_buffers b = {.sendbuf = sendbuf, .recvbuf = recvbuf, .block_bytes = block_bytes};
    uint32_t executor = g.executor >= 0 ? (uint32_t)g.executor : c->sched.executor;
    if (nw_plan_run(c->plan, &tp, &b, executor, g.concurrent, err, sizeof err)) {
        nw_mpi_transport_cancel(&st->tp);
        die(st->comm, call_name[which], err);
    }
    return MPI_SUCCESS;
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
    comm_state *st;
    choice *c = chosen(comm, COLL_ALLTOALL, 0, &st);
    if (!c) goto native;
    long long rb = contiguous_bytes(recvcount, recvtype);
    long long sb = sendbuf == MPI_IN_PLACE ? rb : contiguous_bytes(sendcount, sendtype);
    if (!buffers_fit(comm, c, COLL_ALLTOALL, rb >= 0 && sb == rb)) goto native;
    void *copy = NULL;
    if (sendbuf == MPI_IN_PLACE && rb) { /* the schedule reads every block before it is overwritten: send from a copy */
        if (!(copy = malloc((size_t)rb * (size_t)st->size))) goto native;
        memcpy(copy, recvbuf, (size_t)rb * (size_t)st->size);
        sendbuf = copy;
    }
    int rc = rb ? run(st, c, COLL_ALLTOALL, sendbuf, recvbuf, (size_t)rb) : MPI_SUCCESS;
    free(copy);
    return rc;
native:
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
    comm_state *st;
    choice *c = chosen(comm, COLL_ALLGATHER, 0, &st);
    if (!c) goto native;
    long long rb = contiguous_bytes(recvcount, recvtype);
    long long sb = sendbuf == MPI_IN_PLACE ? rb : contiguous_bytes(sendcount, sendtype);
    if (!buffers_fit(comm, c, COLL_ALLGATHER, rb >= 0 && sb == rb)) goto native;
    if (sendbuf == MPI_IN_PLACE) sendbuf = (char *)recvbuf + (size_t)rb * (size_t)st->rank;
    return rb ? run(st, c, COLL_ALLGATHER, sendbuf, recvbuf, (size_t)rb) : MPI_SUCCESS;
native:
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
    comm_state *st;
    choice *c = chosen(comm, COLL_GATHER, root, &st);
    if (!c) goto native;
    int at_root = st->rank == root;
    long long rb = at_root ? contiguous_bytes(recvcount, recvtype) : 0;
    long long sb = sendbuf == MPI_IN_PLACE ? rb : contiguous_bytes(sendcount, sendtype);
    if (!buffers_fit(comm, c, COLL_GATHER, rb >= 0 && sb >= 0 && (!at_root || sb == rb))) goto native;
    if (sendbuf == MPI_IN_PLACE) sendbuf = (char *)recvbuf + (size_t)rb * (size_t)root;
    return sb ? run(st, c, COLL_GATHER, sendbuf, recvbuf, (size_t)sb) : MPI_SUCCESS;
native:
    return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}
