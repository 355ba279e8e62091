// Where one step of a request runs: the rules of docs/configuration.md
// ("Where a step runs", 1, 3 and 4; rule 2, the cached-read try, is the
// READ's plan) as one pure function of what is known when the step is
// about to be issued.  drive() (request_op.cpp) is a switch on its answer.
#pragma once

#include <cstdint>

namespace dcache::core {

enum class placement : std::uint8_t {
	here,	       // blocking on this thread, as the request was set up to run
	in_caller,     // rule 1: a plain syscall on the worker thread (a cached WRITE piece)
	blocking_slot, // rule 3: a plain syscall on the worker thread if one of the
	// export's IO_Blocking_Max slots is free, else the ring
	ring, // rule 4: submitted; the completion thread drives the rest
};

// What placement reads, named.
struct step_facts {
	bool request_blocking = false; // the request runs on its thread throughout
				       // (no descriptor or credentials to carry)
	bool on_caller = false;	       // this thread started the request
	bool cached_write = false;     // the step is a WRITE's cached piece
	bool split_write = false;      // the step belongs to a split (misaligned) WRITE
	bool registered_read = false;  // a direct READ into a buffer the ring has registered
	// The backend's traits.
	bool completes_inline = false;	// synchronous: every step runs where submitted
	bool cached_in_caller = false;	// cached WRITE pieces go in the caller (io_uring)
	std::uint32_t blocking_max = 0; // IO_Blocking_Max
};

[[nodiscard]] placement place(const step_facts &f) noexcept;

} // namespace dcache::core
