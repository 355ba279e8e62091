// The server's large RPC buffers (a request's receive buffer, a WRITE's
// decoded payload), for Ganesha's RPC library to allocate and free through
// (the adapter installs the hooks, adapter/rpc_buffers.c): page-aligned, so
// that a WRITE's payload meets the file's direct-I/O memory alignment and
// is written from where it lies, with no bounce copy; and kept for reuse,
// so that a request's buffers are not faulted in and zeroed again for every
// request (glibc gives freed arena memory back at once past its trim
// threshold, and refaults it on the next request).
//
// Where the payload lies decides the placement:
//  - start: the buffer starts on a page.  Ganesha 4.3 copies a WRITE's
//    data into a buffer of its own, the data's exact size: the data then
//    starts on a page.  These are glibc chunks (aligned_alloc), so a plain
//    free() of one elsewhere is harmless (it is glibc's again, and never
//    taken back here unless glibc's own size says it is large enough);
//  - end: the buffer ends on a page.  Ganesha 6.x and later leave a WRITE's
//    data in the receive buffer, at its end (an NFSv3 WRITE's data is the
//    last field of the request); a payload of whole 512-byte blocks then
//    starts on such a block.  Such a pointer lies inside a glibc chunk, so
//    only rpc_buffer_put may free it: use it only for buffers the RPC
//    library frees through its own hook.
//
// Memory: buffers of sizes from k_rpc_min to k_rpc_max, in 64 KiB classes;
// given back, a buffer waits for the next request of its class, at most
// k_rpc_cache_bytes of them in all (beyond, it goes back to glibc), and
// all of them go back when the server is idle (bounce_trim, heap_trim.h).
// What is in use is Ganesha's, as without the hooks.
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

struct io_uring;

namespace dcache::io {

// read: placed as start, for a READ's reply buffer (6.x: the FSAL's,
// given back through its release).  end and read buffers are the ones
// direct I/O uses: only they are registered with the rings (below), and
// they wait for reuse apart from the start ones.
enum class rpc_place : std::uint8_t { start, end, read };

inline constexpr std::size_t k_rpc_min = std::size_t{64} << 10;
inline constexpr std::size_t k_rpc_max = std::size_t{16} << 20;
inline constexpr std::size_t k_rpc_cache_bytes = std::size_t{64} << 20;

// size bytes placed as asked; nullptr when not served here (size outside
// [k_rpc_min, k_rpc_max], out of memory): the caller allocates as usual.
[[nodiscard]] void *rpc_buffer_get(std::size_t size, rpc_place place) noexcept;
// true: p was handed out by rpc_buffer_get and is taken back (kept for
// reuse or freed); false: not one of these, nothing done (nullptr too).
bool rpc_buffer_put(void *p) noexcept;
// The bytes p may hold if it is one of these (for a realloc), else 0.
[[nodiscard]] std::size_t rpc_buffer_size(const void *p) noexcept;
// Frees every buffer waiting for reuse; returns the bytes.  Also done by
// bounce_trim when the server goes idle.
std::size_t rpc_buffer_trim() noexcept;

// ---- registered with the io_uring rings --------------------------------
//
// Where every end and read buffer handed out comes back through
// rpc_buffer_put (Ganesha 6.x and later: the receive buffers through the
// RPC library's hooks, the READ buffers through the FSAL's release), those
// buffers can be registered with the rings: a direct step from or into
// one is then issued as READ_FIXED/WRITE_FIXED, and the kernel does not
// pin its pages for every request (gup_fast_fallback).  Each has one slot
// of k_rpc_slots, the same in every ring (a ring's slot base + it), from
// when it is made until it goes back to glibc; registration and release
// happen there and when a ring attaches, never per request.  Start
// buffers are never registered.  An end or read buffer handed back to
// glibc elsewhere (plain free()) would leave its pages registered in the
// rings while glibc gives its addresses to others: hence off until the
// caller turns it on, knowing that they all come back here.

inline constexpr unsigned k_rpc_slots = 256;

// On: end and read buffers made from now on get a slot and are registered
// with every ring attached.  Off: no new slots (those in use keep theirs
// until freed).
void rpc_buffers_register(bool on) noexcept;
// ring takes the pool's buffers in its slots [base, base + k_rpc_slots)
// (its sparse table must be that large): every buffer that has a slot is
// registered with it now, every new one when it is made.  detach: before
// the ring goes (its end drops the registrations).
void rpc_buffers_attach(io_uring *ring, unsigned base) noexcept;
void rpc_buffers_detach(io_uring *ring) noexcept;
// The index in ring's table of the registered buffer holding [p, p + len),
// or -1 (not one of the pool's, no slot, not registered with this ring).
[[nodiscard]] int rpc_buffer_index(io_uring *ring, const void *p, std::size_t len) noexcept;

struct rpc_buffer_stats {
	std::uint64_t gets = 0;		 // buffers handed out
	std::uint64_t reuses = 0;	 // of which were waiting for reuse
	std::size_t in_use = 0;		 // handed out, not yet given back
	std::size_t cached = 0;		 // waiting for reuse
	std::size_t slotted = 0;	 // holding a slot (registered with the rings attached)
	std::uint64_t registrations = 0; // buffers registered with a ring, ring by ring
};
[[nodiscard]] rpc_buffer_stats rpc_buffer_counts() noexcept;

} // namespace dcache::io
