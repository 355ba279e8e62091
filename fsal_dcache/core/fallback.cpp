#include "fallback.h"

#include "export_state.h"
#include "log.h"
#include "settings.h"

#include <cerrno>
#include <cstring>

namespace dcache::core {

namespace {

enum class flag : std::uint8_t { any, with_dontcache, without_dontcache };

struct rule {
	attempt a;
	step_kind k; // ignored for read_nowait
	flag f;
	int err;
	fallback then;
};

constexpr rule k_rules[] = {
	{attempt::write, step_kind::direct, flag::with_dontcache, EOPNOTSUPP, fallback::retry_without_dontcache},
	{attempt::write, step_kind::direct, flag::any, EINVAL, fallback::through_page_cache},
	{attempt::write, step_kind::direct, flag::any, EIO, fallback::through_page_cache},
	{attempt::write, step_kind::direct, flag::any, ENOSPC, fallback::through_page_cache},
	{attempt::write, step_kind::direct, flag::any, EDQUOT, fallback::through_page_cache},
	{attempt::write, step_kind::direct, flag::any, EFBIG, fallback::through_page_cache},
	{attempt::write, step_kind::dontcache, flag::with_dontcache, EOPNOTSUPP, fallback::retry_without_dontcache},
	{attempt::read, step_kind::direct, flag::any, EINVAL, fallback::through_page_cache},
	{attempt::read, step_kind::direct, flag::any, EIO, fallback::through_page_cache},
	{attempt::read, step_kind::dontcache, flag::with_dontcache, EOPNOTSUPP, fallback::retry_without_dontcache},
	{attempt::read_nowait, step_kind::buffered, flag::without_dontcache, EOPNOTSUPP, fallback::no_nowait},
	{attempt::read_nowait, step_kind::buffered, flag::any, EINVAL, fallback::no_nowait},
};

bool flag_matches(flag f, int rwf) noexcept
{
	const bool dc = (rwf & RWF_DONTCACHE) != 0;
	return f == flag::any || (f == flag::with_dontcache) == dc;
}

} // namespace

const char *fallback_name(fallback f) noexcept
{
	switch (f) {
	case fallback::none: return "none";
	case fallback::retry_without_dontcache: return "retry_without_dontcache";
	case fallback::through_page_cache: return "through_page_cache";
	case fallback::no_nowait: return "no_nowait";
	}
	return "?";
}

fallback fallback_for(attempt a, step_kind k, int rwf, int err) noexcept
{
	if (err == 0)
		return fallback::none;
	for (const rule &r : k_rules)
		if (r.a == a && (a == attempt::read_nowait || r.k == k) && r.err == err && flag_matches(r.f, rwf))
			return r.then;
	return fallback::none;
}

step through_page_cache(const dcache_settings &s, attempt a, const step &st) noexcept
{
	step out = st;
	out.bounce = false;
	if (a == attempt::write) {
		out.kind = s.direct_misaligned_dontcache ? step_kind::dontcache : step_kind::buffered;
		out.writeback = out.kind == step_kind::buffered && is_direct_mode(s.io_cache_write);
	} else {
		out.kind = step_kind::dontcache;
		out.writeback = false;
	}
	return out;
}

void note_direct_refused(dcache_export &e, attempt a, int err, std::uint64_t offset, std::uint64_t length) noexcept
{
	const bool eio = err == EIO, room = err == ENOSPC || err == EDQUOT || err == EFBIG;
	e.stats.add(eio	   ? stat::fallback_direct_eio
		    : room ? stat::fallback_direct_nospace
			   : stat::fallback_direct_einval);
	if (first_time(e.logged, eio ? once::direct_eio : room ? once::direct_nospace : once::direct_einval))
		log_msg(DCACHE_LOG_WARN,
			"dcache %s: direct %s failed (%s) at offset %llu length %llu: reissued through the page cache%s",
			e.name, a == attempt::write ? "write" : "read", strerrorname_np(err),
			static_cast<unsigned long long>(offset), static_cast<unsigned long long>(length),
			eio    ? " (a failing device reports again at the sync or COMMIT)"
			: room ? ", which writes what fits; the WRITE that cannot make progress gets the error"
			       : "");
}

} // namespace dcache::core
