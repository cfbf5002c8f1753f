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
 * One decision per communicator: whether a collective runs a schedule or the native algorithm
 * is agreed by every rank of the communicator once (an allreduce of the local verdicts at the
 * first call, cached in a communicator attribute), and depends afterwards only on what MPI
 * requires to be alike on every rank (the root). Everything that may legally differ between
 * ranks — contiguous or strided datatypes, MPI_IN_PLACE at a gather's root — is handled on the
 * rank itself (a strided buffer is packed and unpacked around the schedule), so no legal mix of
 * arguments can make some ranks run the schedule and others the native collective.
 *
 * Errors (a corrupt file, a failed transfer) go through the communicator's error handler: with
 * MPI_ERRORS_ARE_FATAL the job aborts, with MPI_ERRORS_RETURN the call returns the code, whose
 * MPI_Error_string is netweave's one-line reason.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <mpi.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/collective.h"
#include "../core/exec.h"
#include "../core/nws.h"
#include "transport_mpi.h"

int netweave_mpi_use(const char *path);
int netweave_mpi_ran(const char *collective, long *scheduled, long *native, const char **why);

enum { COLL_ALLTOALL, COLL_ALLGATHER, COLL_GATHER, NCOLL };
static const char *const coll_name[NCOLL] = {"alltoall", "allgather", "gather"};
static const char *const call_name[NCOLL] = {"MPI_Alltoall", "MPI_Allgather", "MPI_Gather"};
static const uint32_t coll_code[NCOLL] = {NWS_ALLTOALL, NWS_ALLGATHER, NWS_GATHER};

/* A local verdict, ordered so the minimum over ranks is the communicator's: any rank that
 * failed makes every rank report the error, any rank that cannot use the schedule makes every
 * rank run the native collective. */
enum { VERDICT_ERROR = 0, VERDICT_NATIVE = 1, VERDICT_SCHEDULE = 2 };

#define WHY_LEN 5120

static struct {
    int on;           /* a schedule path is set */
    int is_dir;
    char path[4096];
    int executor;     /* -1: the schedule's */
    uint32_t concurrent;
    int verbose;
    unsigned generation; /* bumped by netweave_mpi_use: cached choices are stale */
    int keyval;
    int error_code;   /* netweave's MPI error code; its string is the last failure's reason */
    /* What ran since the last netweave_mpi_use, per collective (nwbench reports it). */
    long scheduled[NCOLL], native[NCOLL];
    char why[NCOLL][WHY_LEN];
} g = {.executor = -1, .keyval = MPI_KEYVAL_INVALID, .error_code = MPI_ERR_OTHER};

