// Setting up the io_uring backend: the checks that io_uring is there and
// usable (the sysctl, the features and opcodes the backend needs), each
// refusal with its reason for the log, then the ring and its completion
// thread.
#include "dcache_io/uring_backend.h"

#include "dcache_io/rpc_buffers.h"

#include <liburing.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <system_error>

namespace dcache::io {

int io_uring_disabled_sysctl() noexcept
{
	FILE *f = std::fopen("/proc/sys/kernel/io_uring_disabled", "re");
	if (!f)
		return -1;
	int v = -1;
	if (std::fscanf(f, "%d", &v) != 1)
		v = -1;
	std::fclose(f);
	return v;
}

uring_open_result make_uring_backend(unsigned depth) noexcept
{
	uring_open_result out;
	char why[256];
	if (depth == 0 || depth > uring_backend::k_max_depth) {
		std::snprintf(why, sizeof(why), "io_uring queue depth %u is not valid; allowed: 1..%u", depth,
			      uring_backend::k_max_depth);
		out.error = EINVAL;
		out.why = why;
		return out;
	}
	const int disabled = io_uring_disabled_sysctl();
	if (disabled == 2) {
		out.error = EPERM;
		out.why = "io_uring is disabled on this host (kernel.io_uring_disabled = 2)";
		return out;
	}
	try {
		std::unique_ptr<uring_backend> b(new uring_backend());
		b->_ring = std::make_unique<io_uring>();
		io_uring_params params{};
		// The reaper is the only submitter and is always about to enter
		// the kernel: task work needs no interrupt (5.19+; refused with
		// EINVAL before).
		params.flags = IORING_SETUP_COOP_TASKRUN;
		int rc = io_uring_queue_init_params(depth, b->_ring.get(), &params);
		if (rc == -EINVAL) {
			params = io_uring_params{};
			rc = io_uring_queue_init_params(depth, b->_ring.get(), &params);
		}
		if (rc < 0) {
			b->_ring.reset(); // never initialised: nothing to tear down
			out.error = -rc;
			switch (-rc) {
			case ENOSYS:
				std::snprintf(why, sizeof(why), "io_uring_setup: ENOSYS: the kernel has no io_uring");
				break;
			case EPERM:
			case EACCES:
				std::snprintf(
					why, sizeof(why),
					"io_uring_setup: %s: refused (kernel.io_uring_disabled = %d, or seccomp/LSM)",
					strerrorname_np(-rc), disabled);
				break;
			case ENOMEM:
				std::snprintf(
					why, sizeof(why),
					"io_uring_setup: ENOMEM for %u entries (RLIMIT_MEMLOCK on kernels < 5.12?)",
					depth);
				break;
			default: std::snprintf(why, sizeof(why), "io_uring_setup: %s", std::strerror(-rc));
			}
			out.why = why;
			return out;
		}
		if (!(params.features & IORING_FEAT_NODROP)) {
			out.error = EOPNOTSUPP;
			out.why = "io_uring lacks IORING_FEAT_NODROP (kernel < 5.5)";
			return out;
		}
		io_uring_probe *probe = io_uring_get_probe_ring(b->_ring.get());
		if (!probe) {
			out.error = EOPNOTSUPP;
			out.why = "io_uring has no opcode probe (kernel < 5.6)";
			return out;
		}
		static constexpr struct {
			int opcode;
			const char *name;
		} needed[] = {
			{IORING_OP_NOP, "NOP"},		{IORING_OP_READ, "READ"},
			{IORING_OP_READV, "READV"},	{IORING_OP_WRITEV, "WRITEV"},
			{IORING_OP_FSYNC, "FSYNC"},	{IORING_OP_SYNC_FILE_RANGE, "SYNC_FILE_RANGE"},
			{IORING_OP_FADVISE, "FADVISE"}, {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
		};
		for (const auto &n : needed) {
			if (!io_uring_opcode_supported(probe, n.opcode)) {
				io_uring_free_probe(probe);
				out.error = EOPNOTSUPP;
				std::snprintf(why, sizeof(why), "io_uring lacks IORING_OP_%s", n.name);
				out.why = why;
				return out;
			}
		}
		io_uring_free_probe(probe);
		// Registered bounce buffers where the kernel has a sparse table
		// (5.19); without, bounce buffers are pinned per request as
		// before.
		b->_fixed = fixed_buffers::make(b->_ring.get(), fixed_buffers::k_slots, b->_fixed_error);
		// ... and the server's RPC buffers where they are registered
		// (rpc_buffers.h): READs and WRITEs into and from them unpinned.
		if (b->_fixed)
			rpc_buffers_attach(b->_ring.get(), fixed_buffers::k_slots);
		// Blocking: some kernels (< 6.x) fail an io_uring read of an
		// O_NONBLOCK file with EAGAIN at once instead of waiting on its
		// poll queue.  Writers never block (the counter never nears
		// its 2^64 - 2 limit: the reaper's read resets it).
		b->_wake_fd = eventfd(0, EFD_CLOEXEC);
		if (b->_wake_fd < 0) {
			out.error = errno;
			std::snprintf(why, sizeof(why), "eventfd for the io_uring reaper: %s", std::strerror(errno));
			out.why = why;
			return out;
		}
		b->_depth = depth;
		b->_reaper = std::thread(&uring_backend::reaper_loop, b.get());
		b->_reaper_id = b->_reaper.get_id();
		// What ps and top show an operator: the completion threads.
		(void)pthread_setname_np(b->_reaper.native_handle(), "dcache-ring");
		out.backend = std::move(b);
		return out;
	} catch (const std::bad_alloc &) {
		out.error = ENOMEM;
		out.why = "out of memory creating the io_uring backend";
	} catch (const std::system_error &e) {
		out.error = e.code().value() ? e.code().value() : EAGAIN;
		out.why = std::string("cannot start the io_uring reaper thread: ") + e.what();
	}
	out.backend.reset();
	return out;
}

} // namespace dcache::io
