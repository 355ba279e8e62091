// io_uring personalities: whose credentials a request runs with.
#include "backend_conformance.hpp"

// ---- credentials (io_uring personalities) --------------------------------
//
// Why these exist: a WRITE's later steps are submitted from the reaper
// thread, which has the server's root credentials.  The kernel clears a
// file's setuid bit on write unless the writer has CAP_FSETID
// (file_remove_privs -> setattr_should_drop_suidgid -> capable(CAP_FSETID)),
// and switching fsuid from 0 to non-zero drops CAP_FSETID (with the other
// CAP_FS_MASK capabilities) from the thread's effective set
// (cap_task_fix_setuid).  So a write carrying an NFS client's credentials
// clears the bit and one carrying root's does not: the observable proof of
// whose credentials a request ran with.

namespace {

using namespace dcache::test;

constexpr uid_t k_test_uid = 1000;
constexpr gid_t k_test_gid = 1000;
constexpr unsigned k_cap_fsetid = 4; // linux/capability.h

// CapEff of the calling thread, from /proc/thread-self/status.
std::uint64_t thread_cap_eff()
{
	FILE *f = std::fopen("/proc/thread-self/status", "re");
	if (!f)
		return ~0ULL;
	char line[256];
	std::uint64_t v = ~0ULL;
	while (std::fgets(line, sizeof(line), f))
		if (std::sscanf(line, "CapEff: %llx", reinterpret_cast<unsigned long long *>(&v)) == 1)
			break;
	std::fclose(f);
	return v;
}

struct captured {
	credentials_result r;
	std::uint64_t cap_eff_as_user = 0;
	uid_t fsuid_seen = 0;
};

// Captures credentials on a thread of its own whose fsuid/fsgid are the
// test user's (raw syscalls: per thread, as Ganesha's fsal_set_credentials
// does), then switches that thread back to root before the token is used:
// whatever runs later, it is the personality that carries the user.
captured capture_as_user(backend &b)
{
	captured out;
	std::thread t([&] {
		syscall(SYS_setfsgid, k_test_gid);
		syscall(SYS_setfsuid, k_test_uid);
		out.fsuid_seen = static_cast<uid_t>(syscall(SYS_setfsuid, -1)); // -1: query
		out.cap_eff_as_user = thread_cap_eff();
		out.r = b.capture_credentials();
		syscall(SYS_setfsuid, 0);
		syscall(SYS_setfsgid, 0);
	});
	t.join();
	return out;
}

// A file of the test user with mode 04755, opened read-write by root.
class setuid_file {
public:
	setuid_file() : _file("/tmp")
	{
		if (_file.fd() < 0)
			return;
		_ok = fchown(_file.fd(), k_test_uid, k_test_gid) == 0 && fchmod(_file.fd(), 04755) == 0;
	}
	[[nodiscard]] bool ok() const { return _ok; }
	[[nodiscard]] int fd() const { return _file.fd(); }
	[[nodiscard]] mode_t mode() const
	{
		struct stat st {};
		return fstat(_file.fd(), &st) == 0 ? (st.st_mode & 07777) : 0;
	}

private:
	temp_file _file;
	bool _ok = false;
};

// Writes `second` from the reaper thread: the completion of a first write
// (submitted by the root test thread, no personality) submits it, like the
// core's chain submits the segment after the head.
class chained_write final : public completion {
public:
	chained_write(backend &b, request second) : _b(b), _second(second) {}
	void complete(result r) noexcept override
	{
		if (!_first_done) {
			_first_done = true;
			_first = r;
			_b.submit(_second, *this); // on the reaper thread
			return;
		}
		std::lock_guard lock(_m);
		_last = r;
		_done = true;
		_cv.notify_all();
	}
	[[nodiscard]] bool wait()
	{
		std::unique_lock lock(_m);
		return _cv.wait_for(lock, 20s, [this] { return _done; });
	}
	result _first{-1, 0};
	result _last{-1, 0};

private:
	backend &_b;
	request _second;
	bool _first_done = false; // only the reaper touches it after submit
	std::mutex _m;
	std::condition_variable _cv;
	bool _done = false;
};

std::unique_ptr<uring_backend> make_ring_or_skip(std::string &skip)
{
	auto r = make_uring_backend(32);
	if (r.error) {
		skip = "io_uring unavailable: " + r.why;
		return nullptr;
	}
	return std::move(r.backend);
}

} // namespace

TEST(credentials, sync_and_fake_backends_need_none)
{
	sync_backend s;
	fake_backend f;
	for (backend *b : {static_cast<backend *>(&s), static_cast<backend *>(&f)}) {
		credentials_result r = b->capture_credentials();
		EXPECT_EQ(r.error, 0) << b->name();
		EXPECT_TRUE(r.creds.empty()) << b->name();
		EXPECT_EQ(r.creds.personality(), 0) << b->name();
	}
	// A personality in a request is ignored where requests run in the
	// caller's thread.
	temp_file t("/tmp");
	ASSERT_GE(t.fd(), 0);
	auto data = pattern(4096, 3);
	iovec v{data.data(), data.size()};
	request q = rw_req(op_kind::write, t.fd(), 0, &v, 1);
	q.personality = 7;
	const result r = s.execute(q);
	EXPECT_TRUE(r.ok()) << std::strerror(r.error);
	EXPECT_EQ(r.bytes, 4096u);
}

