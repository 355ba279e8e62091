// The pure policy after the plan, table by table: the steps a WRITE's plan
// becomes (edge pieces, tracked or not, written back or not), the flags a
// step goes out with, the cache-first choice of a READ, the sync a WRITE
// needs, where a step runs, and the fallback table.
#include "fallback.h"
#include "placement.h"
#include "planner.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

using namespace dcache::core;

namespace {

constexpr std::uint64_t P = k_page_size;

dcache_settings with_write(dcache_mode m, bool tracking = true, bool dontcache_edges = true)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = m;
	s.boundary_tracking = tracking;
	s.direct_misaligned_dontcache = dontcache_edges;
	return s;
}

plan plan_of(std::initializer_list<segment> segs, disposition d = disposition::split)
{
	plan p;
	p.disp = d;
	for (const segment &s : segs)
		p.segs[p.nsegs++] = s;
	return p;
}

std::string describe(const step_list &l)
{
	std::string out;
	for (const step &s : l.all())
		out += std::string(step_kind_name(s.kind)) + "@" + std::to_string(s.offset) + "+" +
		       std::to_string(s.length) + (s.bounce ? " bounce" : "") + (s.writeback ? " wb" : "") + "; ";
	return out;
}

struct steps_case {
	const char *name;
	dcache_settings s;
	plan p;
	std::uint64_t offset, length;
	std::vector<step> want;
	bool write_behind = false;
};

class write_steps_table : public ::testing::TestWithParam<steps_case> {};

TEST_P(write_steps_table, steps_are_as_stated)
{
	const steps_case &c = GetParam();
	const step_list got = write_steps(c.s, c.p, c.offset, c.length, c.write_behind);
	ASSERT_EQ(got.n, c.want.size()) << describe(got);
	for (std::size_t i = 0; i < c.want.size(); ++i)
		EXPECT_EQ(got.items[i], c.want[i]) << "step " << i << ": " << describe(got);
}

// A WRITE [100, 3P+200): head [100, P), middle [P, 3P), tail [3P, 3P+200).
const plan k_split = plan_of({{seg_kind::dontcache, 100, P - 100, false},
			      {seg_kind::direct, P, 2 * P, true},
			      {seg_kind::dontcache, 3 * P, 200, false}});
const plan k_split_buffered = plan_of({{seg_kind::buffered, 100, P - 100, false},
				       {seg_kind::direct, P, 2 * P, false},
				       {seg_kind::buffered, 3 * P, 200, false}});

