// What a request does when the kernel refuses one of its steps: the one
// table of fallbacks (the planner decided what to issue; this decides what
// to issue instead).  Pure; thread-safe.
//
//   step                    flags          errno                    then
//   WRITE direct            RWF_DONTCACHE  EOPNOTSUPP               retry the step without the flag
//   WRITE direct            any            EINVAL EIO ENOSPC        reissue through the page cache
//                                          EDQUOT EFBIG
//   WRITE dontcache         RWF_DONTCACHE  EOPNOTSUPP               retry without, then write back + drop
//   READ  direct            any            EINVAL EIO               reissue through the page cache
//   READ  dontcache         RWF_DONTCACHE  EOPNOTSUPP               retry without, then drop
//   READ  RWF_NOWAIT try    without DC     EOPNOTSUPP               the file has no RWF_NOWAIT
//   READ  RWF_NOWAIT try    any            EINVAL                   the file has no RWF_NOWAIT
//   anything else                                                   the request reports the error
//
// Why these: EOPNOTSUPP to RWF_DONTCACHE is a kernel before 6.14 or a
// filesystem without it (learned per file).  A direct EINVAL is alignment
// the probe promised but the filesystem refused; EIO is the kernel finding
// cached state in the way ("Direct I/O collision with buffered writes") -
// or a failing device, which the page cache's write-back reports again at
// the sync or COMMIT; ENOSPC, EDQUOT and EFBIG fail a direct write whole,
// where through the page cache what fits is written (a short write) and
// the WRITE after it gets the error, as VFS answers.
#pragma once

#include "dcache/core.h"
#include "planner.h"

#include <cstdint>

struct dcache_export;

namespace dcache::core {

enum class attempt : std::uint8_t { read, write, read_nowait };

enum class fallback : std::uint8_t {
	none, // success, or an error the request reports
	retry_without_dontcache,
	through_page_cache, // reissue_through_page_cache() says as what
	no_nowait,	    // learn it; the READ goes the ordinary way
};

const char *fallback_name(fallback f) noexcept;

// The table's answer for a step of kind k issued with rwf that ended in
// err (0: success).
[[nodiscard]] fallback fallback_for(attempt a, step_kind k, int rwf, int err) noexcept;

// The step a refused direct step becomes: a WRITE's goes the way its
// edges go (Direct_Misaligned_Dontcache), written back at once when
// buffered (a direct mode leaves no delayed allocation); a READ's goes
// DONTCACHE.
[[nodiscard]] step through_page_cache(const dcache_settings &s, attempt a, const step &st) noexcept;

// Counts and logs (once per export and reason) a direct step refused.
void note_direct_refused(dcache_export &e, attempt a, int err, std::uint64_t offset, std::uint64_t length) noexcept;

} // namespace dcache::core
