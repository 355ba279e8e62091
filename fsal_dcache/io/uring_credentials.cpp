// The io_uring backend's credentials: the personalities a WRITE carries to
// the kernel's io-wq workers (registered from the caller's thread, with the
// client's identity), and the small cache of them by identity that spares a
// registration per request.
#include "dcache_io/uring_backend.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <new>
#include <vector>

namespace dcache::io {

// A personality id (1..USHRT_MAX) or -errno.
int uring_backend::register_personality() noexcept
{
	if (const int err = _fail_capture.load(std::memory_order_relaxed); err != 0)
		return -err;
	// From any thread: io_uring_register takes the ring's own lock in the
	// kernel and does not touch the SQ/CQ memory the reaper owns.
	const int id = io_uring_register_personality(_ring.get());
	if (id < 0)
		return id;
	if (id == 0 || id > 0xffff) {
		// Cannot happen (ids are 1..USHRT_MAX); 0 would read as "none".
		(void)io_uring_unregister_personality(_ring.get(), id);
		return -ERANGE;
	}
	_personalities.fetch_add(1, std::memory_order_relaxed);
	return id;
}

credentials_result uring_backend::capture_credentials() noexcept
{
	credentials_result out;
	const int id = register_personality();
	if (id < 0)
		out.error = -id;
	else
		out.creds = credentials(this, id);
	return out;
}

namespace {

bool same_identity(const std::vector<std::uint32_t> &key, const identity &who) noexcept
{
	return key.size() == who.ngroups + 2 && key[0] == who.uid && key[1] == who.gid &&
	       std::equal(key.begin() + 2, key.end(), who.groups);
}

} // namespace

credentials_result uring_backend::capture_credentials(const identity &who) noexcept
{
	credentials_result out;
	std::lock_guard lock(_id_mutex);
	for (cached_identity &c : _identities) {
		if (same_identity(c.key, who)) {
			++c.refs;
			c.used = ++_id_clock;
			out.creds = credentials(this, c.id);
			return out;
		}
	}
	const int id = register_personality();
	if (id < 0) {
		out.error = -id;
		return out;
	}
	out.creds = credentials(this, id);
	cached_identity *slot = nullptr;
	if (_identities.size() < k_identity_cache) {
		try {
			slot = &_identities.emplace_back();
		} catch (const std::bad_alloc &) {
			return out; // served uncached: unregistered when released
		}
	} else {
		for (cached_identity &c : _identities)
			if (c.refs == 0 && (slot == nullptr || c.used < slot->used))
				slot = &c;
		if (slot == nullptr)
			return out; // every cached identity in use: uncached
		if (slot->id != 0) {
			(void)io_uring_unregister_personality(_ring.get(), slot->id);
			_personalities.fetch_sub(1, std::memory_order_relaxed);
			slot->id = 0;
		}
	}
	try {
		slot->key.assign({who.uid, who.gid});
		slot->key.insert(slot->key.end(), who.groups, who.groups + who.ngroups);
	} catch (const std::bad_alloc &) {
		slot->key.clear(); // matches no identity; the slot is reused
		return out;
	}
	slot->id = id;
	slot->refs = 1;
	slot->used = ++_id_clock;
	return out;
}

void uring_backend::release_credentials(int id) noexcept
{
	{
		std::lock_guard lock(_id_mutex);
		for (cached_identity &c : _identities) {
			if (c.id == id && !c.key.empty()) {
				--c.refs; // stays registered for the next request
				return;
			}
		}
	}
	// Only ENXIO/EINVAL (an id we never had) can fail: nothing to undo.
	(void)io_uring_unregister_personality(_ring.get(), id);
	_personalities.fetch_sub(1, std::memory_order_relaxed);
}

} // namespace dcache::io