INSTANTIATE_TEST_SUITE_P(
	policy, write_steps_table,
	::testing::Values(
		// Tracking: each edge's page is shared with a neighbour: tracked,
		// written back; the middle keeps its bounce.
		steps_case{"tracked_edges",
			   with_write(DCACHE_MODE_DIRECT),
			   k_split,
			   100,
			   3 * P + 100,
			   {{step_kind::tracked, 100, P - 100, false, true},
			    {step_kind::direct, P, 2 * P, true, false},
			    {step_kind::tracked, 3 * P, 200, false, true}}},
		// Without tracking: the DONTCACHE edges as planned, no write-back
		// (the kernel starts it inside a DONTCACHE write).
		steps_case{"untracked_edges",
			   with_write(DCACHE_MODE_DIRECT, false),
			   k_split,
			   100,
			   3 * P + 100,
			   {{step_kind::dontcache, 100, P - 100, false, false},
			    {step_kind::direct, P, 2 * P, true, false},
			    {step_kind::dontcache, 3 * P, 200, false, false}}},
		// Buffered edges (Direct_Misaligned_Dontcache = false) in a direct
		// mode: not tracked, written back at once.
		steps_case{"buffered_edges_written_back",
			   with_write(DCACHE_MODE_DIRECT_DATA_SYNC, true, false),
			   k_split_buffered,
			   100,
			   3 * P + 100,
			   {{step_kind::buffered, 100, P - 100, false, true},
			    {step_kind::direct, P, 2 * P, false, false},
			    {step_kind::buffered, 3 * P, 200, false, true}}},
		// A WRITE smaller than a page leaves the rest of it to a neighbour.
		steps_case{"small_write_in_one_page",
			   with_write(DCACHE_MODE_DIRECT),
			   plan_of({{seg_kind::dontcache, 0, 200, false}}, disposition::too_small),
			   0,
			   200,
			   {{step_kind::tracked, 0, 200, false, true}}},
		// A segment over three pages, the WRITE covering the middle one
		// whole: first and last pieces tracked, the middle one not.
		steps_case{"three_pages",
			   with_write(DCACHE_MODE_DIRECT),
			   plan_of({{seg_kind::dontcache, P - 10, P + 20, false}}, disposition::no_middle),
			   P - 10,
			   P + 20,
			   {{step_kind::tracked, P - 10, 10, false, true},
			    {step_kind::dontcache, P, P, false, false},
			    {step_kind::tracked, 2 * P, 10, false, true}}},
		// A whole-page WRITE shares nothing: one untracked piece.
		steps_case{"whole_pages_one_piece",
			   with_write(DCACHE_MODE_DIRECT),
			   plan_of({{seg_kind::dontcache, P, 2 * P, false}}, disposition::no_middle),
			   P,
			   2 * P,
			   {{step_kind::dontcache, P, 2 * P, false, false}}},
		// Modes without direct writes never write back or track.
		steps_case{"dontcache_mode",
			   with_write(DCACHE_MODE_DONTCACHE),
			   plan_of({{seg_kind::dontcache, 100, 200, false}}, disposition::dontcache),
			   100,
			   200,
			   {{step_kind::dontcache, 100, 200, false, false}}},
		steps_case{"buffered_mode",
			   with_write(DCACHE_MODE_BUFFERED),
			   plan_of({{seg_kind::buffered, 100, 200, false}}, disposition::buffered),
			   100,
			   200,
			   {{step_kind::buffered, 100, 200, false, false}}},
		// auto's stream cached for spare memory: written back at once
		steps_case{"buffered_written_behind",
			   with_write(DCACHE_MODE_BUFFERED),
			   plan_of({{seg_kind::buffered, 0, 2 * P, false}}, disposition::buffered),
			   0,
			   2 * P,
			   {{step_kind::buffered, 0, 2 * P, false, true}},
			   true},
		steps_case{"empty_plan", with_write(DCACHE_MODE_DIRECT), plan_of({}, disposition::too_small), 0, 0, {}}),
	[](const ::testing::TestParamInfo<steps_case> &p) { return std::string(p.param.name); });

TEST(policy, flags_for_every_step_kind)
{
	struct row {
		bool write;
		step_kind k;
		bool dontcache_ok;
		bool may_buffer; // the filesystem may buffer a direct request (btrfs)
		int rwf;
		bool drop_after;
	};
	const row rows[] = {
		{true, step_kind::buffered, true, false, 0, false},
		{true, step_kind::tracked, true, false, 0, false},
		{true, step_kind::dontcache, true, false, RWF_DONTCACHE, false},
		{true, step_kind::dontcache, false, false, 0, true},
		{true, step_kind::direct, true, false, RWF_DONTCACHE, false},
		{true, step_kind::direct, false, false, 0, false},
		{true, step_kind::direct, true, true, RWF_DONTCACHE, false},
		{true, step_kind::direct, false, true, 0, true},
		{true, step_kind::buffered, false, true, 0, false},
		{false, step_kind::buffered, true, false, 0, false},
		{false, step_kind::dontcache, true, false, RWF_DONTCACHE, false},
		{false, step_kind::dontcache, false, false, 0, true},
		{false, step_kind::direct, true, false, 0, false},
		{false, step_kind::direct, false, true, 0, true},
		{false, step_kind::direct, true, true, 0, true},
	};
	for (const row &r : rows) {
		const step_flags f = flags_for(r.write, r.k, r.dontcache_ok, r.may_buffer);
		EXPECT_EQ(f.rwf, r.rwf) << step_kind_name(r.k) << " write=" << r.write << " ok=" << r.dontcache_ok
					<< " may_buffer=" << r.may_buffer;
		EXPECT_EQ(f.drop_after, r.drop_after)
			<< step_kind_name(r.k) << " write=" << r.write << " may_buffer=" << r.may_buffer;
	}
}

