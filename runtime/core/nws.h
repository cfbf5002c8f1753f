/* nws.h — a netweave schedule file (.nws) as the executors read it.
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

typedef struct { uint32_t src, dst; uint64_t bytes; } nws_task;
typedef struct { uint32_t task, kind; } nws_dep;

typedef struct {
    uint32_t ranks, ntasks;
    uint64_t ndeps;
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

#endif