TEST(credentials, uring_registers_an_identity_once_and_reuses_it)
{
	std::string skip;
	auto b = make_ring_or_skip(skip);
	if (!b)
		GTEST_SKIP() << skip;
	const std::uint32_t groups[] = {10, 20};
	const identity alice{1000, 1000, groups, 2};
	credentials_result a1 = b->capture_credentials(alice);
	if (a1.error == EINVAL)
		GTEST_SKIP() << "IORING_REGISTER_PERSONALITY refused (EINVAL): kernel < 5.6";
	ASSERT_EQ(a1.error, 0) << std::strerror(a1.error);
	{
		credentials_result a2 = b->capture_credentials(alice);
		ASSERT_EQ(a2.error, 0);
		EXPECT_EQ(a2.creds.personality(), a1.creds.personality()) << "same identity, same registration";
		EXPECT_EQ(b->personalities_live(), 1u);
	}
	// Any difference (uid, gid, a group, the number of groups) is another
	// identity.
	const std::uint32_t other_groups[] = {10, 21};
	for (const identity &who : {identity{1001, 1000, groups, 2}, identity{1000, 1001, groups, 2},
				    identity{1000, 1000, other_groups, 2}, identity{1000, 1000, groups, 1}}) {
		credentials_result o = b->capture_credentials(who);
		ASSERT_EQ(o.error, 0);
		EXPECT_NE(o.creds.personality(), a1.creds.personality());
	}
	EXPECT_EQ(b->personalities_live(), 5u) << "released identities stay registered for reuse";
	const int id = a1.creds.personality();
	a1.creds.reset();
	credentials_result again = b->capture_credentials(alice);
	EXPECT_EQ(again.creds.personality(), id) << "kept after its last user let go";
	again.creds.reset();
	// Beyond the cache's size the least recently used idle identity goes.
	std::vector<std::uint32_t> uids(uring_backend::k_identity_cache * 2);
	for (std::size_t i = 0; i < uids.size(); ++i) {
		credentials_result r =
			b->capture_credentials(identity{static_cast<std::uint32_t>(2000 + i), 1, nullptr, 0});
		ASSERT_EQ(r.error, 0) << i;
	}
	EXPECT_EQ(b->personalities_live(), uring_backend::k_identity_cache);
	// Identities all in use: one more is served, uncached, and given back.
	std::vector<credentials> held;
	for (std::size_t i = 0; i < uring_backend::k_identity_cache; ++i)
		held.push_back(
			b->capture_credentials(identity{static_cast<std::uint32_t>(5000 + i), 1, nullptr, 0}).creds);
	{
		credentials_result extra = b->capture_credentials(identity{9999, 1, nullptr, 0});
		ASSERT_EQ(extra.error, 0);
		EXPECT_EQ(b->personalities_live(), uring_backend::k_identity_cache + 1);
	}
	EXPECT_EQ(b->personalities_live(), uring_backend::k_identity_cache);
}

TEST(credentials, uring_registers_and_releases_personalities)
{
	std::string skip;
	auto b = make_ring_or_skip(skip);
	if (!b)
		GTEST_SKIP() << skip;
	credentials_result r = b->capture_credentials();
	if (r.error == EINVAL)
		GTEST_SKIP() << "IORING_REGISTER_PERSONALITY refused (EINVAL): kernel < 5.6";
	ASSERT_EQ(r.error, 0) << std::strerror(r.error);
	EXPECT_GT(r.creds.personality(), 0);
	EXPECT_LE(r.creds.personality(), 0xffff);
	EXPECT_EQ(b->personalities_live(), 1u);
	{
		credentials moved = std::move(r.creds);
		EXPECT_TRUE(r.creds.empty());
		EXPECT_EQ(b->personalities_live(), 1u);
		credentials_result r2 = b->capture_credentials();
		ASSERT_EQ(r2.error, 0);
		EXPECT_NE(r2.creds.personality(), moved.personality());
		EXPECT_EQ(b->personalities_live(), 2u);
	}
	EXPECT_EQ(b->personalities_live(), 0u);
	// The id is gone from the kernel too: a request naming it is refused.
	temp_file t("/tmp");
	ASSERT_GE(t.fd(), 0);
	std::uint8_t byte = 1;
	iovec v{&byte, 1};
	request q = rw_req(op_kind::write, t.fd(), 0, &v, 1);
	q.personality = 0xfffe; // never registered
	EXPECT_EQ(b->execute(q).error, EINVAL);
	q.personality = 0x10000; // does not fit sqe->personality
	EXPECT_EQ(b->execute(q).error, EINVAL);
}