TEST(policy, sync_a_write_needs)
{
	struct row {
		dcache_mode m;
		bool stable;
		sync_kind want;
	};
	const row rows[] = {
		{DCACHE_MODE_BUFFERED, false, sync_kind::none},
		{DCACHE_MODE_BUFFERED, true, sync_kind::fsync},
		{DCACHE_MODE_DONTCACHE, false, sync_kind::none},
		{DCACHE_MODE_FADVISE, true, sync_kind::fsync},
		{DCACHE_MODE_DIRECT, false, sync_kind::none},
		{DCACHE_MODE_DIRECT, true, sync_kind::fsync},
		{DCACHE_MODE_DIRECT_DATA_SYNC, false, sync_kind::fdatasync},
		{DCACHE_MODE_DIRECT_DATA_SYNC, true, sync_kind::fsync},
		{DCACHE_MODE_DIRECT_FILE_SYNC, false, sync_kind::fsync},
		{DCACHE_MODE_DIRECT_FILE_SYNC, true, sync_kind::fsync},
	};
	for (const row &r : rows)
		EXPECT_EQ(write_sync(with_write(r.m), r.stable), r.want)
			<< dcache_mode_name(r.m) << " stable=" << r.stable;
}

TEST(policy, reads_try_the_page_cache_first_only_where_it_can_hit)
{
	dcache_settings s = dcache_settings_default();
	const step cached{step_kind::buffered, 0, 10, false, false};
	const step direct{step_kind::direct, 0, P, false, false};
	for (dcache_mode m : {DCACHE_MODE_BUFFERED, DCACHE_MODE_DONTCACHE}) {
		s.io_cache_read = m;
		EXPECT_TRUE(read_tries_cache_first(s, cached)) << dcache_mode_name(m);
		EXPECT_FALSE(read_tries_cache_first(s, direct)) << dcache_mode_name(m);
	}
	// fadvise drops after the READ; direct mode's small READs go DONTCACHE
	// by size, not because they are cached.
	for (dcache_mode m : {DCACHE_MODE_FADVISE, DCACHE_MODE_DIRECT}) {
		s.io_cache_read = m;
		EXPECT_FALSE(read_tries_cache_first(s, cached)) << dcache_mode_name(m);
	}
	s.io_cache_read = DCACHE_MODE_BUFFERED;
	s.cached_read_fast_path = false;
	EXPECT_FALSE(read_tries_cache_first(s, cached));
}

TEST(policy, only_a_writes_cached_pieces_run_in_the_caller)
{
	EXPECT_TRUE(write_step_in_caller(step_kind::buffered));
	EXPECT_TRUE(write_step_in_caller(step_kind::dontcache));
	EXPECT_TRUE(write_step_in_caller(step_kind::tracked));
	EXPECT_FALSE(write_step_in_caller(step_kind::direct));
}

// What the fadvise mode (and a READ whose DONTCACHE was refused) drops
// after the reply, operation by operation.
TEST(policy, drop_ranges_after_read_stable_write_and_commit)
{
	const dcache_settings fadvise = with_write(DCACHE_MODE_FADVISE);
	dcache_settings read_fadvise = dcache_settings_default();
	read_fadvise.io_cache_read = DCACHE_MODE_FADVISE;
	const dcache_settings buffered = dcache_settings_default();
	constexpr std::uint64_t MiB = 1u << 20;
	using r = std::optional<byte_range>;
	struct {
		const char *what;
		r got, want;
	} const rows[] = {
		// READ: back to the 2 MiB boundary before it, to the end at EOF
		{"fadvise READ", drop_after_read(read_fadvise, false, 3 * MiB, MiB, false),
		 byte_range{2 * MiB, 2 * MiB}},
		{"fadvise READ at EOF", drop_after_read(read_fadvise, false, 3 * MiB, 4096, true),
		 byte_range{2 * MiB, 0}},
		{"fadvise READ on a boundary", drop_after_read(read_fadvise, false, 4 * MiB, MiB, false),
		 byte_range{4 * MiB, MiB}},
		{"fadvise READ of nothing", drop_after_read(read_fadvise, false, 3 * MiB, 0, true), std::nullopt},
		{"buffered READ", drop_after_read(buffered, false, 0, MiB, false), std::nullopt},
		{"READ without its DONTCACHE", drop_after_read(buffered, true, 5 * 4096, 4096, false),
		 byte_range{0, 6 * 4096}},
		// stable WRITE: the range written
		{"fadvise stable WRITE", drop_after_stable_write(fadvise, true, 4096, 8192), byte_range{4096, 8192}},
		{"fadvise UNSTABLE WRITE", drop_after_stable_write(fadvise, false, 4096, 8192), std::nullopt},
		{"fadvise WRITE of nothing", drop_after_stable_write(fadvise, true, 4096, 0), std::nullopt},
		{"buffered stable WRITE", drop_after_stable_write(buffered, true, 4096, 8192), std::nullopt},
		// COMMIT: its range, 0 meaning to the end
		{"fadvise COMMIT", drop_after_commit(fadvise, 4096, 8192), byte_range{4096, 8192}},
		{"fadvise COMMIT of the whole file", drop_after_commit(fadvise, 0, 0), byte_range{0, 0}},
		{"buffered COMMIT", drop_after_commit(buffered, 0, 0), std::nullopt},
		{"fadvise READs, buffered WRITEs: COMMIT", drop_after_commit(read_fadvise, 0, 0), std::nullopt},
	};
	for (const auto &row : rows) {
		EXPECT_EQ(row.got.has_value(), row.want.has_value()) << row.what;
		if (row.got && row.want) {
			EXPECT_TRUE(*row.got == *row.want)
				<< row.what << ": got " << row.got->offset << "+" << row.got->length << ", want "
				<< row.want->offset << "+" << row.want->length;
		}
	}
}

