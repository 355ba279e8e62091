// A focused comparison of the real backends: sync (N blocking threads, the
// way N Ganesha workers would drive it) versus io_uring (N requests kept in
// flight by completions that resubmit from the reaper thread).
//
//   dcache_backend_bench --backend sync|io_uring --pattern rand4k-direct|read1m-buffered
//                        --depth N [--seconds S] [--file PATH] [--size MiB]
//
// The file is created (filled with non-zero data and fsync'd) when it is
// missing or smaller than --size.  Prints one line: backend pattern depth
// ops seconds IOPS MiB/s errors.
#include "dcache_io/sync_backend.h"
#include "dcache_io/uring_backend.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace dcache::io;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
	std::string backend = "sync";
	std::string pattern = "rand4k-direct";
	unsigned depth = 1;
	double seconds = 5;
	std::string file = "/tmp/dcache_bench.dat";
	std::uint64_t size_mib = 1024;
};

[[noreturn]] void usage(const char *why)
{
	std::fprintf(stderr,
		     "%s\nusage: dcache_backend_bench --backend sync|io_uring --pattern rand4k-direct|read1m-buffered\n"
		     "                            --depth N [--seconds S] [--file PATH] [--size MiB]\n",
		     why);
	std::exit(2);
}

options parse(int argc, char **argv)
{
	options o;
	for (int i = 1; i < argc; ++i) {
		const std::string a = argv[i];
		if (a == "--help")
			usage("");
		if (i + 1 >= argc)
			usage(("missing value after " + a).c_str());
		const char *v = argv[++i];
		if (a == "--backend")
			o.backend = v;
		else if (a == "--pattern")
			o.pattern = v;
		else if (a == "--depth")
			o.depth = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
		else if (a == "--seconds")
			o.seconds = std::strtod(v, nullptr);
		else if (a == "--file")
			o.file = v;
		else if (a == "--size")
			o.size_mib = std::strtoull(v, nullptr, 10);
		else
			usage(("unknown option " + a).c_str());
	}
	if (o.backend != "sync" && o.backend != "io_uring")
		usage(("--backend " + o.backend + " is not valid; allowed: sync, io_uring").c_str());
	if (o.pattern != "rand4k-direct" && o.pattern != "read1m-buffered")
		usage(("--pattern " + o.pattern + " is not valid; allowed: rand4k-direct, read1m-buffered").c_str());
	if (o.depth == 0 || o.depth > 1024)
		usage("--depth must be 1..1024");
	if (o.size_mib == 0)
		usage("--size must be > 0");
	return o;
}

void ensure_file(const options &o)
{
	const std::uint64_t size = o.size_mib << 20;
	struct stat st {};
	if (stat(o.file.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) >= size)
		return;
	const int fd = open(o.file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		std::perror(o.file.c_str());
		std::exit(1);
	}
	std::vector<char> chunk(1 << 20);
	for (std::size_t i = 0; i < chunk.size(); ++i)
		chunk[i] = static_cast<char>('a' + i % 23);
	for (std::uint64_t off = 0; off < size; off += chunk.size())
		if (pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) !=
		    static_cast<ssize_t>(chunk.size())) {
			std::perror("pwrite");
			std::exit(1);
		}
	fsync(fd);
	close(fd);
}

struct slot_state {
	void *buf = nullptr;
	iovec v{};
	std::mt19937_64 rng;
};

} // namespace