// The proof: the same chained write clears the setuid bit with the user's
// personality and keeps it without (so the test can fail).
TEST(credentials, uring_write_runs_with_the_captured_personality)
{
	std::string skip;
	auto b = make_ring_or_skip(skip);
	if (!b)
		GTEST_SKIP() << skip;
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root (chown to uid " << k_test_uid << ", setfsuid)";

	auto data = pattern(8192, 5);
	iovec v1{data.data(), 4096}, v2{data.data() + 4096, 4096};

	// Control: without a personality the reaper's root credentials keep it.
	{
		setuid_file f;
		ASSERT_TRUE(f.ok()) << std::strerror(errno);
		ASSERT_EQ(f.mode(), 04755u);
		chained_write w(*b, rw_req(op_kind::write, f.fd(), 4096, &v2, 1));
		b->submit(rw_req(op_kind::write, f.fd(), 0, &v1, 1), w);
		ASSERT_TRUE(w.wait());
		ASSERT_TRUE(w._first.ok()) << std::strerror(w._first.error);
		ASSERT_TRUE(w._last.ok()) << std::strerror(w._last.error);
		EXPECT_EQ(f.mode(), 04755u) << "a root write cleared the setuid bit: the test could not tell";
	}

	captured c = capture_as_user(*b);
	if (c.r.error == EINVAL)
		GTEST_SKIP() << "IORING_REGISTER_PERSONALITY refused (EINVAL): kernel < 5.6";
	ASSERT_EQ(c.r.error, 0) << std::strerror(c.r.error);
	EXPECT_EQ(c.fsuid_seen, k_test_uid);
	std::printf("  CapEff after setfsuid(%u): %#llx (CAP_FSETID %s)\n", k_test_uid,
		    static_cast<unsigned long long>(c.cap_eff_as_user),
		    (c.cap_eff_as_user >> k_cap_fsetid) & 1 ? "kept" : "dropped");
	EXPECT_EQ((c.cap_eff_as_user >> k_cap_fsetid) & 1, 0u) << "setfsuid to non-root did not drop CAP_FSETID";

	// The same chain, the reaper's write carrying the personality.
	{
		setuid_file f;
		ASSERT_TRUE(f.ok()) << std::strerror(errno);
		request second = rw_req(op_kind::write, f.fd(), 4096, &v2, 1);
		second.personality = c.r.creds.personality();
		chained_write w(*b, second);
		b->submit(rw_req(op_kind::write, f.fd(), 0, &v1, 1), w);
		ASSERT_TRUE(w.wait());
		ASSERT_TRUE(w._first.ok()) << std::strerror(w._first.error);
		ASSERT_TRUE(w._last.ok()) << std::strerror(w._last.error);
		EXPECT_EQ(w._last.bytes, 4096u);
		EXPECT_EQ(f.mode(), 0755u) << "the personality's write kept the setuid bit";
	}
	// And a first request from a root thread, carrying it.
	{
		setuid_file f;
		ASSERT_TRUE(f.ok());
		request q = rw_req(op_kind::write, f.fd(), 0, &v1, 1);
		q.personality = c.r.creds.personality();
		const result r = b->execute(q);
		ASSERT_TRUE(r.ok()) << std::strerror(r.error);
		EXPECT_EQ(f.mode(), 0755u);
	}
	c.r.creds.reset();
	EXPECT_EQ(b->personalities_live(), 0u);
}

// Cost: what capture + release (two io_uring_register calls) adds to a
// WRITE, next to a 4 KiB buffered write through the ring.  Printed, not
// asserted (timing); asserted: nothing leaks across many cycles.
TEST(credentials, uring_capture_cost)
{
	std::string skip;
	auto b = make_ring_or_skip(skip);
	if (!b)
		GTEST_SKIP() << skip;
	if (b->capture_credentials().error == EINVAL)
		GTEST_SKIP() << "IORING_REGISTER_PERSONALITY refused (EINVAL): kernel < 5.6";
	constexpr int n = 20000;
	using clk = std::chrono::steady_clock;
	const auto t0 = clk::now();
	for (int i = 0; i < n; ++i) {
		credentials_result r = b->capture_credentials();
		ASSERT_EQ(r.error, 0) << "cycle " << i << ": " << std::strerror(r.error);
	}
	const auto t1 = clk::now();
	temp_file t("/tmp");
	ASSERT_GE(t.fd(), 0);
	auto data = pattern(4096, 9);
	iovec v{data.data(), data.size()};
	for (int i = 0; i < n; ++i)
		ASSERT_TRUE(b->execute(rw_req(op_kind::write, t.fd(), (i % 256) * 4096ULL, &v, 1)).ok());
	const auto t2 = clk::now();
	EXPECT_EQ(b->personalities_live(), 0u);
	const double pair_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
	const double write_ns = std::chrono::duration<double, std::nano>(t2 - t1).count() / n;
	std::printf("  register+unregister personality: %.0f ns per WRITE; 4 KiB ring write (submit+wait): %.0f ns\n",
		    pair_ns, write_ns);
}
