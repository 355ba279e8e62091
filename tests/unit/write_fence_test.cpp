// The write fence: buffered and O_DIRECT WRITEs of one file never hold the
// same page at once; same kinds share; a waiter wakes when the WRITE in its
// way leaves; leave() forgets exactly what its enter() recorded.  Then the
// core: a buffered WRITE over the pages of a direct one in flight waits
// for its completion before issuing anything.  Run under TSan as well.
#include "write_fence.h"
#include "dcache_io/fake_backend.h"

#include <gtest/gtest.h>

#include "async_fake.hpp"
#include "core_support.hpp"
#include "sync_points.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using dcache::core::write_fence;
using kind = write_fence::kind;
using namespace std::chrono_literals;

namespace {

using pages = write_fence::pages;
using dcache::test::sync_points;

// The WRITEs that begin to wait at a fence (sync point fence.wait), for
// the life of the test: mark() now, since(mark) until one has since.
class fence_waits {
public:
	[[nodiscard]] int mark()
	{
		std::lock_guard lock(_m);
		return _n;
	}
	[[nodiscard]] bool since(int mark)
	{
		std::unique_lock lock(_m);
		return _cv.wait_for(lock, 10s, [&] { return _n > mark; }); // sanitizer builds on a busy machine
	}

private:
	std::mutex _m;
	std::condition_variable _cv;
	int _n = 0;
	sync_points _hook{[this](const std::string &name) {
		if (name != "fence.wait")
			return;
		std::lock_guard lock(_m);
		++_n;
		_cv.notify_all();
	}};
};

TEST(write_fence, same_kinds_share_pages)
{
	write_fence f;
	const std::vector<pages> a{{0, 3, kind::buffered}}, b{{2, 5, kind::buffered}};
	const std::vector<pages> c{{10, 20, kind::direct}}, d{{15, 15, kind::direct}};
	EXPECT_FALSE(f.enter(a));
	EXPECT_FALSE(f.enter(b));
	EXPECT_FALSE(f.enter(c));
	EXPECT_FALSE(f.enter(d));
	EXPECT_EQ(f.held(), 4u);
	for (const auto *x : {&a, &b, &c, &d})
		f.leave(*x);
	EXPECT_EQ(f.held(), 0u);
}

TEST(write_fence, other_kinds_on_other_pages_do_not_wait)
{
	write_fence f;
	const std::vector<pages> split{{4, 4, kind::buffered}, {5, 9, kind::direct}, {10, 10, kind::buffered}};
	const std::vector<pages> next{{10, 10, kind::buffered}, {11, 30, kind::direct}};
	EXPECT_FALSE(f.enter(split));
	EXPECT_FALSE(f.enter(next)) << "neighbours share only a buffered edge page";
	f.leave(split);
	f.leave(next);
}

// `holder` enters; `wanting` must wait, not enter, until holder leaves.
void expect_waits_for(const std::vector<pages> &holder, const std::vector<pages> &wanting)
{
	write_fence f;
	ASSERT_FALSE(f.enter(holder));
	fence_waits waits;
	const int before = waits.mark();
	std::atomic<bool> entered{false};
	auto waiter = std::async(std::launch::async, [&] {
		const bool waited = f.enter(wanting);
		entered = true;
		return waited;
	});
	// The waiter is at its wait, under the fence's lock: by the time
	// leave() has that lock, it waits on the condition.
	ASSERT_TRUE(waits.since(before));
	EXPECT_FALSE(entered.load()) << "entered while the other kind held the page";
	EXPECT_EQ(f.waiting(), 1u);
	f.leave(holder);
	EXPECT_TRUE(waiter.get()) << "enter() says it waited";
	EXPECT_EQ(f.held(), wanting.size());
	EXPECT_EQ(f.waiting(), 0u);
	f.leave(wanting);
	EXPECT_EQ(f.held(), 0u);
}

TEST(write_fence, buffered_over_a_direct_page_waits_until_it_leaves)
{
	expect_waits_for({{8, 15, kind::direct}}, {{15, 16, kind::buffered}});
}

TEST(write_fence, direct_over_a_buffered_page_waits_too)
{
	expect_waits_for({{3, 3, kind::buffered}}, {{0, 7, kind::direct}});
}

TEST(write_fence, leave_forgets_one_record_of_identical_ones)
{
	fence_waits waits;
	write_fence f;
	const std::vector<pages> a{{1, 1, kind::buffered}};
	ASSERT_FALSE(f.enter(a));
	ASSERT_FALSE(f.enter(a));
	f.leave(a);
	EXPECT_EQ(f.held(), 1u) << "the other WRITE still holds page 1";
	const std::vector<pages> d{{1, 1, kind::direct}};
	const int before_waiter = waits.mark();
	auto waiter = std::async(std::launch::async, [&] { return f.enter(d); });
	ASSERT_TRUE(waits.since(before_waiter));
	f.leave(a);
	EXPECT_TRUE(waiter.get());
	f.leave(d);
}

TEST(write_fence, a_refused_direct_entry_becomes_buffered_unless_another_holds_it_direct)
{
	fence_waits waits;
	write_fence f;
	const pages mine{4, 7, kind::direct};
	const std::vector<pages> entered{{3, 3, kind::buffered}, mine, {8, 8, kind::buffered}};
	ASSERT_FALSE(f.enter(entered));
	const std::vector<pages> other{{6, 9, kind::direct}};
	// Another direct WRITE of page 6 can't have entered (page 8 is
	// buffered): use one of pages 5-6 only.
	const std::vector<pages> other_direct{{5, 6, kind::direct}};
	ASSERT_FALSE(f.enter(other_direct));
	EXPECT_FALSE(f.try_make_buffered(mine)) << "pages 5-6 are in flight direct";
	f.leave(other_direct);
	EXPECT_FALSE(f.try_make_buffered({4, 8, kind::direct})) << "not what was entered";
	// A buffered WRITE of page 5 waits for the direct entry...
	const std::vector<pages> buffered{{5, 5, kind::buffered}};
	const int before_waiter = waits.mark();
	auto waiter = std::async(std::launch::async, [&] { return f.enter(buffered); });
	ASSERT_TRUE(waits.since(before_waiter));
	// ...and goes when it turns buffered.
	EXPECT_TRUE(f.try_make_buffered(mine));
	EXPECT_TRUE(waiter.get());
	// Now a direct WRITE of those pages waits.
	const int before_direct_waiter = waits.mark();
	auto direct_waiter = std::async(std::launch::async, [&] { return f.enter(other); });
	ASSERT_TRUE(waits.since(before_direct_waiter));
	f.leave(buffered);
	std::vector<pages> now_mine = entered;
	now_mine[1].k = kind::buffered;
	f.leave(now_mine);
	EXPECT_TRUE(direct_waiter.get());
	f.leave(other);
	EXPECT_EQ(f.held(), 0u);
}

TEST(write_fence, many_threads_never_overlap_kinds)
{
	write_fence f;
	std::mutex m;
	int in_direct = 0, in_buffered = 0, violations = 0;
	std::vector<std::thread> threads;
	for (int t = 0; t < 8; ++t)
		threads.emplace_back([&, t] {
			const kind k = t % 2 ? kind::direct : kind::buffered;
			const std::vector<pages> mine{{0, 0, k}};
			for (int i = 0; i < 500; ++i) {
				f.enter(mine);
				{
					std::lock_guard lock(m);
					(k == kind::direct ? in_direct : in_buffered)++;
					violations += in_direct > 0 && in_buffered > 0;
				}
				std::this_thread::yield();
				{
					std::lock_guard lock(m);
					(k == kind::direct ? in_direct : in_buffered)--;
				}
				f.leave(mine);
			}
		});
	for (auto &th : threads)
		th.join();
	EXPECT_EQ(violations, 0);
	EXPECT_EQ(f.held(), 0u);
}

// ---- in the core ----------------------------------------------------------

// One DCACHE export in direct mode over the asynchronous fake; a 16-page
// aligned buffer for the payloads.
class write_fence_core : public dcache::test::core_test {
protected:
	void SetUp() override
	{
		fb.set_caps({512, 4096, 4096, dcache::io::dio_caps::source::fake});
		raw = static_cast<std::uint8_t *>(std::aligned_alloc(4096, 16 * 4096));
		std::memset(raw, 'x', 16 * 4096);
	}
	void TearDown() override
	{
		free_export();
		std::free(raw);
	}
	void make(const dcache_settings &s) { make_over(qb, s, "export 5 /fence"); }
	static constexpr int k_fd = 9;
	dcache::io::fake_backend fb;
	dcache::test::async_fake qb{fb};
	std::uint8_t *raw = nullptr;
};

TEST_F(write_fence_core, buffered_write_waits_for_the_direct_write_in_flight_on_its_page)
{
	fence_waits waits;
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.direct_misaligned_memory = DCACHE_MEM_MISALIGNED_BUFFERED;
	make(s);

	// A: pages 0-3, page-aligned memory -> one direct segment, queued.
	std::memset(raw, 'a', 4 * 4096);
	struct iovec va {
		raw, 4 * 4096
	};
	const dcache_io a{k_fd, 0, &va, 1, false, nullptr};
	std::atomic<int> done_calls{0};
	const auto on_done = [](void *p, dcache_io_result r) {
		EXPECT_EQ(r.error, 0);
		static_cast<std::atomic<int> *>(p)->fetch_add(1);
	};
	dcache_io_result inl{};
	ASSERT_FALSE(dcache_write_start(exp, file, &a, on_done, &done_calls, &inl));
	ASSERT_EQ(qb.pending(), 1u);
	ASSERT_TRUE(qb.is_direct());

	// B: page 2, memory one byte off -> buffered; must not be issued yet.
	std::memset(raw + 4 * 4096 + 1, 'b', 4096);
	struct iovec vb {
		raw + 4 * 4096 + 1, 4096
	};
	const dcache_io b{k_fd, 2 * 4096, &vb, 1, false, nullptr};
	const int before_starter = waits.mark();
	auto starter = std::async(std::launch::async, [&] {
		dcache_io_result r{};
		return dcache_write_start(exp, file, &b, on_done, &done_calls, &r);
	});
	ASSERT_TRUE(waits.since(before_starter));
	EXPECT_EQ(qb.pending(), 1u) << "the buffered WRITE was issued over a direct one in flight";

	qb.release_one(); // A completes; B enters and is queued
	ASSERT_FALSE(starter.get());
	ASSERT_EQ(qb.pending(), 1u);
	EXPECT_FALSE(qb.is_direct());
	qb.release_one();
	EXPECT_EQ(done_calls.load(), 2);
	EXPECT_EQ(dcache::test::stat_of(exp, "write_fence_waits"), 1u);
	EXPECT_EQ(file->fence.held(), 0u);
	const auto c = fb.contents(k_fd);
	ASSERT_EQ(c.size(), 4u * 4096);
	EXPECT_EQ(c[2 * 4096], 'b') << "B, issued after A, wrote last";
	EXPECT_EQ(c[0], 'a');
}

TEST_F(write_fence_core, a_refused_middle_is_not_reissued_buffered_over_a_direct_write_in_flight)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.boundary_tracking = false;
	make(s);
	struct result_box {
		std::atomic<int> calls{0};
		dcache_io_result r{};
	} ra, rb;
	const auto on_done = [](void *p, dcache_io_result r) {
		auto *box = static_cast<result_box *>(p);
		box->r = r;
		box->calls.fetch_add(1);
	};
	dcache_io_result inl{};
	// A: pages 2-3, direct, stays in flight.
	struct iovec va {
		raw, 2 * 4096
	};
	const dcache_io a{k_fd, 2 * 4096, &va, 1, false, nullptr};
	ASSERT_FALSE(dcache_write_start(exp, file, &a, on_done, &ra, &inl));
	// B: 1000 + 20000: head page 0, direct middle pages 1-4 (shares 2-3
	// with A, same kind: no wait), tail page 5.
	struct iovec vb {
		raw + 4 * 4096, 20000
	};
	const dcache_io b{k_fd, 1000, &vb, 1, false, nullptr};
	ASSERT_FALSE(dcache_write_start(exp, file, &b, on_done, &rb, &inl));
	ASSERT_EQ(qb.pending(), 2u);
	EXPECT_EQ(dcache::test::stat_of(exp, "write_fence_waits"), 0u);
	fb.fail_when([](const dcache::io::request &q,
			std::size_t) { return q.op == dcache::io::op_kind::write && q.offset == 4096; },
		     EIO, 1);
	qb.release_one(1); // B's head
	ASSERT_EQ(qb.pending(), 2u);
	ASSERT_TRUE(qb.is_direct(1)) << "B's middle";
	qb.release_one(1); // B's middle: EIO; A holds pages 2-3 direct
	EXPECT_EQ(rb.calls.load(), 1);
	EXPECT_EQ(rb.r.bytes, 3096u) << "a short WRITE: the head only";
	EXPECT_EQ(dcache::test::stat_of(exp, "fallback_direct_eio"), 0u);
	EXPECT_EQ(dcache::test::stat_of(exp, "errors"), 1u);
	ASSERT_EQ(qb.pending(), 1u);
	qb.release_one(); // A
	EXPECT_EQ(ra.calls.load(), 1);
	EXPECT_EQ(ra.r.bytes, 2u * 4096);
	EXPECT_EQ(file->fence.held(), 0u);
}

} // namespace
