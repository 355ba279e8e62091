// The bounce buffers of direct I/O: page-aligned memory mapped for the
// purpose and kept for reuse, never malloc's.
//
// Why not malloc: a freed 1 MiB chunk raises glibc's dynamic mmap
// threshold, after which Ganesha's own 1 MiB request buffers stop being
// mapped and unmapped per request and pile up in the per-thread arenas
// instead; and a fresh buffer is a page fault per 4 KiB.  Buffers here
// come in power-of-two sizes from 64 KiB to 32 MiB (only the pages a
// request touches are resident), are reused by the next request of the
// size, and are unmapped once the server goes idle (heap_trim.h).  Larger
// requests get a mapping of their own, unmapped at release.
//
// This pool serves requests that are not issued through an io_uring ring
// (the synchronous backend, a ring that cannot register memory); a ring
// keeps buffers of the same sizes registered with it (fixed_buffers.h),
// which are trimmed with these (a trimmable).
//
// How many exist at once is bounded by the requests holding a place
// (the core's request_op::admit): IO_Queue_Depth per export.
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dcache::io {

// len bytes (>= 1), page-aligned; nullptr when out of memory.  *reused
// (if given) says whether it was a buffer already mapped (no page faults).
[[nodiscard]] void *bounce_get(std::size_t len, bool *reused = nullptr) noexcept;
// Gives back what bounce_get(len) returned, with the same len.
void bounce_put(void *p, std::size_t len) noexcept;
// Unmaps every buffer not in use, here and in every trimmable; returns
// the bytes given back.
std::size_t bounce_trim() noexcept;
// Buffers mapped now, in use or free (tests).
[[nodiscard]] std::size_t bounce_mapped() noexcept;

// The size classes, shared with the registered buffers of the rings.
inline constexpr std::size_t k_bounce_min_class = std::size_t{64} << 10; // 64 KiB
inline constexpr std::size_t k_bounce_classes = 10;			 // 64 KiB .. 32 MiB
// The class of len, or k_bounce_classes when len is too big to keep.
[[nodiscard]] std::size_t bounce_class_of(std::size_t len) noexcept;
[[nodiscard]] constexpr std::size_t bounce_class_size(std::size_t c) noexcept
{
	return k_bounce_min_class << c;
}

// Other keepers of idle memory (a ring's registered buffers): trimmed by
// bounce_trim, that is when the server goes idle.  remove_trimmable
// waits for a trim in progress, so the object may go right after.
class trimmable {
public:
	// Gives back what is not in use; returns the bytes.
	virtual std::size_t trim() noexcept = 0;

protected:
	~trimmable() = default;
};
void add_trimmable(trimmable *t) noexcept; // without memory for the entry: never trimmed
void remove_trimmable(trimmable *t) noexcept;

} // namespace dcache::io
