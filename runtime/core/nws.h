/* nws.h — a netweave schedule file (.nws) as the executors read it.
 *
 * Two forms (docs/schedule-format.md): phases (form 0), read per rank — a rank keeps only its
 * own sends and receives, each with the blocks it carries — and task DAGs (form 1), read whole.
 * Versions 1 and 2 are read; only version 2 says which blocks a message carries, which is
 * what lets the MPI runtime run one file at every message size.
 *
 * The task-DAG form (form 1, written by `netweave schedule … -o x.nws` for paper 004's
 * schedules and by `netweave run` for any schedule) is read whole: every rank sees every task,
 * which is what lets it know, without asking anyone, whom it waits for and whom it must notify.
 * The file layout is specified in docs/schedule-format.md.
 *
 *     nws_dag dag; char err[256];
 *     if (nws_dag_read("alltoall.nws", &dag, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(2); }
 *     for (uint32_t t = 0; t < dag.ntasks; t++) printf("%u -> %u\n", dag.tasks[t].src, dag.tasks[t].dst);
 *     nws_dag_free(&dag);
 */
#ifndef NWS_H
#define NWS_H

#include <stddef.h>
#include <stdint.h>

#define NWS_NONE UINT32_MAX

/* How a task waits for one predecessor (as traffic/dag.rs defines it). */
enum nws_dep_kind {
    NWS_DEP_COMPLETE = 0, /* start once the predecessor has completely arrived */
    NWS_DEP_RELAY = 1     /* forward the predecessor's data as it arrives (cut-through) */
};

/* Collective codes of the header (as traffic::Collective). */
enum nws_collective { NWS_ALLTOALL = 0, NWS_ALLGATHER = 1, NWS_GATHER = 2, NWS_BARRIER = 3, NWS_CUSTOM = 4 };
/* Executor a schedule asks for (version-2 header). */
enum nws_executor { NWS_EXEC_AUTO = 0, NWS_EXEC_SYNC = 1, NWS_EXEC_ASYNC = 2, NWS_EXEC_LOCAL_SYNC = 3 };
#define NWS_FLAG_PERMUTATION 1u
#define NWS_FLAG_FORWARDED 2u

/* block: the collective's block this task carries a piece of (NWS_NONE: unknown, version 1 or
 * a custom DAG); offset: where the piece starts in it, in bytes of the schedule as generated. */
typedef struct { uint32_t src, dst; uint64_t bytes; uint32_t block; uint64_t offset; } nws_task;
typedef struct { uint32_t task, kind; } nws_dep;

typedef struct {
    uint32_t ranks, ntasks;
    uint64_t ndeps;
    uint32_t collective, root; /* NWS_ALLTOALL or NWS_GATHER when the tasks add up to one */
    uint64_t block_bytes;      /* block size as generated; 0 when tasks carry no blocks */
    char name[256];          /* NUL-terminated, truncated */
    uint32_t *placement;     /* host index of every rank */
    nws_task *tasks;         /* in task-id order; every dependency points to an earlier task */
    uint64_t *dep_index;     /* deps of task t: deps[dep_index[t] .. dep_index[t + 1]] */
    nws_dep *deps;
    uint32_t *relays;        /* the task t forwards, or NWS_NONE */
    uint64_t checksum;       /* FNV-1a of the file: ranks compare it to be sure they run one schedule */
} nws_dag;

/* Read the DAG at `path`. Returns 0, or -1 with a one-line reason in `err` (never exits, never
 * crashes on a corrupt file). A phases file (form 0) is refused with a hint. */
int nws_dag_read(const char *path, nws_dag *out, char *err, size_t errlen);
/* Same, from a file already in memory. */
int nws_dag_parse(const void *data, size_t len, nws_dag *out, char *err, size_t errlen);
void nws_dag_free(nws_dag *dag);

/* One send or receive of a phases schedule, as one rank sees it: the blocks it carries are
 * blocks[first .. first + nblocks] of the rank's nws_phases (ids: all-to-all o*N + t,
 * allgather / gather o). */
typedef struct { uint32_t phase, peer, nblocks; uint64_t bytes, first; } nws_op;

typedef struct {
    uint32_t version, ranks, phases, collective, root, flags, concurrent_sends, executor, rank;
    uint64_t block_bytes;  /* 0: the file does not say which blocks messages carry */
    char name[256];
    uint32_t *placement;   /* host index of every rank */
    nws_op *sends, *recvs; /* this rank's, in its send order / phase order */
    uint32_t nsends, nrecvs;
    uint32_t *blocks;      /* block ids of this rank's ops, sends' first */
    uint64_t nblocks;
} nws_phases;

/* Read rank `rank`'s share of the phases schedule in `data`. Returns 0, or -1 with one line in
 * `err`; every field is checked (peers, phase order, block ids, sizes), never trusted. */
int nws_phases_parse(const void *data, size_t len, uint32_t rank, nws_phases *out, char *err, size_t errlen);
void nws_phases_free(nws_phases *s);

/* Format a one-line reason into `err` and return -1: the core's error convention. */
int nws_fail(char *err, size_t errlen, const char *fmt, ...);

/* The whole file at `path` in memory (free() it). Returns NULL with a reason in `err`. */
unsigned char *nws_load(const char *path, size_t *len, char *err, size_t errlen);
/* The form (0 phases, 1 DAG) of a schedule in memory, or -1 with a reason when it is not one. */
int nws_form(const void *data, size_t len, char *err, size_t errlen);

#endif
