/* The load of scripts/bench-scale.sh: T threads, each calling getppid(424242, SEQ) for
 * SEQ = 1..N (getppid ignores its arguments; raw_syscalls:sys_enter records them), all
 * released at once. Prints "threads=T calls=TOTAL secs=S rate=CALLS_PER_S" (S: from the
 * release to the last thread's end). Build: gcc -static -O2 -pthread loadgen.c -o loadgen */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long calls;
static pthread_barrier_t start;

static void *run(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 1; i <= calls; i++)
        syscall(SYS_getppid, 424242L, i);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: loadgen THREADS CALLS_PER_THREAD\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    calls = atol(argv[2]);
    if (threads < 1 || calls < 1) {
        fprintf(stderr, "loadgen: THREADS and CALLS_PER_THREAD must be positive\n");
        return 2;
    }
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, run, NULL) != 0) {
            perror("loadgen: pthread_create");
            return 1;
        }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_barrier_wait(&start);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    long total = calls * threads;
    printf("threads=%d calls=%ld secs=%.3f rate=%.0f\n", threads, total, secs, total / secs);
    return 0;
}
