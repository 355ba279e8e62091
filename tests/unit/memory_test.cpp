// The memory a burst leaves behind: bounce buffers and the server's RPC
// buffers reused by size and given back when the server goes idle, and the
// malloc_trim after a burst.
#include "dcache_io/bounce_pool.h"
#include "dcache_io/heap_trim.h"
#include "dcache_io/rpc_buffers.h"
#include "dcache_io/sync_backend.h"
#include "iovec.h"

#include <gtest/gtest.h>

#include <liburing.h>
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using namespace dcache::core;
using namespace dcache::io;

TEST(bounce_pool, buffers_are_page_aligned_reused_by_size_and_trimmed)
{
	(void)bounce_trim();
	const std::size_t base = bounce_mapped();
	void *a = bounce_get(1 << 20);
	ASSERT_NE(a, nullptr);
	EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % k_page_size, 0u);
	std::memset(a, 0xab, 1 << 20); // every byte is usable
	bounce_put(a, 1 << 20);
	void *b = bounce_get((1 << 20) - 100);
	EXPECT_EQ(b, a) << "the freed buffer of the same class, not a new mapping";
	void *c = bounce_get(4096);
	EXPECT_NE(c, a);
	EXPECT_EQ(bounce_mapped(), base + 2);
	bounce_put(b, (1 << 20) - 100);
	bounce_put(c, 4096);
	EXPECT_EQ(bounce_trim(), (std::size_t{1} << 20) + (std::size_t{64} << 10));
	EXPECT_EQ(bounce_mapped(), base) << "every free buffer unmapped";
	// Beyond the largest class: a mapping of its own, gone at release.
	void *big = bounce_get(std::size_t{40} << 20);
	ASSERT_NE(big, nullptr);
	bounce_put(big, std::size_t{40} << 20);
	EXPECT_EQ(bounce_mapped(), base);
	EXPECT_EQ(bounce_trim(), 0u);
}

TEST(bounce_pool, aligned_buffer_gives_its_memory_back)
{
	(void)bounce_trim();
	const std::size_t base = bounce_mapped();
	{
		sync_backend b;
		aligned_buffer buf(b);
		ASSERT_TRUE(buf.allocate(512, 100000));
		EXPECT_EQ(bounce_mapped(), base + 1);
		EXPECT_FALSE(buf.allocate(512, 10)) << "one allocation per buffer";
		aligned_buffer beyond_a_page(b);
		EXPECT_FALSE(beyond_a_page.allocate(2 * k_page_size, 10));
	}
	EXPECT_EQ(bounce_trim(), std::size_t{128} << 10) << "back in the pool, then unmapped";
}

