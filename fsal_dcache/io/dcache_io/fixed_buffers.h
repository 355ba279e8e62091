// The bounce buffers of one io_uring ring, registered with it, so that a
// direct step's copy is issued as READ_FIXED/WRITE_FIXED: the kernel pinned
// the buffer's pages once, at registration, and does not pin and unpin
// them for every request (gup_fast_fallback in a profile), nor fault or
// zero them (the buffer stays mapped and registered while it is reused).
//
// A sparse table of k_slots entries is registered with the ring when it
// is made (Linux 5.19), and k_rpc_slots more after them for the server's
// RPC buffers (rpc_buffers.h, rpc_buffers_attach).  A buffer is mapped
// and registered in a free slot the first time a size class needs one
// more, then kept: given back with
// put(), it serves the next request of its class, on any export of the
// ring.  How many exist is bounded like the process's pool
// (bounce_pool.h): by the requests holding a place, IO_Queue_Depth per
// export on the ring.  When the server goes idle (heap_trim.h) the free
// ones leave their slot and are unmapped.
//
// Where the kernel refuses (no sparse table, RLIMIT_MEMLOCK without
// CAP_IPC_LOCK), get() gives nothing and the caller takes a buffer of the
// process's pool, issued as before (pinned per request).
//
// Registration changes never touch a buffer in use: only free buffers
// leave their slot, and a slot is reused only after that (the kernel also
// keeps a replaced buffer's pages until the requests that use it end).
//
// Thread-safety: all members may be called from any thread.
#pragma once

#include "dcache_io/backend.h"
#include "dcache_io/bounce_pool.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

struct io_uring;

namespace dcache::io {

class fixed_buffers final : public trimmable {
public:
	static constexpr unsigned k_slots = 1024;

	// err: 0, or why the kernel refused the table (then nullptr).
	[[nodiscard]] static std::unique_ptr<fixed_buffers> make(io_uring *ring, unsigned slots, int &err) noexcept;
	// Unmaps every buffer (call before the ring goes: its end releases
	// the registrations).
	~fixed_buffers();
	fixed_buffers(const fixed_buffers &) = delete;
	fixed_buffers &operator=(const fixed_buffers &) = delete;

	// A registered buffer of at least len bytes (its index >= 0), or
	// data == nullptr: none to give (too large to keep, every slot used,
	// the kernel refused, no memory).
	[[nodiscard]] bounce_buffer get(std::size_t len) noexcept;
	// false: b is not one of ours (nothing done).
	bool put(const bounce_buffer &b) noexcept;
	// trimmable: the free buffers leave their slots and are unmapped.
	std::size_t trim() noexcept override;

	// ---- inspection (tests, diagnostics) ----
	[[nodiscard]] std::uint64_t registrations() const noexcept { return _registrations.load(); }
	[[nodiscard]] std::uint64_t reuses() const noexcept { return _reuses.load(); }
	[[nodiscard]] std::size_t mapped() const noexcept { return _mapped.load(); }
	// The errno of the registration the kernel refused (no more are
	// tried), 0 while none was.
	[[nodiscard]] int refused() const noexcept { return _refused.load(); }

private:
	struct entry {
		void *data = nullptr;
		int slot = -1;
	};
	explicit fixed_buffers(io_uring *ring) noexcept : _ring(ring) {}
	// Empties slot (free buffers only) and unmaps its buffer.
	void release(const entry &e, std::size_t size) noexcept;

	io_uring *const _ring;
	std::mutex _m;
	std::vector<int> _slots;				// free slots; guarded by _m
	std::array<std::vector<entry>, k_bounce_classes> _free; // guarded by _m
	std::atomic<std::uint64_t> _registrations{0};
	std::atomic<std::uint64_t> _reuses{0};
	std::atomic<std::size_t> _mapped{0};
	std::atomic<int> _refused{0};
};

} // namespace dcache::io