typedef struct {
    unsigned generation;
    int usable;        /* 1: run the schedule or the DAG; 0: native */
    int is_dag;
    int root_warned;   /* the "wrong root" line was printed */
    int decider;       /* the rank whose verdict (and reason) the communicator took */
    char why[WHY_LEN]; /* why the native collective runs (agreed over the communicator) */
    nws_phases sched;  /* phases: this rank's share, resolved below */
    nw_collective *resolved;
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

/* Report a failure through `comm`'s error handler: the reason goes to stderr as one line and
 * becomes the error string of netweave's error code; MPI_ERRORS_ARE_FATAL then aborts the job,
 * MPI_ERRORS_RETURN (or a user's handler that returns) gives the code back to the caller. */
static int fail_quietly(MPI_Comm comm, const char *what, const char *why, int quietly) {
    char text[MPI_MAX_ERROR_STRING];
    snprintf(text, sizeof text, "netweave: %s: %s", what, why);
    if (!quietly) {
        fprintf(stderr, "%s\n", text);
        fflush(stderr);
    }
    if (g.error_code != MPI_ERR_OTHER) PMPI_Add_error_string(g.error_code, text);
    PMPI_Comm_call_errhandler(comm, g.error_code);
    return g.error_code;
}

static int fail(MPI_Comm comm, const char *what, const char *why) { return fail_quietly(comm, what, why, 0); }

/* Free what `c` loaded from its file (the decision and its reason stay). */
static void unload(choice *c) {
    nw_collective_free(c->resolved);
    nws_phases_free(&c->sched);
    nws_dag_free(&c->dag);
    free(c->scaled);
    c->resolved = NULL, c->scaled = NULL, c->scaled_for = 0, c->is_dag = 0;
    memset(&c->sched, 0, sizeof c->sched);
    memset(&c->dag, 0, sizeof c->dag);
}

static void drop_choice(choice *c) {
    unload(c);
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

/* Read the settings; check a single schedule file now, so a corrupt one fails at MPI_Init.
 * A bad setting is reported through MPI_COMM_WORLD's error handler (fatal at this point). */
static void setup(void) {
    const char *path = getenv("NETWEAVE_SCHEDULE");
    const char *ex = getenv("NETWEAVE_EXECUTOR"), *k = getenv("NETWEAVE_CONCURRENT_SENDS");
    const char *v = getenv("NETWEAVE_VERBOSE");
    int error_class;
    if (PMPI_Add_error_class(&error_class) == MPI_SUCCESS && PMPI_Add_error_code(error_class, &g.error_code) != MPI_SUCCESS)
        g.error_code = MPI_ERR_OTHER;
    g.verbose = v && *v && strcmp(v, "0");
    if (ex && *ex) {
        if (!strcmp(ex, "auto")) g.executor = NWS_EXEC_AUTO;
        else if (!strcmp(ex, "sync")) g.executor = NWS_EXEC_SYNC;
        else if (!strcmp(ex, "async")) g.executor = NWS_EXEC_ASYNC;
        else if (!strcmp(ex, "local-sync")) g.executor = NWS_EXEC_LOCAL_SYNC;
        else fail(MPI_COMM_WORLD, "NETWEAVE_EXECUTOR", "must be auto, sync, async or local-sync");
    }
    if (k && *k) {
        char *end;
        long n = strtol(k, &end, 10);
        if (*end || n < 1 || n > 1 << 20) fail(MPI_COMM_WORLD, "NETWEAVE_CONCURRENT_SENDS", "must be a positive integer");
        else g.concurrent = (uint32_t)n;
    }
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &g.keyval, NULL);
    /* Whether schedules are on at all is agreed too: ranks whose environment lacks
     * NETWEAVE_SCHEDULE would otherwise skip the collective first-call decision the others make. */
    int on = path && *path, all_on = on, any_on = on;
    PMPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    PMPI_Allreduce(&on, &any_on, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (all_on) netweave_mpi_use(path);
    else if (any_on) say(MPI_COMM_WORLD, "warning: %s%s", "NETWEAVE_SCHEDULE is set on some ranks only: every rank runs",
                               " the native collectives");
}

/* Switch every later call to the schedules at `path` (a file or a directory), or to the native
 * collectives with NULL. Collective over MPI_COMM_WORLD in spirit: call it on every rank. A bad
 * single file is reported through MPI_COMM_WORLD's error handler; returns 0 or that error code.
 * (nwbench uses it to time several schedules in one run.) */
int netweave_mpi_use(const char *path) {
    g.generation++;
    memset(g.scheduled, 0, sizeof g.scheduled);
    memset(g.native, 0, sizeof g.native);
    memset(g.why, 0, sizeof g.why);
    g.on = path && *path;
    if (!g.on) return 0;
    snprintf(g.path, sizeof g.path, "%s", path);
    struct stat sb;
    if (stat(path, &sb)) {
        g.on = 0;
        return fail(MPI_COMM_WORLD, path, "no such schedule file or directory (NETWEAVE_SCHEDULE)");
    }
    g.is_dir = S_ISDIR(sb.st_mode);
    if (!g.is_dir) {
        char err[512];
        size_t len = 0;
        unsigned char *data = nws_load(path, &len, err, sizeof err);
        int form = data ? nws_form(data, len, err, sizeof err) : -1;
        nws_phases s;
        nws_dag d;
        int bad = form < 0 || (form == 0 && nws_phases_parse(data, len, 0, &s, err, sizeof err)) ||
                  (form == 1 && nws_dag_parse(data, len, &d, err, sizeof err));
        if (!bad && form == 0) nws_phases_free(&s);
        else if (!bad) nws_dag_free(&d);
        free(data);
        if (bad) {
            g.on = 0;
            return fail(MPI_COMM_WORLD, path, err);
        }
    }
    return 0;
}

/* How many calls of `collective` ran a schedule and how many the native algorithm since the last
 * netweave_mpi_use, and the reason of the last native run (or ""). 0, or -1 for an unknown
 * collective name. (nwbench reports it next to its timings.) */
int netweave_mpi_ran(const char *collective, long *scheduled, long *native, const char **why) {
    for (int i = 0; i < NCOLL; i++)
        if (!strcmp(collective, coll_name[i])) {
            *scheduled = g.scheduled[i];
            *native = g.native[i];
            *why = g.why[i];
            return 0;
        }
    return -1;
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

#ifdef MPICH
/* MPICH 4.0's finalize over UCX closes every endpoint with a flushing ucp_disconnect_nb, then
 * waits in a PMI barrier in which it no longer progresses UCX. Over UCX's TCP transport an
 * endpoint that has sent anything flushes by a PUT the peer must acknowledge, so a rank that
 * finished its closes and sits in the PMI barrier never acknowledges the peers still closing:
 * the job hangs in MPI_Finalize (with more than 2 ranks, in most runs). MPICH 4.2 removed that
 * barrier (pmodels/mpich 08d8105b). Here MPI_Finalize first waits until every rank has reached
 * it — all MPI traffic is then complete — and the endpoints are closed without a flush: the
 * disconnects complete at once, every rank passes the PMI barrier, and destroying the worker
 * releases the endpoints locally. Outside MPI_Finalize the call is passed on unchanged. */
static int finalizing;

void *ucp_disconnect_nb(void *ep);
void *ucp_disconnect_nb(void *ep) {
    if (finalizing) return NULL; /* UCS_OK: done */
    void *(*next)(void *);
    *(void **)&next = dlsym(RTLD_NEXT, "ucp_disconnect_nb");
    return next ? next(ep) : NULL;
}
#endif

int MPI_Finalize(void) {
#ifdef MPICH
    PMPI_Barrier(MPI_COMM_WORLD);
    finalizing = 1;
#endif
    if (g.keyval != MPI_KEYVAL_INVALID) {
        void *value;
        int found = 0;
        PMPI_Comm_get_attr(MPI_COMM_WORLD, g.keyval, &value, &found);
        if (found) PMPI_Comm_delete_attr(MPI_COMM_WORLD, g.keyval); /* world's attributes may outlive Finalize */
        PMPI_Comm_free_keyval(&g.keyval);
    }
    return PMPI_Finalize();
}

/* The communicator's netweave state, made at its first covered call (collective: every rank
 * of `comm` is in that call), or NULL when memory runs out. */
static comm_state *state_of(MPI_Comm comm) {
    void *value;
    int found = 0;
    PMPI_Comm_get_attr(comm, g.keyval, &value, &found);
    if (found) return value;
    comm_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    PMPI_Comm_dup(comm, &st->comm);
    PMPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(comm, &st->rank);
    PMPI_Comm_size(comm, &st->size);
    PMPI_Comm_set_attr(comm, g.keyval, st);
    return st;
}

static uint64_t fnv(const void *data, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = data; len--; p++) h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

/* Warn (once per communicator and schedule) when the schedule's placement groups ranks on hosts
 * differently from the nodes they run on: it was computed for another allocation. Skipped when
 * the whole job runs on one node (a test or an emulation on one machine). Collective. */
static void check_placement(comm_state *st, MPI_Comm comm, const uint32_t *placement, const char *name) {
    char host[MPI_MAX_PROCESSOR_NAME + 1] = "";
    int len = 0;
    PMPI_Get_processor_name(host, &len);
    uint64_t mine = fnv(host, strlen(host)), *all = malloc(sizeof *all * (size_t)st->size);
    int have = all != NULL, everyone = 0;
    PMPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, st->comm); /* all ranks take part, or none */
    if (!everyone) {
        free(all);
        return;
    }
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

/* This rank's verdict on a task DAG (paper 004) for `which`: usable when it adds up to that
 * collective on this size and its tags fit the MPI library's; else `why` says why not. */
static int dag_verdict(comm_state *st, int which, choice *c, const char *path, const void *data, size_t len,
                       char *why, size_t whylen) {
    char err[512];
    if (nws_dag_parse(data, len, &c->dag, err, sizeof err)) {
        snprintf(why, whylen, "%s: %s", path, err);
        return VERDICT_ERROR;
    }
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
    else
        return c->is_dag = 1, VERDICT_SCHEDULE;
    return VERDICT_NATIVE;
}

/* This rank's verdict on the schedule for `which` (loaded into `c`), and the file's hash. */
static int local_verdict(comm_state *st, int which, choice *c, char *why, size_t whylen, uint64_t *hash) {
    char path[4200], err[512];
    if (g.is_dir) snprintf(path, sizeof path, "%s/%s-%d.nws", g.path, coll_name[which], st->size);
    else snprintf(path, sizeof path, "%s", g.path);
    struct stat sb;
    if (g.is_dir && stat(path, &sb)) return snprintf(why, whylen, "no %s", path), VERDICT_NATIVE;
    size_t len = 0;
    unsigned char *data = nws_load(path, &len, err, sizeof err);
    int form = data ? nws_form(data, len, err, sizeof err) : -1, verdict = VERDICT_NATIVE;
    if (form < 0) {
        snprintf(why, whylen, "%s: %s", path, err);
        verdict = VERDICT_ERROR;
    } else if (form == 1) {
        verdict = dag_verdict(st, which, c, path, data, len, why, whylen);
    } else if (nws_phases_parse(data, len, 0, &c->sched, err, sizeof err)) {
        snprintf(why, whylen, "%s: %s", path, err);
        verdict = VERDICT_ERROR;
    } else if (c->sched.collective != coll_code[which]) {
        snprintf(why, whylen, "%s is not a%s %s schedule", path, which == COLL_GATHER ? "" : "n", coll_name[which]);
    } else if (c->sched.ranks != (uint32_t)st->size) {
        snprintf(why, whylen, "%s is for %u ranks, the communicator has %d", path, c->sched.ranks, st->size);
    } else {
        nws_phases_free(&c->sched);
        if (nws_phases_parse(data, len, (uint32_t)st->rank, &c->sched, err, sizeof err) ||
            !(c->resolved = nw_collective_build(&c->sched, err, sizeof err))) {
            snprintf(why, whylen, "%s: %s", path, err);
            verdict = VERDICT_ERROR;
        } else {
            verdict = VERDICT_SCHEDULE;
        }
    }
    *hash = data ? fnv(data, len) : 0;
    free(data);
    return verdict;
}

/* The communicator's decision for collective `which`, made once per schedule generation: every
 * rank's verdict is reduced to the least (error < native < schedule) and the reason of the
 * lowest rank holding it is handed to all, so every rank decides alike even when their files
 * or environments differ (ranks that read different schedule files run the native collective).
 * Returns the agreed verdict; `c->why` holds the reason when it is not VERDICT_SCHEDULE. */
static int decide(comm_state *st, MPI_Comm comm, int which, choice *c) {
    char why[WHY_LEN] = "";
    uint64_t hash = 0;
    int verdict = local_verdict(st, which, c, why, sizeof why, &hash);
    struct { int verdict, rank; } mine = {verdict, st->rank}, least;
    uint64_t hashes[2] = {verdict == VERDICT_SCHEDULE ? hash : 0, verdict == VERDICT_SCHEDULE ? ~hash : ~0ull}, most[2];
    int rc = PMPI_Allreduce(&mine, &least, 1, MPI_2INT, MPI_MINLOC, st->comm);
    if (rc == MPI_SUCCESS) rc = PMPI_Allreduce(hashes, most, 2, MPI_UINT64_T, MPI_MAX, st->comm);
    if (rc != MPI_SUCCESS) {
        snprintf(c->why, sizeof c->why, "agreeing on the schedule failed");
        return VERDICT_ERROR;
    }
    if (least.verdict == VERDICT_SCHEDULE && most[0] != ~most[1]) { /* max ≠ min: not one file */
        least.verdict = VERDICT_NATIVE;
        snprintf(why, sizeof why, "the ranks of this communicator read different schedule files");
        least.rank = 0;
    }
    c->decider = least.rank;
    if (least.verdict != VERDICT_SCHEDULE) { /* everyone learns the deciding rank's reason */
        if (least.rank != st->rank) why[0] = 0;
        PMPI_Bcast(why, sizeof why, MPI_CHAR, least.rank, st->comm);
        if (least.verdict == VERDICT_ERROR && verdict != VERDICT_ERROR)
            snprintf(c->why, sizeof c->why, "rank %d cannot read the schedule: %.4000s", least.rank, why);
        else snprintf(c->why, sizeof c->why, "%s", why);
        unload(c);
        if (least.verdict == VERDICT_NATIVE && g.verbose)
            say(comm, "%s falls back to the native collective: %s", call_name[which], c->why);
        return least.verdict;
    }
    c->usable = 1;
    const char *name = c->is_dag ? c->dag.name : c->sched.name;
    if (g.verbose) say(comm, "%s runs '%s'", call_name[which], name);
    check_placement(st, comm, c->is_dag ? c->dag.placement : c->sched.placement, name);
    return VERDICT_SCHEDULE;
}

/* Count a native run of `which` and remember why. */
static void ran_native(int which, const char *why) {
    g.native[which]++;
    if (strcmp(g.why[which], why)) snprintf(g.why[which], sizeof g.why[which], "%s", why);
}

/* What a call of `which` on `comm` runs: 1 with `*out` the schedule, 0 for the native
 * collective, or an MPI error code (already reported through the error handler) when the
 * schedule cannot be read. Depends only on the file, the communicator and the root, so every
 * rank decides alike. */
static int chosen(MPI_Comm comm, int which, int root, comm_state **st, choice **out) {
    if (!g.on) return 0;
    int inter = 1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0; /* the native call reports it */
    if (inter) {
        static int said[NCOLL];
        if (g.verbose && !said[which]++)
            fprintf(stderr, "netweave: %s falls back to the native collective: an inter-communicator\n", call_name[which]);
        ran_native(which, "an inter-communicator");
        return 0;
    }
    if (!(*st = state_of(comm))) return fail(comm, call_name[which], "out of memory for the communicator's state");
    choice *c = &(*st)->c[which];
    if (c->generation != g.generation) {
        drop_choice(c);
        c->generation = g.generation;
        if (decide(*st, comm, which, c) == VERDICT_ERROR) {
            c->generation = 0; /* asked again at the next call */
            return fail_quietly(comm, call_name[which], c->why, c->decider != (*st)->rank); /* said once */
        }
    }
    if (!c->usable) return ran_native(which, c->why), 0;
    uint32_t schedule_root = c->is_dag ? c->dag.root : c->sched.root;
    if (which == COLL_GATHER && schedule_root != (uint32_t)root) {
        char r[64];
        snprintf(r, sizeof r, "the schedule's root is %u, the call's %d", schedule_root, root);
        if (g.verbose && !c->root_warned) say(comm, "%s falls back to the native collective: %s", call_name[which], r);
        c->root_warned = 1;
        return ran_native(which, r), 0;
    }
    g.scheduled[which]++;
    *out = c;
    return 1;
}

/* One side of a call's buffers: `count` elements of `type` from `buf`. A contiguous layout is
 * used in place; any other (strided vectors, a lower bound) is packed into, or unpacked from, a
 * contiguous copy, so each rank's choice of datatypes stays its own business. */
typedef struct {
    long long bytes; /* of one block: count × type size */
    MPI_Aint extent; /* of one block in the user's buffer */
    int contiguous;
} layout;

/* The layout of `count` elements of `type`; -1 when MPI rejects the type or the count. */
static int layout_of(int count, MPI_Datatype type, layout *out) {
    int size;
    MPI_Aint lb, extent, true_lb, true_extent;
    if (count < 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS)
        return -1;
    out->bytes = (long long)count * size;
    out->extent = (MPI_Aint)count * extent;
    out->contiguous = lb == 0 && true_lb == 0 && extent == size && true_extent == size;
    return 0;
}

/* Pack `blocks` blocks of `count` × `type` at `buf` into a new contiguous buffer of `bytes`
 * each; NULL with `*rc` set when it cannot. */
static void *pack(const void *buf, int count, MPI_Datatype type, int blocks, long long bytes, MPI_Comm comm, int *rc) {
    long long total = (long long)blocks * bytes, elements = (long long)blocks * count;
    if (elements > INT_MAX || total > INT_MAX) return *rc = MPI_ERR_COUNT, NULL;
    void *copy = malloc(total ? (size_t)total : 1);
    if (!copy) return *rc = MPI_ERR_NO_MEM, NULL;
    int position = 0;
    *rc = PMPI_Pack(buf, (int)elements, type, copy, (int)total, &position, comm);
    if (*rc == MPI_SUCCESS && position != total) *rc = MPI_ERR_TYPE; /* a packed form with headers: not raw bytes */
    if (*rc != MPI_SUCCESS) return free(copy), NULL;
    return copy;
}

static int unpack(const void *copy, int count, MPI_Datatype type, int blocks, long long bytes, void *buf, MPI_Comm comm) {
    int position = 0;
    return PMPI_Unpack(copy, (int)((long long)blocks * bytes), &position, buf, blocks * count, type, comm);
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

static int run_dag(MPI_Comm comm, comm_state *st, choice *c, int which, const void *sendbuf, void *recvbuf, size_t B) {
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
        return fail(comm, call_name[which], err);
    }
    return MPI_SUCCESS;
}

/* Run the chosen schedule on contiguous buffers of `block_bytes` per block; a failure (a peer
 * died, a transfer failed) goes through `comm`'s error handler. */
static int run(MPI_Comm comm, comm_state *st, choice *c, int which, const void *sendbuf, void *recvbuf,
               size_t block_bytes) {
    if (c->is_dag) return run_dag(comm, st, c, which, sendbuf, recvbuf, block_bytes);
    char err[512];
    nw_transport tp = nw_mpi_transport_start(&st->tp, st->comm, (uint32_t)st->rank, (uint32_t)st->size);
    nw_buffers b = {.sendbuf = sendbuf, .recvbuf = recvbuf, .block_bytes = block_bytes};
    uint32_t executor = g.executor >= 0 ? (uint32_t)g.executor : c->sched.executor;
    if (nw_collective_run(c->resolved, &tp, &b, executor, g.concurrent, err, sizeof err)) {
        nw_mpi_transport_cancel(&st->tp);
        return fail(comm, call_name[which], err);
    }
    return MPI_SUCCESS;
}

/* The contiguous areas a schedule runs on, with the copies made for layouts that are not. */
typedef struct {
    const void *send;
    void *recv;
    void *send_copy, *recv_copy; /* owned; recv_copy is unpacked into the user's buffer */
} staging;

/* Stage the send side: `blocks` blocks of `s` at `buf`, or (`in_place_copy`) a private copy of
 * them when the schedule would overwrite them while it still reads them. 0 or an MPI code. */
static int stage_send(staging *x, const void *buf, int count, MPI_Datatype type, const layout *s, int blocks,
                      int in_place_copy, MPI_Comm comm) {
    int rc = MPI_SUCCESS;
    if (!s->contiguous) {
        x->send = x->send_copy = pack(buf, count, type, blocks, s->bytes, comm, &rc);
    } else if (in_place_copy) {
        size_t total = (size_t)blocks * (size_t)s->bytes;
        if ((x->send = x->send_copy = malloc(total))) memcpy(x->send_copy, buf, total);
        else rc = MPI_ERR_NO_MEM;
    } else {
        x->send = buf;
    }
    return rc;
}

/* Stage the receive side of `blocks` blocks of `count` elements (layout `r`) at `buf`. 0 or an
 * MPI code. */
static int stage_recv(staging *x, void *buf, int count, const layout *r, int blocks) {
    if (r->contiguous) return x->recv = buf, MPI_SUCCESS;
    if ((long long)blocks * count > INT_MAX || (long long)blocks * r->bytes > INT_MAX) return MPI_ERR_COUNT; /* MPI_Unpack's ints */
    x->recv = x->recv_copy = malloc((size_t)blocks * (size_t)r->bytes);
    return x->recv ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

/* Run the schedule on the staged buffers, unpack a strided receive buffer, free the copies. */
static int run_staged(MPI_Comm comm, comm_state *st, choice *c, int which, staging *x, int rc, void *recvbuf,
                      int recvcount, MPI_Datatype recvtype, long long B) {
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        PMPI_Error_string(rc, text, &len);
        rc = fail(comm, call_name[which], rc == MPI_ERR_NO_MEM ? "out of memory for a copy of a strided buffer" : text);
    } else {
        rc = run(comm, st, c, which, x->send, x->recv, (size_t)B);
    }
    if (rc == MPI_SUCCESS && x->recv_copy) rc = unpack(x->recv_copy, recvcount, recvtype, st->size, B, recvbuf, comm);
    free(x->send_copy);
    free(x->recv_copy);
    return rc;
}

/* Arguments MPI rejects (or that no legal program passes) on this rank: the native collective
 * runs and reports them as the MPI library does. */
static void refused(int which) {
    g.scheduled[which]--;
    ran_native(which, "the call's arguments are not valid on some rank");
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
    comm_state *st = NULL;
    choice *c = NULL;
    int use = chosen(comm, COLL_ALLTOALL, 0, &st, &c);
    if (use != 1) return use ? use : PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int in_place = sendbuf == MPI_IN_PLACE;
    layout r, s;
    if (layout_of(recvcount, recvtype, &r) || (!in_place && (layout_of(sendcount, sendtype, &s) || s.bytes != r.bytes))) {
        refused(COLL_ALLTOALL);
        return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    if (!r.bytes) return MPI_SUCCESS;
    staging x = {0};
    /* In place, the schedule reads every block before it is overwritten: it sends from a copy. */
    int rc = in_place ? stage_send(&x, recvbuf, recvcount, recvtype, &r, st->size, 1, comm)
                      : stage_send(&x, sendbuf, sendcount, sendtype, &s, st->size, 0, comm);
    if (rc == MPI_SUCCESS) rc = stage_recv(&x, recvbuf, recvcount, &r, st->size);
    return run_staged(comm, st, c, COLL_ALLTOALL, &x, rc, recvbuf, recvcount, recvtype, r.bytes);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
    comm_state *st = NULL;
    choice *c = NULL;
    int use = chosen(comm, COLL_ALLGATHER, 0, &st, &c);
    if (use != 1) return use ? use : PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int in_place = sendbuf == MPI_IN_PLACE;
    layout r, s;
    if (layout_of(recvcount, recvtype, &r) || (!in_place && (layout_of(sendcount, sendtype, &s) || s.bytes != r.bytes))) {
        refused(COLL_ALLGATHER);
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    if (!r.bytes) return MPI_SUCCESS;
    staging x = {0};
    /* In place, the rank's own block already sits in its slot of the receive buffer. */
    int rc = in_place ? stage_send(&x, (char *)recvbuf + (MPI_Aint)st->rank * r.extent, recvcount, recvtype, &r, 1, 0, comm)
                      : stage_send(&x, sendbuf, sendcount, sendtype, &s, 1, 0, comm);
    if (rc == MPI_SUCCESS) rc = stage_recv(&x, recvbuf, recvcount, &r, st->size);
    return run_staged(comm, st, c, COLL_ALLGATHER, &x, rc, recvbuf, recvcount, recvtype, r.bytes);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
    comm_state *st = NULL;
    choice *c = NULL;
    int use = chosen(comm, COLL_GATHER, root, &st, &c);
    if (use != 1) return use ? use : PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    /* The receive side means something at the root only; MPI_IN_PLACE is the root's alone. */
    int at_root = st->rank == root, in_place = at_root && sendbuf == MPI_IN_PLACE;
    layout r = {0}, s = {0};
    if ((at_root && layout_of(recvcount, recvtype, &r)) || (!in_place && layout_of(sendcount, sendtype, &s)) ||
        (at_root && !in_place && s.bytes != r.bytes)) {
        refused(COLL_GATHER);
        return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    long long B = at_root ? r.bytes : s.bytes;
    if (!B) return MPI_SUCCESS;
    staging x = {0};
    int rc = in_place ? stage_send(&x, (char *)recvbuf + (MPI_Aint)root * r.extent, recvcount, recvtype, &r, 1, 0, comm)
                      : stage_send(&x, sendbuf, sendcount, sendtype, &s, 1, 0, comm);
    if (rc == MPI_SUCCESS && at_root) rc = stage_recv(&x, recvbuf, recvcount, &r, st->size);
    return run_staged(comm, st, c, COLL_GATHER, &x, rc, recvbuf, recvcount, recvtype, B);
}
