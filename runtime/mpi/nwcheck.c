/* nwcheck: checks that a collective returns bit-identical results with and without netweave's
 * library, on random data, for several datatypes and counts, on MPI_COMM_WORLD and on a split
 * communicator, with MPI_IN_PLACE where MPI allows it.
 *
 *   nwcheck --collective alltoall|allgather|gather [--counts 0,1,7,1000] [--root R]
 *           [--types byte,int,double,contig,vector] [--split] [--inter] [--in-place] [--mixed] [--errors-return] [--seed S]
 *
 * `vector` is a strided, non-contiguous type (2 ints, stride 2); --inter also runs all-to-all
 * and allgather on an inter-communicator joining the two halves of the split. --mixed gives
 * ranks different but matching layouts, as MPI allows: with `vector`, even ranks pass twice the
 * count of MPI_INT instead (the same type signature, contiguous), so a gather's root may take its
 * own block in place while the others send a strided vector. --errors-return sets
 * MPI_ERRORS_RETURN on MPI_COMM_WORLD (communicators made from it inherit it): a collective that
 * returns an error ends the checks, rank 0 adds "errors" and the first "error" string to its
 * line, and the exit status is 4.
 *
 * Each case calls MPI_<collective> (which the preloaded library may run with a schedule) and
 * PMPI_<collective> (always the MPI library's own) on the same random input and compares every
 * byte. Rank 0 prints one JSON line {"cases": n, "mismatches": m}; the exit status is 1 when any
 * result differs, naming the first difference on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLTOALL, ALLGATHER, GATHER };

static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int call(enum coll c, int pmpi, const void *s, int count, MPI_Datatype t, void *r, int root, MPI_Comm comm) {
    switch (c) {
    case ALLTOALL: return (pmpi ? PMPI_Alltoall : MPI_Alltoall)(s, count, t, r, count, t, comm);
    case ALLGATHER: return (pmpi ? PMPI_Allgather : MPI_Allgather)(s, count, t, r, count, t, comm);
    default: return (pmpi ? PMPI_Gather : MPI_Gather)(s, count, t, r, count, t, root, comm);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int wrank;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    enum coll c = ALLTOALL;
    char counts[256] = "0,1,7,1000";
    int root = 0, split = 0, in_place = 0, inter = 0, mixed = 0, errors_return = 0;
    char type_list[64] = "byte,int,double,contig";
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--split")) split = 1;
        else if (!strcmp(a, "--inter")) inter = split = 1;
        else if (!strcmp(a, "--in-place")) in_place = 1;
        else if (!strcmp(a, "--mixed")) mixed = 1;
        else if (!strcmp(a, "--errors-return")) errors_return = 1;
        else if (!strcmp(a, "--collective") && ++i) c = !strcmp(v, "allgather") ? ALLGATHER : !strcmp(v, "gather") ? GATHER : ALLTOALL;
        else if (!strcmp(a, "--counts") && ++i) snprintf(counts, sizeof counts, "%s", v);
        else if (!strcmp(a, "--root") && ++i) root = atoi(v);
        else if (!strcmp(a, "--types") && ++i) snprintf(type_list, sizeof type_list, "%s", v);
        else if (!strcmp(a, "--seed") && ++i) seed = strtoull(v, NULL, 10);
        else {
            if (!wrank) fprintf(stderr, "nwcheck: unknown option %s\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    if (errors_return) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    long errors = 0;
    char error[MPI_MAX_ERROR_STRING] = "";
    MPI_Datatype contig, vector;
    MPI_Type_contiguous(3, MPI_INT, &contig);
    MPI_Type_commit(&contig);
    MPI_Type_vector(2, 1, 2, MPI_INT, &vector);
    MPI_Type_commit(&vector);
    MPI_Datatype types[] = {MPI_BYTE, MPI_INT, MPI_DOUBLE, contig, vector};
    const char *type_names[] = {"MPI_BYTE", "MPI_INT", "MPI_DOUBLE", "contiguous(3, MPI_INT)", "vector(2, 1, 2, MPI_INT)"};
    const char *type_keys[] = {"byte", "int", "double", "contig", "vector"};
    int wsize;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm comms[3] = {MPI_COMM_WORLD, MPI_COMM_NULL, MPI_COMM_NULL};
    if (split) MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &comms[1]);
    if (inter && wsize > 1) /* the other half's leader is world rank 1 (for the evens) or 0 */
        MPI_Intercomm_create(comms[1], 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 77, &comms[2]);
    long cases = 0, bad = 0;
    for (int ci = 0; ci < 3; ci++) {
        MPI_Comm comm = comms[ci];
        if (comm == MPI_COMM_NULL) continue;
        int rank, n, is_inter = ci == 2;
        if (is_inter && c == GATHER) continue; /* rooted inter-communicator calls are not checked */
        MPI_Comm_rank(comm, &rank);
        if (is_inter) MPI_Comm_remote_size(comm, &n); /* blocks go to and come from the other group */
        else MPI_Comm_size(comm, &n);
        int r = root % n;
        for (int ti = 0; ti < 5; ti++) {
            if (!strstr(type_list, type_keys[ti])) continue;
            /* --mixed: the even ranks' vector is the same signature laid out contiguously */
            int as_ints = mixed && ti == 4 && rank % 2 == 0;
            MPI_Datatype type = as_ints ? MPI_INT : types[ti];
            MPI_Aint lb, extent;
            MPI_Type_get_extent(type, &lb, &extent);
            int size = (int)extent; /* buffers span the extent; a strided type leaves gaps */
            char list[256], *save = NULL;
            snprintf(list, sizeof list, "%s", counts);
            for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                long count = atol(tok) * (as_ints ? 2 : 1);
                size_t block = (size_t)count * (size_t)size, blocks = c == ALLTOALL ? (size_t)n : 1;
                size_t in_bytes = block * blocks, out_bytes = block * (size_t)n;
                unsigned char *in = malloc(in_bytes + 1), *a = malloc(out_bytes + 1), *b = malloc(out_bytes + 1);
                uint64_t s = seed * 1000003u + (uint64_t)rank * 7919u + (uint64_t)count * 31u + (uint64_t)ti;
                for (size_t i = 0; i < in_bytes; i++) in[i] = (unsigned char)next(&s);
                for (size_t i = 0; i < out_bytes; i++) a[i] = b[i] = (unsigned char)next(&s);
                for (int pass = 0; pass < 1 + (in_place && !is_inter); pass++) {
                    int inplace = pass == 1 && (c != GATHER || rank == r);
                    unsigned char *out[2] = {a, b};
                    for (int pm = 0; pm < 2; pm++) {
                        const void *send = in;
                        if (pass == 1) { /* MPI_IN_PLACE: the input sits where MPI says */
                            memset(out[pm], 0xee, out_bytes);
                            if (c == ALLTOALL) memcpy(out[pm], in, in_bytes);
                            else if (c == ALLGATHER || rank == r) memcpy(out[pm] + block * (size_t)(c == ALLGATHER ? rank : r), in, block);
                            if (inplace) send = MPI_IN_PLACE;
                        }
                        int rc = call(c, pm, send, (int)count, type, out[pm], r, comm);
                        if (rc != MPI_SUCCESS && !errors++) {
                            int len = 0;
                            MPI_Error_string(rc, error, &len);
                        }
                    }
                    if (errors) { /* every rank returned the error: stop alike */
                        free(in), free(a), free(b);
                        goto done;
                    }
                    cases++;
                    int differs = (c != GATHER || rank == r) && memcmp(a, b, out_bytes) != 0;
                    if (differs) {
                        size_t at = 0;
                        while (a[at] == b[at]) at++;
                        fprintf(stderr, "nwcheck: rank %d of %d: %s count %ld%s: byte %zu differs (block %zu)\n", rank, n,
                                type_names[ti], count, pass ? " in place" : "", at, block ? at / block : 0);
                    }
                    bad += differs;
                }
                free(in), free(a), free(b);
            }
        }
    }
done:;
    long total_bad = 0, total_errors = 0;
    PMPI_Allreduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (!wrank && !total_errors) printf("{\"cases\": %ld, \"mismatches\": %ld}\n", cases, total_bad);
    if (!wrank && total_errors) { /* the error string is netweave's own line: no quotes or backslashes in the tests */
        for (char *ch = error; *ch; ch++)
            if (*ch == '"' || *ch == '\\' || (unsigned char)*ch < 32) *ch = ' ';
        printf("{\"cases\": %ld, \"mismatches\": %ld, \"errors\": %ld, \"error\": \"%s\"}\n", cases, total_bad,
               total_errors, error);
    }
    if (comms[2] != MPI_COMM_NULL) MPI_Comm_free(&comms[2]);
    if (comms[1] != MPI_COMM_NULL) MPI_Comm_free(&comms[1]);
    MPI_Type_free(&contig);
    MPI_Type_free(&vector);
    MPI_Finalize();
    return total_errors ? 4 : total_bad ? 1 : 0;
}
