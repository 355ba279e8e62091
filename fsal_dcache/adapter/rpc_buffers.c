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
 * in the server's environment leaves Ganesha's allocator alone (for
 * comparison).
 */
#include "dcache_internal.h"

#include <dlfcn.h>
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
