/*
 * xfs_delalloc_repro: the syscalls DCACHE's direct mode used to issue,
 * narrowed to the two XFS failures they reach, without NFS.  One file,
 * two descriptors: fb (O_RDWR, buffered) and fd (O_RDWR|O_DIRECT), as the
 * plugin has them.  docs/xfs-delalloc-shutdown.md explains each step.
 *
 *   xfs_delalloc_repro [--written-back] CASE FILE
 *
 * CASE
 *   shutdown   shuts the filesystem down: "Corruption of in-memory data
 *              (0x8) detected at xfs_trans_mod_sb" (fs/xfs/xfs_trans.c:353)
 *   collision  an O_DIRECT READ fails with EIO and the kernel logs
 *              "Direct I/O collision with buffered writes"
 * --written-back   every cached write is followed by
 *              sync_file_range(SYNC_FILE_RANGE_WRITE) on its pages, as DCACHE
 *              does now: neither failure happens.
 *
 * FILE must be a new file on a scratch XFS (mkfs.xfs defaults, 4 KiB blocks,
 * 512-byte inodes).  Exit status 0 when every syscall succeeded, 1 when one
 * failed (it is printed), 2 on bad usage or setup.  Whether the filesystem
 * shut down is for the caller to read in the kernel log (run.sh does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif

#define PAGE 4096L

static int fb = -1, fd = -1, written_back, failed;
static char* cached_bytes;
static void* direct_bytes;

static void check(long rc, long want, const char* what, long off, long len) {
  if (rc == want) return;
  printf("  %s at %ld +%ld: %ld (%s)\n", what, off, len, rc, rc < 0 ? strerror(errno) : "short");
  failed = 1;
}

/* The direct middle of a WRITE: whole pages, O_DIRECT (DCACHE adds
 * RWF_DONTCACHE in case the filesystem falls back to buffered). */
static void direct_write(long page, long pages) {
  struct iovec v = {direct_bytes, (size_t)(pages * PAGE)};
  check(pwritev2(fd, &v, 1, page * PAGE, RWF_DONTCACHE), pages * PAGE, "O_DIRECT write", page * PAGE,
        pages * PAGE);
}

/* A WRITE's partial edge page, written cached (the boundary tracker holds
 * it for the neighbour); with --written-back, its write-back starts at once. */
static void cached_write(long off, long len) {
  struct iovec v = {cached_bytes, (size_t)len};
  check(pwritev2(fb, &v, 1, off, 0), len, "cached write", off, len);
  if (written_back) {
    const long lo = off / PAGE * PAGE, hi = (off + len + PAGE - 1) / PAGE * PAGE;
    check(sync_file_range(fb, lo, hi - lo, SYNC_FILE_RANGE_WRITE), 0, "sync_file_range(WRITE)", lo, hi - lo);
  }
}

/* A held page let go: written back and dropped through the O_DIRECT descriptor. */
static void release(long page) {
  check(sync_file_range(fd, page * PAGE, PAGE,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER),
        0, "release: sync_file_range", page * PAGE, PAGE);
  check(posix_fadvise(fd, page * PAGE, PAGE, POSIX_FADV_DONTNEED), 0, "release: fadvise(DONTNEED)",
        page * PAGE, PAGE);
}

/*
 * A file with holes, then an appending client: 11 one-page WRITEs at every
 * other page (11 extents: one short of the 12 the inode's extent list holds
 * on this kernel, whose new files reserve room for extended attributes); a
 * small WRITE past EOF, inside page 32 (delayed allocation for it and, the
 * file being over 64 KiB, speculative preallocation to page 47, with an
 * indirect-block reservation of 5); a 2-page aligned WRITE behind it (its
 * direct middle splits the delalloc extent: the rest, pages 35-47, gets a
 * fresh reservation of 5); then 5 aligned appends, each beginning where the
 * delalloc extent does.  Each append's allocation makes a 13th extent, the
 * extent list becomes a btree whose block is taken from the rest's
 * reservation, and its completion merges the new extent back (12 extents,
 * no btree): 5 4 3 2 1 0.  Then a cached 100-byte WRITE at EOF and its
 * release: write-back converts the last delalloc page, needs the btree
 * again, and takes its block from a transaction that reserved none.
 */
static void shutdown_case(void) {
  for (long i = 0; i < 11; ++i) direct_write(2 * i, 1);
  cached_write(32 * PAGE, 884);
  direct_write(33, 2);
  const long appends[][2] = {{35, 2}, {37, 2}, {39, 2}, {41, 2}, {43, 4}};
  for (size_t i = 0; i < sizeof(appends) / sizeof(appends[0]); ++i)
    direct_write(appends[i][0], appends[i][1]);
  cached_write(47 * PAGE, 100);
  release(47);
}

/*
 * An aligned file of 35 pages; a small WRITE at EOF, cached (delayed
 * allocation for page 35 plus speculative preallocation past it); an
 * aligned WRITE of the next 6 pages (O_DIRECT into the preallocation:
 * converts that part only); an O_DIRECT READ across the new EOF: its flush
 * writes nothing back there (no pages), the preallocation left past EOF is
 * still delayed allocation, and iomap answers the READ with EIO.
 */
static void collision_case(void) {
  direct_write(0, 35);
  cached_write(35 * PAGE, 884);
  direct_write(36, 6);
  struct iovec v = {direct_bytes, 8 * PAGE};
  const long n = preadv2(fd, &v, 1, 36 * PAGE, 0);
  check(n, 6 * PAGE, "O_DIRECT read across EOF", 36 * PAGE, 8 * PAGE);
}

int main(int argc, char** argv) {
  int i = 1;
  if (i < argc && strcmp(argv[i], "--written-back") == 0) {
    written_back = 1;
    ++i;
  }
  if (argc - i != 2 || (strcmp(argv[i], "shutdown") != 0 && strcmp(argv[i], "collision") != 0)) {
    fprintf(stderr, "usage: %s [--written-back] shutdown|collision FILE\n", argv[0]);
    return 2;
  }
  const char *which = argv[i], *path = argv[i + 1];
  fb = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  fd = fb < 0 ? -1 : open(path, O_RDWR | O_DIRECT);
  cached_bytes = malloc(1 << 20);
  if (fb < 0 || fd < 0 || cached_bytes == NULL || posix_memalign(&direct_bytes, PAGE, 1 << 20) != 0) {
    fprintf(stderr, "%s: cannot set up %s: %s\n", argv[0], path, strerror(errno));
    return 2;
  }
  memset(cached_bytes, 'c', 1 << 20);
  memset(direct_bytes, 'd', 1 << 20);
  printf("%s%s on %s\n", which, written_back ? " (cached writes written back at once)" : "", path);
  if (strcmp(which, "shutdown") == 0)
    shutdown_case();
  else
    collision_case();
  close(fd);
  close(fb);
  return failed;
}
