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
// How many exist at once is bounded by the requests holding a place
// (the core's request_op::admit): IO_Queue_Depth per export.
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dcache::io {

// len bytes (>= 1), page-aligned; nullptr when out of memory.
[[nodiscard]] void *bounce_get(std::size_t len) noexcept;
// Gives back what bounce_get(len) returned, with the same len.
void bounce_put(void *p, std::size_t len) noexcept;
// Unmaps every buffer not in use; returns the bytes given back.
std::size_t bounce_trim() noexcept;
// Buffers mapped now, in use or free (tests).
[[nodiscard]] std::size_t bounce_mapped() noexcept;

} // namespace dcache::io
