/*
 * The server's large RPC buffers, page-aligned and kept for reuse.
 *
 * Ganesha's RPC library (ntirpc) allocates and frees every buffer through
 * the functions in __ntirpc_pkg_params, which Ganesha sets to its own
 * allocator at start: a request's receive buffer (xdr_ioq_uv_create, one
 * per record fragment) and, in 4.3, the buffer a WRITE's data is copied
 * into (xdr_bytes).  From glibc these come 16 bytes past a page: a WRITE's
 * payload never meets the 512-byte memory alignment O_DIRECT needs on
 * virtio and loop devices, so a direct WRITE went through a bounce copy;
 * and they are given back to the kernel and faulted in again request after
 * request.  The module puts its functions in front of Ganesha's: buffers
 * of DCACHE_RPC_BUFFER_MIN bytes and more come from the core's pool
 * (io/dcache_io/rpc_buffers.h), placed so that a WRITE's payload starts on
 * a page (where it lies depends on the release:
 * DCACHE_WRITE_DATA_IN_RECV_BUFFER), everything else goes to Ganesha's.
 *
 * Installed when the module loads, removed when it unloads (Ganesha stops
 * its RPC service before it unloads modules).  A buffer handed out before
 * is still recognised by the pool afterwards (a START buffer is an
 * ordinary glibc chunk; an END one is only made for ntirpc's receive
 * buffers, which ntirpc frees through the same table).  DCACHE_RPC_BUFFERS=0
 * in the server's environment leaves Ganesha's allocator and glibc's
 * thresholds (below) alone (for comparison).
 */
#include "dcache_internal.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <rpc/types.h>

static tirpc_pkg_params *rpc_params; /* ntirpc's, when ours are in */
static tirpc_pkg_params rpc_saved;   /* Ganesha's functions */

/* Where the payload of a WRITE lies in a buffer the library asks for. */
static enum dcache_rpc_place place_of(const char *function)
{
#if DCACHE_WRITE_DATA_IN_RECV_BUFFER
	/* The receive buffer: ends on a page, so does an NFSv3 WRITE's data. */
	if (function != NULL && strcmp(function, "xdr_ioq_uv_create") == 0)
		return DCACHE_RPC_END;
#else
	(void)function;
#endif
	return DCACHE_RPC_START;
}

static void *rpc_malloc(size_t size, const char *file, int line,
			const char *function)
{
	if (size >= DCACHE_RPC_BUFFER_MIN) {
		void *p = dcache_rpc_buffer_get(size, place_of(function));

		if (p != NULL)
			return p;
	}
	return rpc_saved.malloc_(size, file, line, function);
}

static void rpc_free_size(void *p, size_t n)
{
	/* Ours are freed with their size (free_buffer, xdr_bytes_free);
	 * 0 is "unknown". */
	if ((n == 0 || n >= DCACHE_RPC_BUFFER_MIN) && dcache_rpc_buffer_put(p))
		return;
	rpc_saved.free_size_(p, n);
}

static void *rpc_realloc(void *p, size_t size, const char *file, int line,
			 const char *function)
{
	size_t have = dcache_rpc_buffer_size(p);
	void *q;

	if (have == 0)
		return rpc_saved.realloc_(p, size, file, line, function);
	/* Ganesha's allocator aborts rather than return NULL */
	q = rpc_malloc(size, file, line, function);
	memcpy(q, p, have < size ? have : size);
	(void)dcache_rpc_buffer_put(p);
	return q;
}

/*
 * Ganesha 4.3 allocates an NFSv3 READ's reply buffer for every READ
 * (gsh_malloc, nfs3_read.c) and frees it with free() after the reply: the
 * FSAL cannot supply it (6.x asks: fso_allocate_own_read_buffer, where
 * DCACHE gives one of the pool's).  With glibc's dynamic thresholds a
 * block of 1 MiB is mapped for the request and unmapped after it, or
 * served from an arena that gives its free top back past twice the last
 * such block: the next READ's buffer is faulted in and zeroed again, and
 * a direct READ's pinning of it does that page by page (gup_fast_fallback,
 * clear_page_erms: most of a direct READ stream's CPU).  Fixed thresholds
 * keep these buffers in the arenas: blocks under DCACHE_ARENA_MAX come
 * from them, and an arena keeps up to DCACHE_ARENA_KEEP of free memory at
 * its top while the server is busy; DCACHE's idle trim (heap_trim.h) gives
 * it all back when the server is quiet.
 */
