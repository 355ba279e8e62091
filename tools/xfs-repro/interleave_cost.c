/*
 * interleave_cost: what the kernel alone spends on the syscalls of
 * misaligned records, without NFS or Ganesha: the benchmark's interleave
 * workload (47008-byte records into one file, record i written by thread
 * i % THREADS) issued the way plain VFS issues it and the way DCACHE's
 * direct mode does (docs/results/2026-12-03-interleave.md).
 *
 *   interleave_cost MODE THREADS RECORDS FILE
 *
 * MODE
 *   buffered   one cached pwrite per record (VFS)
 *   split      DCACHE direct with boundary tracking: each cached edge
 *              written and written back at once (sync_file_range WRITE:
 *              no delayed allocation next to O_DIRECT,
 *              docs/xfs-delalloc-shutdown.md), the aligned middle with
 *              O_DIRECT, and a boundary page written back, waited for and
 *              dropped once both of its records have written it
 *   prealloc   split, but the record's pages allocated first with
 *              fallocate(FALLOC_FL_KEEP_SIZE) instead of the edges'
 *              write-back (no delayed allocation either)
 *   serial     split, each record's syscalls under one mutex per file
 *
 * Every mode ends with fsync.  Prints MiB/s, this process's CPU (user +
 * system) and the whole machine's (/proc/stat: kernel threads included,
 * which write back and complete I/O), both in seconds per GiB.  FILE is
 * created (truncated) and left behind; put it on a scratch XFS.  Exit
 * status 1 when a syscall failed (it is printed), 2 on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096L
#define RECORD 47008L
#define MAX_THREADS 256

enum mode { BUFFERED, SPLIT, PREALLOC, SERIAL };

static enum mode mode;
static long threads, records;
static int fb = -1, fd = -1;
static char* data;
static atomic_int* halves; /* per page: records that have written it */
static atomic_int failed;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;

/* x rounded up to a page boundary */
static long page_up(long x) {
  return (x + PAGE - 1) / PAGE * PAGE;
}

static void check(long got, long want, const char* what, long off) {
  if (got == want) return;
  fprintf(stderr, "interleave_cost: %s at %ld: %s\n", what, off, got < 0 ? strerror(errno) : "short");
  atomic_store(&failed, 1);
}

/* A boundary page both records have written: out of the page cache. */
static void release(long page) {
  check(sync_file_range(fb, page * PAGE, PAGE,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER),
        0, "sync_file_range", page * PAGE);
  check(posix_fadvise(fb, page * PAGE, PAGE, POSIX_FADV_DONTNEED), 0, "posix_fadvise", page * PAGE);
}

static void edge(long off, long len, long page) {
  check(pwrite(fb, data, (size_t)len, off), len, "pwrite", off);
  if (mode != PREALLOC)
    check(sync_file_range(fb, page * PAGE, PAGE, SYNC_FILE_RANGE_WRITE), 0, "sync_file_range", off);
}

static void split(long off) {
  const long end = off + RECORD;
  const long head_page = off / PAGE, head_end = page_up(off);
  const long tail_page = end / PAGE, tail_start = tail_page * PAGE;
  const int has_head = head_end > off, has_tail = end > tail_start;

  if (mode == SERIAL) pthread_mutex_lock(&file_lock);
  if (mode == PREALLOC) {
    check(fallocate(fb, FALLOC_FL_KEEP_SIZE, head_page * PAGE, page_up(end) - head_page * PAGE), 0,
          "fallocate", off);
  }
  if (has_head) edge(off, head_end - off, head_page);
  if (has_tail) edge(tail_start, end - tail_start, tail_page);
  if (tail_start > head_end)
    check(pwrite(fd, data, (size_t)(tail_start - head_end), head_end), tail_start - head_end,
          "O_DIRECT pwrite", head_end);
  if (has_head && atomic_fetch_add(&halves[head_page], 1) == 1) release(head_page);
  if (has_tail && atomic_fetch_add(&halves[tail_page], 1) == 1) release(tail_page);
  if (mode == SERIAL) pthread_mutex_unlock(&file_lock);
}

static void* writer(void* arg) {
  for (long i = (long)(intptr_t)arg; i < records && !atomic_load(&failed); i += threads) {
    if (mode == BUFFERED)
      check(pwrite(fb, data, RECORD, i * RECORD), RECORD, "pwrite", i * RECORD);
    else
      split(i * RECORD);
  }
  return NULL;
}

/* The machine's busy time so far; exits when /proc/stat cannot be read. */
static double busy_seconds(void) {
  unsigned long long user, nice, sys, idle, iowait, irq, softirq;
  FILE* f = fopen("/proc/stat", "r");
  const int got = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iowait,
                             &irq, &softirq)
                    : 0;
  if (f) fclose(f);
  if (got != 7) {
    fprintf(stderr, "interleave_cost: cannot read the CPU times in /proc/stat\n");
    exit(2);
  }
  return (double)(user + nice + sys + irq + softirq) / (double)sysconf(_SC_CLK_TCK);
}

static double process_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char** argv) {
  static const char* const names[] = {"buffered", "split", "prealloc", "serial"};
  int m = -1;
  for (int i = 0; argc == 5 && i < 4; i++)
    if (strcmp(argv[1], names[i]) == 0) m = i;
  if (m < 0 || (threads = atol(argv[2])) < 1 || threads > MAX_THREADS || (records = atol(argv[3])) < 1) {
    fprintf(stderr, "usage: %s buffered|split|prealloc|serial THREADS(1-%d) RECORDS FILE\n", argv[0],
            MAX_THREADS);
    return 2;
  }
  mode = (enum mode)m;
  fb = open(argv[4], O_RDWR | O_CREAT | O_TRUNC, 0644);
  fd = open(argv[4], O_RDWR | O_DIRECT);
  halves = calloc((size_t)(records * RECORD / PAGE + 2), sizeof(*halves));
  if (fb < 0 || fd < 0 || !halves || posix_memalign((void**)&data, PAGE, RECORD + PAGE) != 0) {
    fprintf(stderr, "interleave_cost: cannot set up %s: %s\n", argv[4], strerror(errno));
    return 2;
  }
  memset(data, 'x', RECORD + PAGE);

  struct timespec t0, t1;
  const double busy0 = busy_seconds();
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t tid[MAX_THREADS];
  for (long t = 0; t < threads; t++) pthread_create(&tid[t], NULL, writer, (void*)(intptr_t)t);
  for (long t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  check(fsync(fb), 0, "fsync", 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double busy = busy_seconds() - busy0;

  const double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  const double gib = (double)(records * RECORD) / (1 << 30);
  printf("%s threads %ld: %.0f MiB/s, process CPU %.2f s/GiB, machine CPU %.2f s/GiB\n", names[m], threads,
         gib * 1024 / wall, process_seconds() / gib, busy / gib);
  return atomic_load(&failed) ? 1 : 0;
}
