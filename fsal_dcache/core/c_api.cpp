// The extern "C" entry points of dcache/core.h (the settings parser's are
// in settings.cpp): each checks its arguments, catches everything (no
// exception may cross into Ganesha: every one is declared noexcept) and
// calls the C++ that does the work.
//
// No global has a non-trivial constructor or destructor (the module is
// loaded with RTLD_DEEPBIND and a static libstdc++, where static-object
// ordering is nobody's friend).
#include "dcache/core.h"

#include "auto_state.h"
#include "commit_op.h"
#include "dcache_io/backend_factory.h"
#include "dcache_io/rpc_buffers.h"
#include "export_state.h"
#include "file_state.h"
#include "log.h"
#include "metrics.h"
#include "page_cache.h"
#include "request_op.h"

#include <cstring>
#include <iterator>
#include <new>

using namespace dcache::core;

namespace {

// Takes the file's held boundary pages in [first, last] out of the tracker
// and releases them (write back, drop).  Pages with a writer in flight
// stay: that writer's completion decides.  all: also pages another
// request is releasing right now (the file is being freed).
void release_file_pages(dcache_file &file, std::uint64_t first, std::uint64_t last, boundary_tracker::reason why,
			bool all = false)
{
	boundary_tracker::release_list list;
	file.exp->boundary.take_file(file.boundary, first, last, why, list, all);
	side_work(*file.exp, side_work::when::now).release_boundary(list, &file, -1);
}

} // namespace