TEST(heap_trim, a_burst_that_ends_is_trimmed_three_times_then_left_alone)
{
	set_heap_trim_interval_for_test(std::chrono::milliseconds(20));
	void *p = bounce_get(1 << 16);
	bounce_put(p, 1 << 16);
	const std::uint64_t before = heap_trims();
	note_heap_use();
	const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (heap_trims() < before + 3 && std::chrono::steady_clock::now() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
	EXPECT_EQ(heap_trims(), before + 3) << "1, 10 and 60 intervals into the quiet";
	EXPECT_EQ(bounce_trim(), 0u) << "the trims unmapped the free bounce buffers";
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	EXPECT_EQ(heap_trims(), before + 3) << "a quiet server is left alone";
	set_heap_trim_interval_for_test(std::chrono::milliseconds(1000));
}

// The server's large RPC buffers: placed so that a WRITE's payload starts on
// a page (at the buffer's start, or at its end for a receive buffer whose
// payload is its last field), and reused instead of faulted in again.
TEST(rpc_buffers, placed_on_a_page_and_reused_by_size)
{
	(void)rpc_buffer_trim();
	EXPECT_EQ(rpc_buffer_get(k_rpc_min - 1, rpc_place::start), nullptr) << "small ones stay Ganesha's";
	EXPECT_EQ(rpc_buffer_get(k_rpc_max + 1, rpc_place::start), nullptr);
	EXPECT_FALSE(rpc_buffer_put(nullptr));
	void *foreign = std::malloc(k_rpc_min);
	EXPECT_FALSE(rpc_buffer_put(foreign)) << "not one of ours: left to the caller";
	EXPECT_EQ(rpc_buffer_size(foreign), 0u);
	std::free(foreign);

	const rpc_buffer_stats before = rpc_buffer_counts();
	constexpr std::size_t mib = std::size_t{1} << 20;
	auto *a = static_cast<std::uint8_t *>(rpc_buffer_get(mib, rpc_place::start));
	ASSERT_NE(a, nullptr);
	EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 4096, 0u) << "a copied payload starts on a page";
	EXPECT_GE(malloc_usable_size(a), mib) << "a glibc chunk: a plain free() of it is harmless";
	std::memset(a, 7, mib);
	EXPECT_GE(rpc_buffer_size(a), mib);
	EXPECT_TRUE(rpc_buffer_put(a));
	auto *b = static_cast<std::uint8_t *>(rpc_buffer_get(mib - 5, rpc_place::start));
	EXPECT_EQ(b, a) << "the same 64 KiB class: reused";

	// A receive buffer: its end on a page, so a payload of whole blocks at
	// its end starts on a page too.
	constexpr std::size_t frag = mib + 172;
	auto *r = static_cast<std::uint8_t *>(rpc_buffer_get(frag, rpc_place::end));
	ASSERT_NE(r, nullptr);
	EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r + frag) % 4096, 0u);
	EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r + frag - mib) % 4096, 0u);
	std::memset(r, 9, frag);
	EXPECT_EQ(rpc_buffer_size(r), frag);
	const rpc_buffer_stats during = rpc_buffer_counts();
	EXPECT_EQ(during.in_use, before.in_use + 2);
	EXPECT_EQ(during.gets, before.gets + 3);
	EXPECT_EQ(during.reuses, before.reuses + 1);
	EXPECT_TRUE(rpc_buffer_put(b));
	EXPECT_TRUE(rpc_buffer_put(r));
	EXPECT_FALSE(rpc_buffer_put(r)) << "given back once";
	EXPECT_EQ(rpc_buffer_counts().cached, 2u);
	EXPECT_GE(bounce_trim(), 2 * mib) << "idle: the waiting buffers go back to glibc";
	EXPECT_EQ(rpc_buffer_counts().cached, 0u);
}

TEST(rpc_buffers, what_waits_for_reuse_is_bounded)
{
	(void)rpc_buffer_trim();
	constexpr std::size_t size = std::size_t{4} << 20;
	std::vector<void *> out;
	for (std::size_t i = 0; i < 2 * k_rpc_cache_bytes / size; ++i) {
		out.push_back(rpc_buffer_get(size, rpc_place::start));
		ASSERT_NE(out.back(), nullptr);
	}
	for (void *p : out)
		EXPECT_TRUE(rpc_buffer_put(p));
	EXPECT_EQ(rpc_buffer_counts().cached * size, k_rpc_cache_bytes) << "the rest went back to glibc";
	EXPECT_EQ(rpc_buffer_trim(), k_rpc_cache_bytes);
}