int main(int argc, char **argv)
{
	const options o = parse(argc, argv);
	ensure_file(o);
	const bool direct = o.pattern == "rand4k-direct";
	const std::size_t block = direct ? 4096 : (1 << 20);
	const std::uint64_t blocks = (o.size_mib << 20) / block;
	const int fd = open(o.file.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (fd < 0) {
		std::perror(o.file.c_str());
		return 1;
	}
	if (!direct)
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED); // buffered: measure cached reads

	std::unique_ptr<backend> b;
	if (o.backend == "io_uring") {
		auto r = make_uring_backend(o.depth);
		if (r.error) {
			std::fprintf(stderr, "io_uring unavailable: %s\n", r.why.c_str());
			return 77;
		}
		b = std::move(r.backend);
	} else {
		b = std::make_unique<sync_backend>();
	}

	std::vector<slot_state> slots(o.depth);
	for (unsigned i = 0; i < o.depth; ++i) {
		slots[i].buf = std::aligned_alloc(4096, block);
		slots[i].v = {slots[i].buf, block};
		slots[i].rng.seed(1234 + i);
	}
	std::atomic<std::uint64_t> seq{0};
	auto next_req = [&](slot_state &s) {
		const std::uint64_t blk = direct ? s.rng() % blocks
						 : seq.fetch_add(1, std::memory_order_relaxed) % blocks;
		request r;
		r.op = op_kind::read;
		r.fd = fd;
		r.offset = blk * block;
		r.iov = &s.v;
		r.iov_count = 1;
		return r;
	};

	std::atomic<std::uint64_t> ops{0}, errors{0};
	const auto start = clock_type::now();
	const auto end =
		start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.seconds));

	if (o.backend == "sync") {
		std::vector<std::thread> ts;
		for (unsigned i = 0; i < o.depth; ++i)
			ts.emplace_back([&, i] {
				while (clock_type::now() < end) {
					auto r = b->execute(next_req(slots[i]));
					if (r.ok() && r.bytes == block)
						ops.fetch_add(1, std::memory_order_relaxed);
					else
						errors.fetch_add(1, std::memory_order_relaxed);
				}
			});
		for (auto &t : ts)
			t.join();
	} else {
		// Each slot's completion resubmits the next read until time is up.
		struct chain final : completion {
			backend *b = nullptr;
			slot_state *s = nullptr;
			std::function<request(slot_state &)> *next = nullptr;
			std::atomic<std::uint64_t> *ops = nullptr, *errors = nullptr;
			clock_type::time_point end;
			std::size_t block = 0;
			std::mutex *m = nullptr;
			std::condition_variable *cv = nullptr;
			unsigned *running = nullptr;
			void complete(result r) noexcept override
			{
				if (r.ok() && r.bytes == block)
					ops->fetch_add(1, std::memory_order_relaxed);
				else
					errors->fetch_add(1, std::memory_order_relaxed);
				if (clock_type::now() < end) {
					b->submit((*next)(*s), *this);
					return;
				}
				std::lock_guard lock(*m);
				if (--*running == 0)
					cv->notify_all();
			}
		};
		std::function<request(slot_state &)> next = next_req;
		std::mutex m;
		std::condition_variable cv;
		unsigned running = o.depth;
		std::vector<chain> chains(o.depth);
		for (unsigned i = 0; i < o.depth; ++i) {
			chains[i].b = b.get();
			chains[i].s = &slots[i];
			chains[i].next = &next;
			chains[i].ops = &ops;
			chains[i].errors = &errors;
			chains[i].end = end;
			chains[i].block = block;
			chains[i].m = &m;
			chains[i].cv = &cv;
			chains[i].running = &running;
		}
		for (unsigned i = 0; i < o.depth; ++i)
			b->submit(next(slots[i]), chains[i]);
		std::unique_lock lock(m);
		cv.wait(lock, [&] { return running == 0; });
	}
	const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
	const double iops = static_cast<double>(ops.load()) / secs;
	std::printf("%-8s %-16s depth %-3u ops %-9llu %.2f s  %10.0f IOPS  %9.1f MiB/s  errors %llu\n",
		    o.backend.c_str(), o.pattern.c_str(), o.depth, static_cast<unsigned long long>(ops.load()), secs,
		    iops, iops * static_cast<double>(block) / (1 << 20),
		    static_cast<unsigned long long>(errors.load()));
	b.reset();
	for (auto &s : slots)
		std::free(s.buf);
	close(fd);
	return errors.load() == 0 ? 0 : 1;
}
