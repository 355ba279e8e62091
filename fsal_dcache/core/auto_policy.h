// IO_Cache_Read / IO_Cache_Write = auto: the mode one READ or WRITE takes,
// and why.  One pure function of what is known of the request's file (its
// sequential run, whether that run re-reads data the export served before,
// how much of it), the request's size, the memory the page cache has to
// give and the settings; the planner then runs with the mode it gives as
// if the export had been set to it.  Table-tested (auto_policy_test.cpp).
// What it is fed is kept, bounded, and updated in one place
// (auto_state.h, auto_resolve).  No syscalls, no globals.  Thread-safe.
//
// The rules, in order (the first that applies decides):
//   small        a request under k_auto_small_io stays cached;
//   no_stream    so does one whose run had not moved Auto_Stream_Min_MiB
//                before it (random I/O, files no larger than that, the
//                start of every stream);
//   memory_free  a stream stays cached while the page cache can take it
//                without evicting anything used twice (free above the
//                reserve) and the run is no larger than what fits; a
//                WRITE stream so cached is written behind (each WRITE's
//                pages go to write-back as it is answered: auto_resolution
//                ::write_behind), so that it leaves clean pages, not GiBs
//                of dirty ones for a COMMIT; not a rewrite (below);
//                a WRITE stream only as Auto_Write_Spare_Memory allows;
//   free_reported  by default, where the machine reports its free memory
//                to a host (io::memory_state::reported), a WRITE stream
//                that memory_free would cache goes the stream's way:
//                there every page the page cache takes from free memory
//                costs a fault in the host (Auto_Write_Spare_Memory =
//                stream: `stream` instead, whatever the machine); and so
//                does the first READ run to read such a file back
//                (auto_file_view::past) if it begins while the export
//                serves a working set (a cached READ in the last
//                k_auto_working_set_ms): its data was never cached, and
//                the faults of caching it then take the CPU the working
//                set's clients wait for (begun on an export otherwise
//                idle, it is cached as memory_free, as a file is that is
//                written and then read to warm the cache; the next run
//                is a re-read like any other);
//   reused       a READ run that re-reads what the export's history
//                holds stays cached while the data fits the page cache (at
//                most half of what it could hold); a WRITE run over it is a
//                rewrite, which replaces the cached copy whole and gains
//                nothing from it: a stream like any other;
//   too_big      ... and goes the stream's way when it does not;
//   stream       every other stream: Auto_Read_Stream / Auto_Write_Stream.
//
// The stream's way for Auto_Write_Stream = direct_when_quiet: direct while
// the export's cached requests are quiet (none in flight, none in the last
// k_yield_quiet: yield_gate.h), dontcache while they are not.  Direct
// writes a stream with the least CPU per byte but at the device's rate,
// and the CPU its client's receive path then takes is what readers beside
// it wait for; dontcache writes it slower, at less cost to them.
#pragma once

#include "dcache/core.h"
#include "dcache_io/memory_signal.h"

#include <cstddef>
#include <cstdint>

namespace dcache::core {

// Numbered as the USDT probe reports them: a new reason goes last.
enum class auto_reason : std::uint8_t { small, no_stream, memory_free, reused, too_big, stream, free_reported };
inline constexpr std::size_t k_auto_reasons = 7;

[[nodiscard]] const char *auto_reason_name(auto_reason r) noexcept;
// Whether a request so decided belongs to a stream (memory_free, too_big,
// stream, free_reported: Auto_Stream_Yield_Ms makes those wait for the
// others).
[[nodiscard]] constexpr bool auto_is_stream(auto_reason r) noexcept
{
	return r == auto_reason::memory_free || r == auto_reason::too_big || r == auto_reason::stream ||
	       r == auto_reason::free_reported;
}

// Requests smaller than this stay cached: random small I/O is what the
// page cache is best at, and below it neither DONTCACHE nor O_DIRECT
// saves anything worth a syscall's cost (knfsd keeps unaligned I/O under
// 16 KiB cached; Linux clients send streams as rsize/wsize pieces, 1 MiB
// against Ganesha, and random reads as pages).
inline constexpr std::uint64_t k_auto_small_io = 64u << 10;

// What the page cache is taken to hold where no memory could be read.
inline constexpr std::uint64_t k_auto_unknown_capacity = 1ull << 30;

// What auto_state knows of the request's file.
struct auto_file_view {
	std::uint64_t run_bytes = 0; // bytes the request's run moved before it
	bool rereads = false;	     // the run began inside data the export's history holds
	std::uint64_t span = 0;	     // bytes of the file the history holds (its data served before)
	bool past = false;	     // a READ run reading back data written past the cache, beside a working set
	bool readback = false;	     // ... beside one or not (not a rule's: auto_resolve's)
};

struct auto_choice {
	dcache_mode mode = DCACHE_MODE_BUFFERED;
	auto_reason reason = auto_reason::small;
	[[nodiscard]] bool cached() const noexcept { return mode == DCACHE_MODE_BUFFERED; }
	friend bool operator==(const auto_choice &, const auto_choice &) = default;
};

// The page cache's size as the policy sees it: m.capacity, or
// k_auto_unknown_capacity where nothing could be read.
[[nodiscard]] std::uint64_t auto_capacity(const io::memory_state &m) noexcept;
// Free memory a READ stream may fill before it goes uncached: an eighth
// of the capacity, at least 64 MiB (the sample is up to 50 ms old: a
// stream of 1 GiB/s moves 50 MiB in that time).
[[nodiscard]] std::uint64_t auto_reserve(const io::memory_state &m) noexcept;
// The most data a re-read may bring back into the page cache: half its
// capacity (the other half for everything else it serves).
[[nodiscard]] std::uint64_t auto_fit(const io::memory_state &m) noexcept;

// The mode of one READ (write false) or WRITE of length bytes; quiet:
// whether the export's cached requests are quiet (above).
[[nodiscard]] auto_choice auto_decide(const dcache_settings &s, bool write, std::uint64_t length,
				      const auto_file_view &f, const io::memory_state &m, bool quiet) noexcept;

} // namespace dcache::core