#if !DCACHE_FSAL_ALLOCATES_READ_BUFFER
/* READs up to 4 MiB: a page-aligned replacement (file.c, read_buffer)
 * takes a page and glibc's header more than the READ */
#define DCACHE_ARENA_MAX ((4 << 20) + (64 << 10))
#define DCACHE_ARENA_KEEP (4 << 20)
static bool arena_thresholds;
#endif

static void keep_read_buffers(void)
{
#if !DCACHE_FSAL_ALLOCATES_READ_BUFFER
	bool mmap_set = mallopt(M_MMAP_THRESHOLD, DCACHE_ARENA_MAX) == 1;
	bool trim_set = mallopt(M_TRIM_THRESHOLD, DCACHE_ARENA_KEEP) == 1;

	arena_thresholds = mmap_set && trim_set;
#endif
}

/*
 * Where the buffers direct I/O uses come back only through the pool (6.x:
 * the receive buffers through the table below, the READ buffers through
 * the FSAL's iov_release, file.c), those are registered with the io_uring
 * rings: a direct step from or into one is a READ_FIXED or WRITE_FIXED,
 * with no page pinning per request.  On 4.3 a READ's buffer is Ganesha's
 * and a WRITE's copy could be freed by a plain free(): not registered.
 * DCACHE_RPC_FIXED=0 leaves them unregistered (for comparison).
 */
static bool rings_registered;

static void register_with_rings(void)
{
#if DCACHE_FSAL_ALLOCATES_READ_BUFFER && DCACHE_WRITE_DATA_IN_RECV_BUFFER
	const char *off = getenv("DCACHE_RPC_FIXED");

	if (off != NULL && strcmp(off, "0") == 0)
		return;
	dcache_rpc_buffers_register(true);
	rings_registered = true;
#endif
}

const char *dcache_rpc_registered(void)
{
	return rings_registered
		       ? "registered with the io_uring rings (no pinning per direct step)"
		       : "not registered with the rings";
}

const char *dcache_rpc_read_buffers(void)
{
#if DCACHE_FSAL_ALLOCATES_READ_BUFFER
	return "the pool's (Ganesha asks the FSAL for them)";
#else
	return arena_thresholds
		       ? "Ganesha's, kept in glibc's arenas between READs (up to 4 MiB each, 4 MiB free per arena)"
		       : "Ganesha's, under glibc's dynamic thresholds";
#endif
}

void dcache_rpc_buffers_install(void)
{
	const char *off = getenv("DCACHE_RPC_BUFFERS");
	tirpc_pkg_params *params;

	if (off != NULL && strcmp(off, "0") == 0)
		return;
	params = dlsym(RTLD_DEFAULT, "__ntirpc_pkg_params");
	if (params == NULL || params->malloc_ == NULL ||
	    params->free_size_ == NULL || params->realloc_ == NULL)
		return; /* not in a server (dcache-check), or not set up yet */
	keep_read_buffers();
	register_with_rings();
	rpc_saved = *params;
	rpc_params = params;
	__atomic_store_n(&params->realloc_, rpc_realloc, __ATOMIC_RELEASE);
	__atomic_store_n(&params->free_size_, rpc_free_size, __ATOMIC_RELEASE);
	__atomic_store_n(&params->malloc_, rpc_malloc, __ATOMIC_RELEASE);
}

bool dcache_rpc_buffers_installed(void)
{
	return rpc_params != NULL;
}

void dcache_rpc_buffers_remove(void)
{
	if (rpc_params == NULL)
		return;
	dcache_rpc_buffers_register(false);
	rings_registered = false;
	__atomic_store_n(&rpc_params->malloc_, rpc_saved.malloc_,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&rpc_params->realloc_, rpc_saved.realloc_,
			 __ATOMIC_RELEASE);
	/* Buffers still out come back through Ganesha's free: START ones
	 * are glibc's; END ones are receive buffers, all returned once the
	 * RPC service stopped. */
	__atomic_store_n(&rpc_params->free_size_, rpc_saved.free_size_,
			 __ATOMIC_RELEASE);
	rpc_params = NULL;
}
