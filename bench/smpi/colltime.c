/* One collective's simulated time under SMPI, for bench/smpi_crosscheck.py.
 *
 *     smpicc -O2 bench/smpi/colltime.c -o colltime
 *     smpirun -np P -platform platform.xml -hostfile hosts \
 *         --cfg=smpi/allreduce:lr ./colltime allreduce 65536 1048576
 *
 * For every size (bytes, the benchmark's convention: the vector for
 * allreduce and bcast, the gathered total for allgather, the whole send
 * buffer for alltoall) it prints one line
 * "COLLECTIVE BYTES SECONDS": the time from the call's start on all ranks
 * at once to the last rank's return, in simulated seconds, as
 * mpicoll.sim.simgrid predicts it (every rank starts at the same instant).
 * The start is aligned without a barrier's stagger: after a barrier the
 * ranks agree on an instant past every rank's exit (MPI_Allreduce of the
 * clock, plus 0.1 s) and sleep until it (SMPI's nanosleep advances the
 * simulated clock). SECONDS is max(end) - min(start) over ranks; a
 * warning goes to stderr if the starts differ by more than 1 ns.
 *
 * Buffers are SMPI_SHARED_MALLOC'ed (one copy for all ranks: 256 ranks of
 * 16 MiB fit), so the data is garbage; SMPI charges no simulated time for
 * the reductions. Data: float32 (MPI_FLOAT), sum, bcast and reductions
 * rooted at 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int call(const char *coll, void *in, void *out, long nbytes, int size)
{
    int count = (int)(nbytes / (long)sizeof(float));
    if (strcmp(coll, "allreduce") == 0)
        return MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (strcmp(coll, "bcast") == 0)
        return MPI_Bcast(out, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (strcmp(coll, "allgather") == 0)
        return MPI_Allgather(in, count / size, MPI_FLOAT, out, count / size,
                             MPI_FLOAT, MPI_COMM_WORLD);
    if (strcmp(coll, "alltoall") == 0)
        return MPI_Alltoall(in, count / size, MPI_FLOAT, out, count / size,
                            MPI_FLOAT, MPI_COMM_WORLD);
    return -1;
}

/* Sleep (in simulated time) until every rank is at the same instant. */
static void aligned_start(void)
{
    double now, latest;
    MPI_Barrier(MPI_COMM_WORLD);
    now = MPI_Wtime();
    MPI_Allreduce(&now, &latest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double wait = latest + 0.1 - MPI_Wtime();
    struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: %s allreduce|bcast|allgather|alltoall BYTES...\n",
                    argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 2; i < argc; i++) {
        long nbytes = atol(argv[i]);
        char *in = SMPI_SHARED_MALLOC(nbytes);
        char *out = SMPI_SHARED_MALLOC(nbytes);
        aligned_start();
        double start = MPI_Wtime();
        if (call(argv[1], in, out, nbytes, size) != MPI_SUCCESS) {
            if (rank == 0)
                fprintf(stderr, "%s: unknown collective %s\n", argv[0], argv[1]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        double end = MPI_Wtime(), first, last, latest_start;
        MPI_Reduce(&start, &first, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&start, &latest_start, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&end, &last, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            if (latest_start - first > 1e-9)
                fprintf(stderr, "%s: starts differ by %.3g s\n", argv[0],
                        latest_start - first);
            printf("%s %ld %.9e\n", argv[1], nbytes, last - first);
        }
        SMPI_SHARED_FREE(in);
        SMPI_SHARED_FREE(out);
    }
    MPI_Finalize();
    return 0;
}