// Registered with a ring (Ganesha 6.x): the buffers direct I/O uses (end:
// receive buffers; read: READ reply buffers) each hold one slot, the same
// in every ring, from when they are made until they go back to glibc; a
// range inside one has its slot's index, anything else -1.  Start buffers
// (anyone else's, which might be freed elsewhere) are never registered.  A
// WRITE_FIXED from a receive buffer writes what lies there.
TEST(rpc_buffers, direct_io_buffers_registered_with_the_rings_while_they_live)
{
	io_uring ring{};
	if (io_uring_queue_init(8, &ring, 0) != 0)
		GTEST_SKIP() << "no io_uring here";
	constexpr unsigned base = 16;
	if (const int rc = io_uring_register_buffers_sparse(&ring, base + k_rpc_slots); rc < 0) {
		io_uring_queue_exit(&ring);
		GTEST_SKIP() << "no sparse buffer table (kernel before 5.19): " << std::strerror(-rc);
	}
	(void)rpc_buffer_trim();
	constexpr std::size_t mib = std::size_t{1} << 20, frag = mib + 172;
	std::vector<void *> out;
	// Whatever happens below: the buffers back, the ring out of the pool
	// and gone, registration off (the pool outlives the test).
	struct cleanup {
		io_uring *ring;
		std::vector<void *> &out;
		~cleanup()
		{
			for (void *p : out)
				(void)rpc_buffer_put(p);
			(void)rpc_buffer_trim();
			rpc_buffers_detach(ring);
			rpc_buffers_register(false);
			io_uring_queue_exit(ring);
		}
	} done{&ring, out};
	const auto get = [&](std::size_t size, rpc_place place) {
		out.push_back(rpc_buffer_get(size, place));
		return static_cast<std::uint8_t *>(out.back());
	};
	std::uint8_t *before = get(mib, rpc_place::read); // registration off: no slot
	rpc_buffers_register(true);
	std::uint8_t *early = get(frag, rpc_place::end);
	rpc_buffers_attach(&ring, base); // registers what has a slot
	std::uint8_t *late = get(mib, rpc_place::read);
	std::uint8_t *plain = get(2 * mib, rpc_place::start);
	for (const void *p : out)
		ASSERT_NE(p, nullptr);
	const rpc_buffer_stats c = rpc_buffer_counts();
	EXPECT_EQ(c.slotted, 2u) << "made while registering, for direct I/O: early and late";
	if (c.registrations == 0)
		GTEST_SKIP() << "the kernel registered nothing (RLIMIT_MEMLOCK?)";
	const int ie = rpc_buffer_index(&ring, early + frag - mib, mib);
	const int il = rpc_buffer_index(&ring, late, mib);
	EXPECT_GE(ie, static_cast<int>(base));
	EXPECT_GE(il, static_cast<int>(base));
	EXPECT_NE(ie, il);
	EXPECT_EQ(rpc_buffer_index(&ring, late + 4096, mib - 4096), il) << "a range inside";
	EXPECT_EQ(rpc_buffer_index(&ring, late + 4096, mib), -1) << "past its end";
	EXPECT_EQ(rpc_buffer_index(&ring, before, mib), -1) << "made before registering";
	EXPECT_EQ(rpc_buffer_index(&ring, plain, mib), -1) << "a start buffer: never registered";
	EXPECT_EQ(rpc_buffer_index(nullptr, late, mib), -1) << "another ring";

	// The kernel takes it: a WRITE_FIXED from the receive buffer's payload.
	char path[] = "/var/tmp/dcache_rpc_fixed_XXXXXX";
	const int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	unlink(path);
	std::uint8_t *payload = early + frag - mib;
	std::memset(payload, 0x5a, mib);
	io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write_fixed(sqe, fd, payload, mib, 0, ie);
	ASSERT_EQ(io_uring_submit(&ring), 1);
	io_uring_cqe *cqe = nullptr;
	ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
	EXPECT_EQ(cqe->res, static_cast<int>(mib)) << std::strerror(-cqe->res);
	io_uring_cqe_seen(&ring, cqe);
	std::vector<std::uint8_t> back(mib);
	ASSERT_EQ(pread(fd, back.data(), mib, 0), static_cast<ssize_t>(mib));
	EXPECT_EQ(back[0], 0x5a);
	EXPECT_EQ(back[mib - 1], 0x5a);
	close(fd);

	// Waiting for reuse, a buffer keeps its slot, and only a READ buffer
	// takes it again; back to glibc, the slot goes.
	std::erase(out, static_cast<void *>(late));
	EXPECT_TRUE(rpc_buffer_put(late));
	EXPECT_NE(get(mib, rpc_place::start), late) << "kept apart from the start buffers";
	EXPECT_EQ(get(mib, rpc_place::read), late);
	EXPECT_EQ(rpc_buffer_index(&ring, late, mib), il);
	for (void *p : out)
		EXPECT_TRUE(rpc_buffer_put(p));
	out.clear();
	(void)rpc_buffer_trim();
	EXPECT_EQ(rpc_buffer_counts().slotted, 0u);
	EXPECT_EQ(rpc_buffer_index(&ring, late, mib), -1);
}