// Where a step runs (docs/configuration.md, "How the io_uring backend
// issues a request"): every fact, each row against the rule that decides
// it.
TEST(placement_table, every_rule_and_what_overrides_it)
{
	step_facts uring; // an io_uring export's defaults, on the worker thread
	uring.on_caller = true;
	uring.cached_in_caller = true;
	uring.blocking_max = 32;
	auto with = [&](auto change) {
		step_facts f = uring;
		change(f);
		return f;
	};
	struct row {
		const char *what;
		step_facts f;
		placement want;
	} const rows[] = {
		{"a device-bound step, slots configured", uring, placement::blocking_slot},
		{"a cached WRITE piece", with([](step_facts &f) { f.cached_write = true; }), placement::in_caller},
		{"a cached piece of a split WRITE", with([](step_facts &f) { f.cached_write = f.split_write = true; }),
		 placement::in_caller},
		{"a cached piece, backend keeps none in the caller",
		 with([](step_facts &f) { f.cached_write = true, f.cached_in_caller = false; }),
		 placement::blocking_slot},
		{"the direct middle of a split WRITE", with([](step_facts &f) { f.split_write = true; }),
		 placement::ring},
		{"IO_Blocking_Max = 0", with([](step_facts &f) { f.blocking_max = 0; }), placement::ring},
		{"a direct READ into a registered buffer", with([](step_facts &f) { f.registered_read = true; }),
		 placement::ring},
		{"... but not in a request that runs on its thread",
		 with([](step_facts &f) { f.registered_read = f.request_blocking = true; }), placement::here},
		{"a synchronous backend", with([](step_facts &f) { f.completes_inline = true; }), placement::ring},
		{"on the completion thread", with([](step_facts &f) { f.on_caller = false; }), placement::ring},
		{"a cached piece on the completion thread",
		 with([](step_facts &f) { f.on_caller = false, f.cached_write = true; }), placement::ring},
		{"a request that runs on its thread", with([](step_facts &f) { f.request_blocking = true; }),
		 placement::here},
		{"... even off the caller, cached or split", with([](step_facts &f) {
			 f.request_blocking = true, f.on_caller = false, f.cached_write = true, f.split_write = true;
		 }),
		 placement::here},
	};
	for (const row &r : rows)
		EXPECT_EQ(static_cast<int>(place(r.f)), static_cast<int>(r.want)) << r.what;
}

TEST(policy, read_step_is_the_plans_segment)
{
	EXPECT_EQ(read_step(plan_of({}, disposition::buffered)).length, 0u);
	const step d = read_step(plan_of({{seg_kind::direct, 0, 2 * P, true}}, disposition::direct));
	EXPECT_EQ(d, (step{step_kind::direct, 0, 2 * P, true, false}));
	EXPECT_EQ(read_step(plan_of({{seg_kind::dontcache, 5, 7, false}})).kind, step_kind::dontcache);
	EXPECT_EQ(read_step(plan_of({{seg_kind::buffered, 5, 7, false}})).kind, step_kind::buffered);
}

// ---- the fallback table ------------------------------------------------------

struct fallback_case {
	attempt a;
	step_kind k;
	int rwf;
	int err;
	fallback want;
};

