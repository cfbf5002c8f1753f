/* nwbench: an IMB-style timing of MPI collectives, one JSON document on stdout.
 *
 *   nwbench [--collective alltoall|allgather|gather] [--sizes 1,1024,1048576] [--reps N]
 *           [--warmup N] [--check] [--schedule FILE_OR_DIR]...
 *
 * The native collective is measured first ("results"); with netweave's library preloaded, each
 * --schedule is then switched on in turn (netweave_mpi_use) and measured the same way
 * ("schedules": [{"schedule", "results"}]), so native and schedules share one run. The schedule
 * name `native` measures the native collective again (to interleave repeated measurements).
 * For each size (bytes per pair: each rank's block for every other rank), the collective runs
 * --warmup times untimed, then --reps times between barriers; each rank averages its own call
 * time and the report gives, as IMB does, the minimum, average and maximum of those averages
 * over ranks, and bytes/s per process (the bytes one rank sends per call / its average time).
 * --check fills every block with a pattern of (source, destination, size) and verifies every
 * received byte once per size, aborting with the first mismatch.
 *
 * Each schedule's entry also says what actually ran: "ran": {"schedule": calls that ran it,
 * "native": calls that fell back to the native collective, "why": the library's reason} (as
 * the library counts them on rank 0), so a schedule that does not apply — another size, root
 * or collective — is never reported as if it had been timed.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLTOALL, ALLGATHER, GATHER };

static int fail(const char *why) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) fprintf(stderr, "nwbench: %s\n", why);
    MPI_Finalize();
    return 2;
}

/* The byte at offset i of the block from `src` to `dst`. */
static unsigned char pattern(int src, int dst, size_t i) {
    return (unsigned char)(src * 131 + dst * 31 + i * 7 + (i >> 8));
}

static void fill(unsigned char *buf, enum coll c, int rank, int n, size_t bytes) {
    int blocks = c == ALLTOALL ? n : 1;
    for (int b = 0; b < blocks; b++)
        for (size_t i = 0; i < bytes; i++) buf[(size_t)b * bytes + i] = pattern(rank, c == ALLTOALL ? b : -1, i);
}

/* 1 with `why` naming the first wrong byte received (source rank, offset), else 0. */
static int verify(const unsigned char *buf, enum coll c, int rank, int n, size_t bytes, char *why, size_t len) {
    if (c == GATHER && rank != 0) return 0;
    for (int src = 0; src < n; src++)
        for (size_t i = 0; i < bytes; i++) {
            unsigned char want = pattern(src, c == ALLTOALL ? rank : -1, i);
            if (buf[(size_t)src * bytes + i] != want) {
                snprintf(why, len, "rank %d: wrong byte from rank %d at offset %zu", rank, src, i);
                return 1;
            }
        }
    return 0;
}

/* `text` as a JSON string: quotes, backslashes and control characters escaped. */
static void json_string(const char *text) {
    putchar('"');
    for (const char *ch = text; *ch; ch++)
        if (*ch == '"' || *ch == '\\') printf("\\%c", *ch);
        else if ((unsigned char)*ch < 32) printf("\\u%04x", (unsigned char)*ch);
        else putchar(*ch);
    putchar('"');
}