extern "C" {

struct dcache_export *dcache_export_new(const struct dcache_settings *settings, const char *name) noexcept
{
	// The backend is chosen here, once: IO_Backend and IO_Queue_Depth are
	// not live settings (see dcache_export_update).
	try {
		const dcache_settings s = settings ? *settings : dcache_settings_default();
		dcache::io::backend_choice chosen =
			dcache::io::open_backend(s.io_backend == DCACHE_IO_BACKEND_IO_URING);
		dcache_export *e = export_new_with_backend(&s, name, chosen.backend.get());
		if (e == nullptr)
			return nullptr;
		e->owned_backend = std::move(chosen.backend);
		if (chosen.uring_error != 0) {
			// The export still works, synchronously.
			e->stats.add(stat::fallback_no_io_uring);
			log_msg(DCACHE_LOG_WARN,
				"dcache %s: io_uring unavailable (%s: %s): using the synchronous backend", e->name,
				std::strerror(chosen.uring_error),
				chosen.why.empty() ? "no detail" : chosen.why.c_str());
		}
		return e;
	} catch (...) {
		return nullptr;
	}
}

void dcache_export_update(struct dcache_export *exp, const struct dcache_settings *settings) noexcept
{
	if (exp == nullptr || settings == nullptr)
		return;
	try {
		export_update(*exp, *settings);
	} catch (...) {
		// No memory for the snapshot: the settings in force stay.
		log_msg(DCACHE_LOG_WARN, "dcache %s: no memory for the new settings: the previous ones stay in force",
			exp->name);
	}
}

struct dcache_settings dcache_export_settings(const struct dcache_export *exp) noexcept
{
	return exp != nullptr ? exp->settings.current() : dcache_settings_default();
}

void dcache_export_put(struct dcache_export *exp) noexcept
{
	if (exp == nullptr)
		return;
	try {
		boundary_tracker::release_list list;
		exp->boundary.take_all(list);
		side_work(*exp, side_work::when::now).release_boundary(list, nullptr, -1);
	} catch (...) {
		// No memory for the list: the pages stay ordinary cached pages.
	}
	export_unref(exp);
}

bool dcache_export_handle_known(const struct dcache_export *exp, const void *key, size_t len) noexcept
{
	if (exp == nullptr || key == nullptr)
		return false;
	try {
		return exp->known.contains({static_cast<const char *>(key), len});
	} catch (...) {
		return false; // no memory: check again
	}
}

void dcache_export_handle_add(struct dcache_export *exp, const void *key, size_t len) noexcept
{
	if (exp == nullptr || key == nullptr)
		return;
	try {
		exp->known.add({static_cast<const char *>(key), len});
	} catch (...) {
		// not remembered: the handle is checked again on its next use
	}
}

struct dcache_file *dcache_file_new(struct dcache_export *exp) noexcept
{
	auto *f = new (std::nothrow) dcache_file;
	if (f != nullptr && exp != nullptr) {
		exp->refs.fetch_add(1, std::memory_order_relaxed);
		f->exp = exp;
	}
	return f;
}

void dcache_file_close(struct dcache_file *file) noexcept
{
	if (file == nullptr)
		return;
	try {
		// Held boundary pages first, through the O_DIRECT descriptor that
		// is about to close.
		if (file->exp != nullptr) {
			release_file_pages(*file, 0, UINT64_MAX, boundary_tracker::reason::close);
			// Another file's request may be releasing one of our pages
			// (age, ceiling) through our descriptor: let it finish first.
			file->exp->boundary.wait_idle(file->boundary);
		}
		// Drop the file's references: a descriptor with requests in
		// flight is closed by the last of them, without waiting here.
		fd_ref direct, buffered;
		{
			unique_lock lock(file->fd_mutex);
			direct = std::move(file->direct);
			buffered = std::move(file->buffered);
		}
	} catch (...) {
		// std::system_error from the lock: nothing sensible to do.
	}
}

void dcache_file_free(struct dcache_file *file) noexcept
{
	if (file == nullptr)
		return;
	dcache_file_close(file);
	if (file->exp != nullptr) {
		try {
			// No request runs on a file being freed, but another file's
			// request may be releasing one of its pages (age, ceiling).
			release_file_pages(*file, 0, UINT64_MAX, boundary_tracker::reason::close, true);
			file->exp->boundary.wait_idle(file->boundary);
		} catch (...) {
		}
	}
	export_unref(file->exp);
	delete file;
}

void dcache_file_truncated(struct dcache_file *file, uint64_t size) noexcept
{
	if (file == nullptr || file->exp == nullptr)
		return;
	try {
		// The page holding the new EOF and every page past it: the
		// truncate zeroed or removed what the tracker counted as written
		// there.
		release_file_pages(*file, size / k_page_size, UINT64_MAX, boundary_tracker::reason::truncate);
	} catch (...) {
		// No memory for the list: the pages age out.
	}
	auto_truncated(*file->exp, *file, size);
}

struct dcache_io_result dcache_read(struct dcache_export *exp, struct dcache_file *file,
				    const struct dcache_io *io) noexcept
{
	return run_blocking(exp, file, io, false);
}

struct dcache_io_result dcache_write(struct dcache_export *exp, struct dcache_file *file,
				     const struct dcache_io *io) noexcept
{
	return run_blocking(exp, file, io, true);
}

bool dcache_read_start(struct dcache_export *exp, struct dcache_file *file, const struct dcache_io *io,
		       dcache_io_done_fn done, void *ctx, struct dcache_io_result *inline_result) noexcept
{
	return start_request(exp, file, io, false, done, ctx, inline_result, false);
}

bool dcache_write_start(struct dcache_export *exp, struct dcache_file *file, const struct dcache_io *io,
			dcache_io_done_fn done, void *ctx, struct dcache_io_result *inline_result) noexcept
{
	return start_request(exp, file, io, true, done, ctx, inline_result, false);
}

const char *dcache_export_backend_name(const struct dcache_export *exp) noexcept
{
	return exp != nullptr && exp->backend != nullptr ? exp->backend->name() : "none";
}

int dcache_after_commit(struct dcache_export *exp, struct dcache_file *file, int fd, uint64_t offset, uint64_t len,
			uint64_t sync_ns) noexcept
{
	if (exp == nullptr || fd < 0)
		return EINVAL;
	return after_commit(*exp, file, fd, offset, len, sync_ns);
}

size_t dcache_stats_count(void) noexcept
{
	return k_stat_count + k_computed_count;
}

const char *dcache_stats_name(size_t index) noexcept
{
	if (index < k_stat_count)
		return k_stat_names[index];
	return index - k_stat_count < k_computed_count ? k_computed_names[index - k_stat_count] : nullptr;
}

struct dcache_latency dcache_stats_latency(const struct dcache_export *exp, enum dcache_op op) noexcept
{
	return exp != nullptr ? exp->stats.latency(op) : dcache_latency{};
}

const char *dcache_op_name(enum dcache_op op) noexcept
{
	switch (op) {
	case DCACHE_OP_READ: return "read";
	case DCACHE_OP_WRITE: return "write";
	case DCACHE_OP_COMMIT: return "commit";
	case DCACHE_OP_COUNT: break;
	}
	return "?";
}

uint64_t dcache_stats_value(const struct dcache_export *exp, size_t index) noexcept
{
	if (exp == nullptr)
		return 0;
	if (index < k_stat_count)
		return exp->stats.get(index);
	return index - k_stat_count < k_computed_count
		       ? computed_value(*exp, static_cast<computed>(index - k_stat_count))
		       : 0;
}

size_t dcache_stats_latency_buckets(const struct dcache_export *exp, enum dcache_op op, uint64_t *counts,
				    size_t n) noexcept
{
	for (std::size_t i = 0; i < n && i < k_latency_buckets; ++i)
		counts[i] = exp != nullptr ? exp->stats.latency_bucket_count(op, i) : 0;
	return k_latency_buckets;
}

size_t dcache_stats_latency_bounds(const uint64_t **bounds_us) noexcept
{
	if (bounds_us != nullptr)
		*bounds_us = k_latency_bounds_us;
	return std::size(k_latency_bounds_us);
}

void dcache_stats_reset(struct dcache_export *exp) noexcept
{
	if (exp != nullptr)
		exp->stats.reset();
}

void dcache_set_log(dcache_log_fn fn) noexcept
{
	set_log(fn);
}

void *dcache_rpc_buffer_get(size_t size, enum dcache_rpc_place place) noexcept
{
	static_assert(DCACHE_RPC_BUFFER_MIN == dcache::io::k_rpc_min);
	using dcache::io::rpc_place;
	const rpc_place p = place == DCACHE_RPC_END    ? rpc_place::end
			    : place == DCACHE_RPC_READ ? rpc_place::read
						       : rpc_place::start;
	return dcache::io::rpc_buffer_get(size, p);
}

bool dcache_rpc_buffer_put(void *p) noexcept
{
	return dcache::io::rpc_buffer_put(p);
}

size_t dcache_rpc_buffer_size(const void *p) noexcept
{
	return dcache::io::rpc_buffer_size(p);
}

void dcache_rpc_buffers_register(bool on) noexcept
{
	dcache::io::rpc_buffers_register(on);
}

} // extern "C"