TEST(fallback_table, every_row_and_its_neighbours)
{
	const int DC = RWF_DONTCACHE;
	const fallback_case rows[] = {
		// success is never a fallback
		{attempt::write, step_kind::direct, DC, 0, fallback::none},
		{attempt::read, step_kind::direct, 0, 0, fallback::none},
		// WRITE direct
		{attempt::write, step_kind::direct, DC, EOPNOTSUPP, fallback::retry_without_dontcache},
		{attempt::write, step_kind::direct, 0, EOPNOTSUPP, fallback::none},
		{attempt::write, step_kind::direct, DC, EINVAL, fallback::through_page_cache},
		{attempt::write, step_kind::direct, 0, EIO, fallback::through_page_cache},
		{attempt::write, step_kind::direct, 0, ENOSPC, fallback::through_page_cache},
		{attempt::write, step_kind::direct, 0, EDQUOT, fallback::through_page_cache},
		{attempt::write, step_kind::direct, 0, EFBIG, fallback::through_page_cache},
		{attempt::write, step_kind::direct, 0, EAGAIN, fallback::none},
		{attempt::write, step_kind::direct, 0, EPERM, fallback::none},
		// WRITE through the page cache: only DONTCACHE's own refusal
		{attempt::write, step_kind::dontcache, DC, EOPNOTSUPP, fallback::retry_without_dontcache},
		{attempt::write, step_kind::dontcache, 0, EOPNOTSUPP, fallback::none},
		{attempt::write, step_kind::dontcache, DC, EIO, fallback::none},
		{attempt::write, step_kind::buffered, 0, EIO, fallback::none},
		{attempt::write, step_kind::buffered, 0, ENOSPC, fallback::none},
		{attempt::write, step_kind::tracked, 0, EINVAL, fallback::none},
		// READ
		{attempt::read, step_kind::direct, 0, EINVAL, fallback::through_page_cache},
		{attempt::read, step_kind::direct, 0, EIO, fallback::through_page_cache},
		{attempt::read, step_kind::direct, 0, ENOSPC, fallback::none},
		{attempt::read, step_kind::dontcache, DC, EOPNOTSUPP, fallback::retry_without_dontcache},
		{attempt::read, step_kind::dontcache, 0, EIO, fallback::none},
		{attempt::read, step_kind::buffered, 0, EOPNOTSUPP, fallback::none},
		// READ's RWF_NOWAIT attempt (EOPNOTSUPP with DONTCACHE in the
		// flags is DONTCACHE's, learned by the ordinary path)
		{attempt::read_nowait, step_kind::buffered, RWF_NOWAIT, EOPNOTSUPP, fallback::no_nowait},
		{attempt::read_nowait, step_kind::dontcache, RWF_NOWAIT | DC, EOPNOTSUPP, fallback::none},
		{attempt::read_nowait, step_kind::dontcache, RWF_NOWAIT | DC, EINVAL, fallback::no_nowait},
		{attempt::read_nowait, step_kind::buffered, RWF_NOWAIT, EAGAIN, fallback::none},
	};
	for (const fallback_case &c : rows)
		EXPECT_EQ(fallback_for(c.a, c.k, c.rwf, c.err), c.want)
			<< "attempt " << static_cast<int>(c.a) << " " << step_kind_name(c.k) << " rwf " << c.rwf
			<< " errno " << c.err << ": got " << fallback_name(fallback_for(c.a, c.k, c.rwf, c.err));
}

TEST(fallback_table, a_refused_direct_step_goes_the_way_of_its_edges)
{
	const step middle{step_kind::direct, P, 2 * P, true, false};
	const step w_dc = through_page_cache(with_write(DCACHE_MODE_DIRECT), attempt::write, middle);
	EXPECT_EQ(w_dc, (step{step_kind::dontcache, P, 2 * P, false, false}));
	const step w_buf = through_page_cache(with_write(DCACHE_MODE_DIRECT, true, false), attempt::write, middle);
	EXPECT_EQ(w_buf, (step{step_kind::buffered, P, 2 * P, false, true}));
	dcache_settings r = dcache_settings_default();
	r.io_cache_read = DCACHE_MODE_DIRECT;
	r.direct_misaligned_dontcache = false; // a WRITE setting: READs go DONTCACHE regardless
	EXPECT_EQ(through_page_cache(r, attempt::read, middle).kind, step_kind::dontcache);
}

} // namespace