static int call(enum coll c, const void *s, void *r, size_t bytes) {
    int count = (int)bytes;
    switch (c) {
    case ALLTOALL: return MPI_Alltoall(s, count, MPI_BYTE, r, count, MPI_BYTE, MPI_COMM_WORLD);
    case ALLGATHER: return MPI_Allgather(s, count, MPI_BYTE, r, count, MPI_BYTE, MPI_COMM_WORLD);
    default: return MPI_Gather(s, count, MPI_BYTE, r, count, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

/* Time every size of `sizes`, printing the JSON list of results on rank 0; 0 or an exit status. */
static int measure(enum coll c, int rank, int n, const char *sizes, long reps, long warmup, int check) {
    printf(rank == 0 ? "[" : "");
    char *list = strdup(sizes), *save = NULL;
    int first = 1;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long long bytes = strtoll(tok, &end, 10);
        if (*end || bytes < 0 || bytes > (1LL << 30)) {
            free(list);
            return fail("--sizes must be byte counts from 0 to 1 GiB, separated by commas");
        }
        size_t sb = (size_t)bytes * (c == ALLTOALL ? (size_t)n : 1), rb = (size_t)bytes * (size_t)n;
        unsigned char *s = malloc(sb ? sb : 1), *r = malloc(rb ? rb : 1);
        if (!s || !r) {
            free(list);
            return fail("out of memory for the buffers");
        }
        fill(s, c, rank, n, (size_t)bytes);
        memset(r, 0, rb);
        for (long w = 0; w < warmup; w++) call(c, s, r, (size_t)bytes);
        if (check) {
            memset(r, 0, rb);
            call(c, s, r, (size_t)bytes);
            char why[160];
            int bad = verify(r, c, rank, n, (size_t)bytes, why, sizeof why), any;
            MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (bad) fprintf(stderr, "nwbench: %s\n", why);
            if (any) MPI_Abort(MPI_COMM_WORLD, 3);
        }
        double total = 0;
        for (long k = 0; k < reps; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            call(c, s, r, (size_t)bytes);
            total += MPI_Wtime() - t0;
        }
        double mine = total / (double)reps, lo, hi, sum;
        MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double sent = (double)bytes * (c == ALLTOALL ? n - 1 : 1);
            printf("%s{\"bytes\": %lld, \"min_s\": %.9f, \"avg_s\": %.9f, \"max_s\": %.9f, \"bytes_per_s\": %.1f}",
                   first ? "" : ", ", bytes, lo, sum / n, hi, hi > 0 ? sent / (sum / n) : 0.0);
            fflush(stdout);
        }
        first = 0;
        free(s);
        free(r);
    }
    free(list);
    printf(rank == 0 ? "]" : "");
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    enum coll c = ALLTOALL;
    const char *sizes = "1,1024,65536,1048576", *name = "alltoall";
    const char *schedules[64];
    int nschedules = 0;
    long reps = 20, warmup = 3;
    int check = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) check = 1;
        else if (!v) return fail("every option but --check takes a value");
        else if (!strcmp(a, "--collective")) {
            name = v;
            if (!strcmp(v, "alltoall")) c = ALLTOALL;
            else if (!strcmp(v, "allgather")) c = ALLGATHER;
            else if (!strcmp(v, "gather")) c = GATHER;
            else return fail("--collective must be alltoall, allgather or gather");
            i++;
        } else if (!strcmp(a, "--sizes")) sizes = v, i++;
        else if (!strcmp(a, "--reps")) reps = strtol(v, NULL, 10), i++;
        else if (!strcmp(a, "--warmup")) warmup = strtol(v, NULL, 10), i++;
        else if (!strcmp(a, "--schedule") && nschedules < 64) schedules[nschedules++] = v, i++;
        else return fail("unknown option (use --collective, --sizes, --reps, --warmup, --check, --schedule)");
    }
    if (reps < 1 || warmup < 0) return fail("--reps must be at least 1 and --warmup at least 0");
    int (*use)(const char *) = NULL;
    if (nschedules) {
        *(void **)&use = dlsym(RTLD_DEFAULT, "netweave_mpi_use");
        if (!use) return fail("--schedule needs netweave's MPI library preloaded (netweave mpi bench does that)");
        use(NULL); /* the native collective first, whatever NETWEAVE_SCHEDULE says */
    }
    char host[MPI_MAX_PROCESSOR_NAME];
    int hostlen;
    MPI_Get_processor_name(host, &hostlen);
    if (rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int vlen;
        MPI_Get_library_version(version, &vlen);
        char *nl = strchr(version, '\n');
        if (nl) *nl = 0;
        for (char *ch = version; *ch; ch++) /* keep the JSON string valid */
            if ((unsigned char)*ch < 32 || *ch == '"' || *ch == '\\') *ch = ' ';
        printf("{\"collective\": \"%s\", \"ranks\": %d, \"reps\": %ld, \"warmup\": %ld, \"library\": \"%s\", \"results\": ",
               name, n, reps, warmup, version);
    }
    int rc = measure(c, rank, n, sizes, reps, warmup, check);
    if (rc) return rc;
    if (rank == 0) printf(", \"schedules\": [");
    int (*ran)(const char *, long *, long *, const char **) = NULL;
    if (use) *(void **)&ran = dlsym(RTLD_DEFAULT, "netweave_mpi_ran");
    for (int k = 0; k < nschedules; k++) {
        use(strcmp(schedules[k], "native") ? schedules[k] : NULL);
        if (rank == 0) {
            printf("%s{\"schedule\": ", k ? ", " : "");
            json_string(schedules[k]);
            printf(", \"results\": ");
        }
        if ((rc = measure(c, rank, n, sizes, reps, warmup, check))) return rc;
        long scheduled = 0, native = 0;
        const char *why = "";
        if (rank == 0 && ran && strcmp(schedules[k], "native") && !ran(name, &scheduled, &native, &why)) {
            printf(", \"ran\": {\"schedule\": %ld, \"native\": %ld, \"why\": ", scheduled, native);
            json_string(why);
            printf("}");
        }
        if (rank == 0) printf("}");
    }
    if (use) use(NULL);
    if (rank == 0) printf("]}\n");
    MPI_Finalize();
    return 0;
}
